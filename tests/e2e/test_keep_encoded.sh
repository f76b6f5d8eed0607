#!/usr/bin/env bash
# `ftl prep --keep-encoded` on the real hymenoptera photos: a dataset that keeps each JPEG where it
# is smaller than its 299 x 299 pixels. Checked against independent references: DuckDB reads its
# rows and finds the original files' bytes in them (read_blob of the photos); and against the
# pixel dataset of the same photos: embed (one process and mpirun -np 2), train (frozen with the
# feature cache, streaming with flip, fine-tuning), sweep and eval give the same features, the same
# model tensors (read by an independent safetensors reader) and the same metrics. A damaged row, a
# later format, a foreign recipe and a truncated file fail with the file and row named, nothing left.
source "$(dirname "$0")/lib.sh"
d=$(scratch keep-encoded)
SRC="$SHARED/data/hymenoptera"
MODEL="$SHARED/models/mobilenet_v1_0.25_128.onnx"  # small and fast; its 1001 outputs are the features
DUCK="node $(dirname "$0")/../tools/duckdb_query.mjs"
READ_ST="$PY $(dirname "$0")/../ref/read_safetensors.py"
query() { $DUCK "$1" 2>&1; }

"$FTL" prep "$SRC" "$d/px" --quiet 2>/dev/null || fail keep_encoded_prep_pixels "prep failed"
if "$FTL" prep "$SRC" "$d/enc" --keep-encoded >"$d/prep.out" 2>"$d/prep.err"; then
    pass keep_encoded_prep_runs
else
    fail keep_encoded_prep_runs "$(tail -3 "$d/prep.err")"
fi

# ---- the files: smaller, version 2, and the stored JPEGs are the photos' own bytes (DuckDB)
px_bytes=$(($(stat -c %s "$d/px/train.parquet") + $(stat -c %s "$d/px/val.parquet")))
enc_bytes=$(($(stat -c %s "$d/enc/train.parquet") + $(stat -c %s "$d/enc/val.parquet")))
[ "$enc_bytes" -lt $((px_bytes / 2)) ] && pass keep_encoded_dataset_smaller ||
    fail keep_encoded_dataset_smaller "$enc_bytes bytes vs $px_bytes as pixels"
meta=$(query "SELECT decode(value) AS v FROM parquet_kv_metadata('$d/enc/val.parquet') WHERE decode(key) = 'ftl.format'")
[ "$meta" = '[{"v":"ftl-dataset-2"}]' ] && pass keep_encoded_format_version_2 || fail keep_encoded_format_version_2 "$meta"
rows=$(query "WITH ds AS (SELECT path, image, image_format FROM read_parquet(['$d/enc/train.parquet', '$d/enc/val.parquet'])),
  photos AS (SELECT filename, content FROM read_blob('$SRC/*/*/*'))
  SELECT image_format AS f, count(*) AS n,
         count(*) FILTER (WHERE image_format = 'rgb' AND octet_length(image) = 299 * 299 * 3) AS rgb_ok,
         count(*) FILTER (WHERE image_format = 'jpeg' AND md5(image) = (SELECT md5(content) FROM photos
                                                            WHERE filename = '$SRC/' || ds.path)) AS same_bytes
  FROM ds GROUP BY ALL ORDER BY f")
encoded=$(sed -n 's/.*kept encoded: \([0-9]*\) of 397 images.*/\1/p' "$d/prep.out")
$PY - "$rows" "${encoded:-none}" <<'PYEOF' && pass keep_encoded_rows_hold_the_original_files || fail keep_encoded_rows_hold_the_original_files "$rows; summary says ${encoded:-nothing}"
import json, sys
rows = {r["f"]: r for r in json.loads(sys.argv[1])}
assert set(rows) <= {"jpeg", "rgb"}, rows
jpeg = rows["jpeg"]
assert jpeg["n"] >= 300 and jpeg["same_bytes"] == jpeg["n"], jpeg  # every stored JPEG is its photo's bytes
assert str(jpeg["n"]) == sys.argv[2], (jpeg["n"], sys.argv[2])
rgb = rows.get("rgb", {"n": 0, "rgb_ok": 0})
assert rgb["rgb_ok"] == rgb["n"] and jpeg["n"] + rgb["n"] == 397, rows
PYEOF
# photos larger than their pixels stay pixels: as many rgb rows as photos of more than 299*299*3 bytes
big=$(find "$SRC" -type f \( -name '*.jpg' -o -name '*.jpeg' \) -size +268203c | wc -l)
nrgb=$(query "SELECT count(*) AS n FROM read_parquet('$d/enc/*.parquet') WHERE image_format = 'rgb'")
[ "$nrgb" = "[{\"n\":$big}]" ] && pass keep_encoded_large_photos_stay_pixels || fail keep_encoded_large_photos_stay_pixels "$nrgb vs $big photos"
# the same labels, paths and row groups as the pixel dataset (the loader's order depends on them)
same=$(query "SELECT (SELECT md5(string_agg(label || path, ',' ORDER BY file_row_number)) FROM read_parquet('$d/px/train.parquet', file_row_number=true))
            = (SELECT md5(string_agg(label || path, ',' ORDER BY file_row_number)) FROM read_parquet('$d/enc/train.parquet', file_row_number=true)) AS rows_equal,
            (SELECT string_agg(row_group_num_rows::VARCHAR, ',' ORDER BY row_group_id) FROM (SELECT DISTINCT row_group_id, row_group_num_rows FROM parquet_metadata('$d/px/train.parquet')))
            = (SELECT string_agg(row_group_num_rows::VARCHAR, ',' ORDER BY row_group_id) FROM (SELECT DISTINCT row_group_id, row_group_num_rows FROM parquet_metadata('$d/enc/train.parquet'))) AS groups_equal")
[ "$same" = '[{"rows_equal":true,"groups_equal":true}]' ] && pass keep_encoded_same_rows_and_row_groups || fail keep_encoded_same_rows_and_row_groups "$same"

tensors_equal() {  # A.ftl B.ftl: every tensor of the two models has the same values
    $READ_ST "$1" >"$1.json" && $READ_ST "$2" >"$2.json" && $PY - "$1.json" "$2.json" <<'PYEOF'
import json, sys
a, b = (json.load(open(p))["tensors"] for p in sys.argv[1:3])
assert a and a.keys() == b.keys(), (sorted(a), sorted(b))
for k in a:
    assert a[k] == b[k], k
PYEOF
}
# ---- features: the same values from both forms (the decoded pixels are prep's)
features_md5() { query "SELECT md5(string_agg(md5(features) || label || path, '' ORDER BY path)) AS h, count(*) AS n FROM read_parquet('$1')"; }
for split in train val; do
    "$FTL" embed "$d/px/$split.parquet" --backbone "$MODEL" "$d/px-$split.features.parquet" --quiet 2>/dev/null
    "$FTL" embed "$d/enc/$split.parquet" --backbone "$MODEL" "$d/enc-$split.features.parquet" --quiet 2>"$d/embed-$split.err"
    a=$(features_md5 "$d/px-$split.features.parquet")
    b=$(features_md5 "$d/enc-$split.features.parquet")
    [ -n "$a" ] && [ "$a" = "$b" ] && grep -q '"n":' <<<"$a" && pass "keep_encoded_embed_${split}_same_features" ||
        fail "keep_encoded_embed_${split}_same_features" "$a vs $b $(tail -2 "$d/embed-$split.err")"
done
# one reader or many: the same features (the loader's order is the same whatever the thread count)
"$FTL" embed "$d/enc/val.parquet" --backbone "$MODEL" "$d/enc-val-1.features.parquet" --loader-threads 1 --quiet 2>/dev/null
[ "$(features_md5 "$d/enc-val-1.features.parquet")" = "$(features_md5 "$d/px-val.features.parquet")" ] &&
    pass keep_encoded_one_loader_thread_same_features || fail keep_encoded_one_loader_thread_same_features "differ"

if command -v mpirun >/dev/null 2>&1 && "$FTL" --version | grep -q 'Open MPI'; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    mpirun --oversubscribe --bind-to none -np 2 "$FTL" embed "$d/enc/train.parquet" --backbone "$MODEL" \
        "$d/enc-mpi.features.parquet" --quiet >/dev/null 2>"$d/mpi.err"
    [ "$(features_md5 "$d/enc-mpi.features.parquet")" = "$(features_md5 "$d/px-train.features.parquet")" ] &&
        pass keep_encoded_mpirun_np2_same_features || fail keep_encoded_mpirun_np2_same_features "$(tail -3 "$d/mpi.err")"
    # the same model for any N (the same global batch: 2 ranks x 8 = 16): two ranks on the encoded
    # dataset, one process on the pixels; the ranks' gradient sums round differently, so within the
    # tolerance test_dist.sh holds "the same model" to
    mpirun --oversubscribe --bind-to none -np 2 "$FTL" train "$d/enc/train.parquet" --val "$d/enc/val.parquet" \
        --backbone "$MODEL" --seed 3 --epochs 3 --batch 8 --threads 1 --out "$d/mpi-enc.ftl" --quiet >/dev/null 2>"$d/mpi-train.err"
    "$FTL" train "$d/px/train.parquet" --val "$d/px/val.parquet" --backbone "$MODEL" --seed 3 --epochs 3 --batch 16 \
        --out "$d/one-px.ftl" --quiet >/dev/null 2>&1
    if $READ_ST "$d/one-px.ftl" >"$d/one-px.json" && $READ_ST "$d/mpi-enc.ftl" >"$d/mpi-enc.json" &&
        $PY - "$d/one-px.json" "$d/mpi-enc.json" >"$d/mpi.cmp" 2>&1 <<'PYEOF'; then
import json, sys
a, b = (json.load(open(p))["tensors"] for p in sys.argv[1:3])
for t in ("head.kernel", "head.bias"):
    va, vb = [float(v) for v in a[t]["values"]], [float(v) for v in b[t]["values"]]
    worst = max(abs(p - q) / max(1e-3, abs(p)) for p, q in zip(va, vb))
    print(t, "worst relative difference", worst)
    assert len(va) == len(vb) and worst <= 1e-4, (t, worst)
PYEOF
        pass keep_encoded_mpirun_np2_same_model
    else
        fail keep_encoded_mpirun_np2_same_model "$(tail -n 3 "$d/mpi-train.err" "$d/mpi.cmp")"
    fi
else
    skip keep_encoded_mpirun_np2_same_features "mpirun or an MPI build of ftl is not available"
    skip keep_encoded_mpirun_np2_same_model "mpirun or an MPI build of ftl is not available"
fi

# ---- models: the same tensors from both forms
train_both() {  # NAME train-options...: trains on both forms and compares the models and the val metrics
    local name=$1
    shift
    local ok=1
    for form in px enc; do
        "$FTL" train "$d/$form/train.parquet" --val "$d/$form/val.parquet" --backbone "$MODEL" --seed 3 "$@" \
            --cache-dir "$d/cache" --out "$d/$name-$form.ftl" >"$d/$name-$form.out" 2>"$d/$name-$form.err" || ok=0
    done
    if [ $ok = 1 ] && tensors_equal "$d/$name-px.ftl" "$d/$name-enc.ftl" >"$d/$name.cmp" 2>&1 &&
        [ "$(grep -o 'val_acc: [0-9.]*' "$d/$name-px.out")" = "$(grep -o 'val_acc: [0-9.]*' "$d/$name-enc.out")" ]; then
        pass "keep_encoded_${name}_same_model"
    else
        fail "keep_encoded_${name}_same_model" "$(tail -n 3 "$d/$name-enc.err" "$d/$name.cmp")"
    fi
}
train_both frozen --epochs 3 --batch 16
train_both streaming_flip --epochs 2 --batch 16 --augment flip --no-feature-cache
train_both fine_tune --epochs 2 --batch 16 --fine-tune-last 1 --fine-tune-epochs 1 --fine-tune-lr 1e-4
# one cache folder for both forms, yet not shared: each records its own dataset's fingerprint
grep -q 'feature cache: computing' "$d/frozen-enc.err" && pass keep_encoded_own_feature_cache ||
    fail keep_encoded_own_feature_cache "$(grep 'feature cache' "$d/frozen-enc.err" | head -3)"

for form in px enc; do
    "$FTL" sweep "$d/$form/train.parquet" --val "$d/$form/val.parquet" --backbone "$MODEL" --epochs 2 --seed 5 \
        --grid lr=1e-3,1e-2 --out "$d/sweep-$form.ftl" --quiet >/dev/null 2>"$d/sweep-$form.err"
done
tensors_equal "$d/sweep-px.ftl" "$d/sweep-enc.ftl" >"$d/sweep.cmp" 2>&1 && pass keep_encoded_sweep_same_best_model ||
    fail keep_encoded_sweep_same_best_model "$(tail -n 3 "$d/sweep-enc.err" "$d/sweep.cmp")"

# eval and predictions of one model on either form of val: the same numbers
for form in px enc; do
    "$FTL" eval "$d/frozen-px.ftl" "$d/$form/val.parquet" --json "$d/eval-$form.json" --predictions "$d/pred-$form.csv" \
        --quiet >/dev/null 2>"$d/eval-$form.err"
done
[ -s "$d/eval-px.json" ] && cmp -s "$d/eval-px.json" "$d/eval-enc.json" && cmp -s "$d/pred-px.csv" "$d/pred-enc.csv" &&
    pass keep_encoded_eval_same_metrics_and_predictions || fail keep_encoded_eval_same_metrics_and_predictions "$(tail -2 "$d/eval-enc.err")"

NO_INT8=$(no_int8_reason)
if [ -n "$NO_INT8" ]; then
    skip keep_encoded_int8_same_calibration "$NO_INT8"
else
    for form in px enc; do
        "$FTL" embed "$d/$form/val.parquet" --backbone "$MODEL" --precision int8 --calibration "$d/$form/train.parquet" \
            "$d/int8-$form.features.parquet" --quiet >/dev/null 2>"$d/int8-$form.err"
    done
    [ -s "$d/int8-px.features.parquet" ] && [ "$(features_md5 "$d/int8-px.features.parquet")" = "$(features_md5 "$d/int8-enc.features.parquet")" ] &&
        pass keep_encoded_int8_same_calibration || fail keep_encoded_int8_same_calibration "$(tail -2 "$d/int8-enc.err")"
fi

# ---- Python: ftl.prep(keep_encoded=True) writes the same rows as the CLI
PYTHONPATH="$BUILD/python" $PY - "$SRC" "$d/py" "$d" "$MODEL" >"$d/py.out" 2>&1 <<'PYEOF'
import sys, ftl
src, out, d, model = sys.argv[1:5]
s = ftl.prep(src, out, keep_encoded=True, verbose=0)
print("encoded_rows", s["encoded_rows"])
# Model.evaluate and ftl.train read the encoded dataset as the pixel one
m = ftl.Model.load(d + "/frozen-px.ftl")
a, b = m.evaluate(d + "/px/val.parquet", verbose=0), m.evaluate(out + "/val.parquet", verbose=0)
assert a == b, (a, b)
print("evaluate equal", a)
PYEOF
py_same=$(query "SELECT (SELECT md5(string_agg(md5(image) || image_format, '' ORDER BY path)) FROM read_parquet('$d/py/*.parquet'))
                      = (SELECT md5(string_agg(md5(image) || image_format, '' ORDER BY path)) FROM read_parquet('$d/enc/*.parquet')) AS same")
grep -q "encoded_rows $encoded" "$d/py.out" && grep -q "evaluate equal" "$d/py.out" && [ "$py_same" = '[{"same":true}]' ] && pass keep_encoded_python_prep ||
    fail keep_encoded_python_prep "$(tail -3 "$d/py.out") $py_same"

# ---- bad input: a damaged row names the file, row and path; nothing is left behind
KV="KV_METADATA {'ftl.format': 'ftl-dataset-2', 'ftl.classes': '[\"ants\", \"bees\"]', 'ftl.image_size': '299',
                 'ftl.resize': 'pillow-9.4-thumbnail-lanczos+paste-centred-white'}"
damaged() {  # OUT EXPR-FOR-ROW-5 [KV]: val with row 5's image replaced
    query "COPY (SELECT label, CASE WHEN file_row_number = 5 THEN $2 ELSE image END AS image, path, image_format
                  FROM read_parquet('$d/enc/val.parquet', file_row_number=true) ORDER BY file_row_number)
           TO '$1' (FORMAT parquet, ${3:-$KV})" >/dev/null
}
row5=$(query "SELECT path, image_format AS f FROM read_parquet('$d/enc/val.parquet', file_row_number=true) WHERE file_row_number = 5")
p5=$($PY -c 'import json,sys; print(json.loads(sys.argv[1])[0]["path"])' "$row5")
damaged "$d/truncated.parquet" "image[1:2000]"
mkdir -p "$d/out"
expect_error keep_encoded_truncated_row_named 1 "truncated.parquet: row group 0: row 5, $p5: its stored jpeg does not decode" \
    "$FTL_SAN" embed "$d/truncated.parquet" --backbone "$MODEL" "$d/out/t.features.parquet"
damaged "$d/garbage.parquet" "'not a picture'::BLOB"
expect_error keep_encoded_garbage_row_named 1 "garbage.parquet: row group 0: row 5, $p5: its stored jpeg does not decode" \
    "$FTL_SAN" eval "$d/frozen-px.ftl" "$d/garbage.parquet" --json "$d/out/e.json"
damaged "$d/later.parquet" "image" "KV_METADATA {'ftl.format': 'ftl-dataset-3', 'ftl.image_size': '299'}"
expect_error keep_encoded_later_format_refused 1 "dataset format 'ftl-dataset-3' is newer than this ftl reads" \
    "$FTL_SAN" embed "$d/later.parquet" --backbone "$MODEL" "$d/out/l.features.parquet"
damaged "$d/recipe.parquet" "image" "KV_METADATA {'ftl.format': 'ftl-dataset-2', 'ftl.image_size': '299', 'ftl.resize': 'bicubic'}"
expect_error keep_encoded_other_recipe_refused 1 "made with the recipe 'bicubic'" \
    "$FTL_SAN" embed "$d/recipe.parquet" --backbone "$MODEL" "$d/out/r.features.parquet"
expect_error keep_encoded_other_image_size_refused 2 "keeps its images encoded at ftl.image_size = 299" \
    "$FTL_SAN" embed "$d/enc/val.parquet" --backbone "$MODEL" --image-size 128 "$d/out/s.features.parquet"
cp "$d/enc/val.parquet" "$d/cut.parquet"
truncate -s $(($(stat -c %s "$d/cut.parquet") / 2)) "$d/cut.parquet"
expect_error keep_encoded_truncated_file_refused 1 "cut.parquet" \
    "$FTL_SAN" train "$d/enc/train.parquet" --val "$d/cut.parquet" --backbone "$MODEL" --epochs 1 --out "$d/out/m.ftl"
left=$(ls -A "$d/out")
[ -z "$left" ] && pass keep_encoded_failures_leave_nothing || fail keep_encoded_failures_leave_nothing "$left"
finish
