#!/usr/bin/env bash
# What ftl train and ftl sweep can know before their work is refused (or warned about) before it:
# before any `feature cache:` line and with no cache file written. A read-only --checkpoint or --log
# folder, a --resume checkpoint of other preprocessing or another backbone, a label outside the class
# list (from the column statistics, and from the rows of a file without them), a class without images
# (a warning naming it; --strict: an error). Also the messages that once named the wrong thing:
# --embed-batch, and eval/predict with a --backbone of another sha256.
source "$(dirname "$0")/lib.sh"
# a read-only folder a killed earlier run left (see below) must not stop the scratch folder's removal
chattr -i "$BUILD/test-tmp/e2e-train_early_checks/ro" 2>/dev/null
umount "$BUILD/test-tmp/e2e-train_early_checks/ro" 2>/dev/null
d=$(scratch train_early_checks)
MODEL="$SHARED/models/mobilenet_v1_0.25_128.onnx"       # small and fast; features 'logits'
OTHER="$SHARED/models/mobilenet_v1_1.0_224_embedding.onnx" # another sha256, no tensor 'logits'
TOOLS="$(cd "$(dirname "$0")/../tools" && pwd)"
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --size 128 --quiet 2>/dev/null || fail early_prep "prep failed"
T="$d/ds/train.parquet"
V="$d/ds/val.parquet"
RUN=(--backbone "$MODEL" --epochs 1) # not --quiet: the `feature cache:` lines must show

# refused_early NAME EXIT_CODE REGEX CACHE_DIR command...: the command fails with EXIT_CODE and a
# message matching REGEX, without a sanitizer report, before any `feature cache:` line, and leaves
# no file under CACHE_DIR (the command's --cache-dir).
refused_early() {
    local name=$1 want_rc=$2 pattern=$3 cache=$4
    shift 4
    local out rc
    out=$("$@" 2>&1)
    rc=$?
    if grep -q -E 'AddressSanitizer|runtime error:|LeakSanitizer' <<<"$out"; then
        fail "$name" "sanitizer report: $(head -c 600 <<<"$out")"
    elif [ "$rc" -ne "$want_rc" ]; then
        fail "$name" "exit status $rc, expected $want_rc: $(tail -c 400 <<<"$out")"
    elif ! grep -q -E -- "$pattern" <<<"$out"; then
        fail "$name" "output does not match /$pattern/: $(tail -c 400 <<<"$out")"
    elif grep -q 'feature cache:' <<<"$out"; then
        fail "$name" "refused only after the feature cache: $(grep 'feature cache:' <<<"$out" | head -2)"
    elif [ -n "$(find "$cache" -type f 2>/dev/null)" ]; then
        fail "$name" "left cache files: $(find "$cache" -type f | head -3)"
    else
        pass "$name"
    fi
}

# ---- messages that name the right thing
expect_error train_embed_batch_names_its_option 2 '^ftl train: error: --embed-batch must be 1\.\.4096, not 0$' \
    "$FTL_SAN" train "$T" --backbone "$MODEL" --out "$d/eb.ftl" --embed-batch 0
"$FTL" train "$T" --val "$V" "${RUN[@]}" --checkpoint "$d/ck/c-{epoch}.ckpt" --cache-dir "$d/cache" --out "$d/m.ftl" \
    >/dev/null 2>"$d/m.err" || fail early_train "$(tail -3 "$d/m.err")"
ANT="$SHARED/data/hymenoptera/val/ants/10308379_1b6c72e180.jpg"
for cmd in eval predict; do
    if [ $cmd = eval ]; then args=("$d/m.ftl" "$V"); else args=("$d/m.ftl" "$ANT"); fi
    err=$("$FTL_SAN" $cmd "${args[@]}" --backbone "$OTHER" 2>&1 >/dev/null)
    rc=$?
    [ $rc -eq 2 ] && ! grep -q 'features-from' <<<"$err" &&
        grep -q -E "mobilenet_v1_1.0_224_embedding.onnx has sha256 [0-9a-f]{16}\.\.\., but $d/m.ftl was trained on a backbone with sha256 [0-9a-f]{16}\.\.\." <<<"$err" &&
        pass "${cmd}_another_backbone_names_the_sha256_mismatch" ||
        fail "${cmd}_another_backbone_names_the_sha256_mismatch" "rc $rc: $err"
done

# ---- output folders: a file where the folder should be, and a read-only folder
touch "$d/a-file"
refused_early checkpoint_folder_that_is_a_file_refused_early 1 \
    "--checkpoint $d/a-file/c-\{epoch\}\.ckpt: cannot create folder $d/a-file: a file is in the way" "$d/cache-f" \
    "$FTL_SAN" train "$T" --val "$V" "${RUN[@]}" --checkpoint "$d/a-file/c-{epoch}.ckpt" --cache-dir "$d/cache-f" --out "$d/f.ftl"
# As root, permission bits do not stop writes: an immutable folder (chattr +i) or a read-only bind
# mount does; the cleanup undoes either.
mkdir -p "$d/ro"
ro_how=""
if [ "$(id -u)" -ne 0 ]; then
    chmod a-w "$d/ro" && ro_how="chmod a-w"
elif command -v chattr >/dev/null && chattr +i "$d/ro" 2>/dev/null; then
    ro_how="chattr +i"
    trap 'chattr -i "$d/ro" 2>/dev/null' EXIT
elif mount --bind "$d/ro" "$d/ro" 2>/dev/null && mount -o remount,bind,ro "$d/ro" 2>/dev/null; then
    ro_how="a read-only bind mount"
    trap 'umount "$d/ro" 2>/dev/null' EXIT
fi
if [ -z "$ro_how" ]; then
    skip checkpoint_folder_read_only_refused_early "no way to make a read-only folder as root here (chattr +i and bind mounts refused)"
elif touch "$d/ro/probe" 2>/dev/null; then
    rm -f "$d/ro/probe"
    skip checkpoint_folder_read_only_refused_early "$ro_how did not stop writes on this filesystem"
else
    refused_early checkpoint_folder_read_only_refused_early 1 "--checkpoint $d/ro/c-\{epoch\}\.ckpt: cannot write into $d/ro: " \
        "$d/cache-ro" "$FTL_SAN" train "$T" --val "$V" "${RUN[@]}" --checkpoint "$d/ro/c-{epoch}.ckpt" --cache-dir "$d/cache-ro" \
        --out "$d/ro.ftl"
    refused_early log_folder_read_only_refused_early 1 "--log $d/ro/run\.jsonl: cannot write into $d/ro: " \
        "$d/cache-ro" "$FTL_SAN" train "$T" --val "$V" "${RUN[@]}" --log "$d/ro/run.jsonl" --cache-dir "$d/cache-ro" \
        --out "$d/ro.ftl"
fi

# ---- --resume of a checkpoint of other preprocessing, or of another backbone
refused_early resume_other_preprocessing_refused_early 2 \
    "cannot resume from $d/ck/c-1\.ckpt: ftl\.input_scaling is .*\"scale\":\"tf\".* in the checkpoint but .*\"scale\":\"torch\".* here" \
    "$d/cache-p" "$FTL_SAN" train "$T" --val "$V" "${RUN[@]}" --epochs 2 --input-scale torch --resume "$d/ck/c-1.ckpt" \
    --cache-dir "$d/cache-p" --out "$d/p.ftl"
refused_early resume_other_backbone_refused_early 2 \
    "cannot resume from $d/ck/c-1\.ckpt: it was trained on features of another backbone" \
    "$d/cache-b" "$FTL" train "$T" --val "$V" "${RUN[@]}" --backbone "$OTHER" --epochs 2 --resume "$d/ck/c-1.ckpt" \
    --cache-dir "$d/cache-b" --out "$d/b.ftl"

# ---- labels against the class list, and classes without images (datasets made by DuckDB, and by
# hyparquet-writer without column statistics)
if [ ! -d "$INTEROP_NODE_DIR/node_modules" ]; then
    for t in label_out_of_range_from_statistics label_out_of_range_from_rows empty_class sweep_labels; do
        skip "$t" "the interop tools are not installed (make test-deps)"
    done
else
    Q=(node "$TOOLS/duckdb_query.mjs")
    REWRITE=(node "$TOOLS/dataset_rewrite.mjs")
    BEES5="CASE WHEN path LIKE '%/bees/%' AND file_row_number % 7 = 3 THEN 5 ELSE label END AS label"
    "${Q[@]}" "COPY (SELECT $BEES5, image, path FROM read_parquet('$T', file_row_number = true)) TO '$d/bad-stats.parquet'
        (FORMAT parquet, KV_METADATA {'ftl.classes': '[\"ants\", \"bees\"]', 'ftl.image_size': '128'})" >/dev/null ||
        fail early_make_datasets "DuckDB could not write bad-stats.parquet"
    "${REWRITE[@]}" "$T" "$d/bad-rows.parquet" "SELECT $BEES5, image, path FROM src" >/dev/null &&
        "${REWRITE[@]}" "$V" "$d/bad-val.parquet" "SELECT $BEES5, image, path FROM src" >/dev/null &&
        "${REWRITE[@]}" "$T" "$d/ants.parquet" "SELECT * FROM src WHERE label = 0" >/dev/null &&
        "${REWRITE[@]}" "$V" "$d/val-ants.parquet" "SELECT * FROM src WHERE label = 0" >/dev/null ||
        fail early_make_datasets "dataset_rewrite.mjs failed"
    # the independent reader's view: bees relabelled 5, every label of ants.parquet 0
    "${Q[@]}" "SELECT count(*) AS n FROM read_parquet('$d/bad-rows.parquet') WHERE label = 5" | grep -q -E '"n":(1[0-9]|2[0-9])' &&
        "${Q[@]}" "SELECT count(*) AS n FROM read_parquet('$d/ants.parquet') WHERE label <> 0" | grep -q '"n":0' ||
        fail early_datasets_as_meant "$("${Q[@]}" "SELECT label, count(*) FROM read_parquet('$d/bad-rows.parquet') GROUP BY label")"
    refused_early label_out_of_range_from_statistics 1 \
        "bad-stats\.parquet: row group 0: its largest label 5 is not a class: the dataset has 2 classes \(labels 0\.\.1\)" \
        "$d/cache-l1" "$FTL_SAN" train "$d/bad-stats.parquet" --val "$V" "${RUN[@]}" --cache-dir "$d/cache-l1" --out "$d/l1.ftl"
    refused_early label_out_of_range_from_rows 1 \
        "bad-rows\.parquet: row group 0: row [0-9]+: label 5 is not a class: the dataset has 2 classes \(labels 0\.\.1\)" \
        "$d/cache-l2" "$FTL_SAN" train "$d/bad-rows.parquet" --val "$V" "${RUN[@]}" --cache-dir "$d/cache-l2" --out "$d/l2.ftl"
    refused_early label_out_of_range_in_val 1 "bad-val\.parquet: row group 0: row [0-9]+: label 5 is not a class" \
        "$d/cache-l3" "$FTL_SAN" train "$T" --val "$d/bad-val.parquet" "${RUN[@]}" --cache-dir "$d/cache-l3" --out "$d/l3.ftl"
    # a class without images: a warning naming it, before the work; the run goes on
    "$FTL" train "$d/ants.parquet" --val "$d/val-ants.parquet" "${RUN[@]}" --cache-dir "$d/cache-e" --out "$d/e.ftl" \
        >"$d/e.out" 2>&1
    rc=$?
    warn_line=$(grep -n 'ants.parquet has no images of 1 of the 2 classes: "bees" (label 1); the head' "$d/e.out" | head -1 | cut -d: -f1)
    cache_line=$(grep -n 'feature cache:' "$d/e.out" | head -1 | cut -d: -f1)
    if [ $rc -eq 0 ] && [ -n "$warn_line" ] && [ -n "$cache_line" ] && [ "$warn_line" -lt "$cache_line" ] &&
        grep -q 'val-ants.parquet has no images of 1 of the 2 classes: "bees" (label 1); val_acc and val_loss do not measure them' "$d/e.out"; then
        pass empty_class_warned_before_the_work
    else
        fail empty_class_warned_before_the_work "rc $rc: $(head -c 600 "$d/e.out")"
    fi
    ! grep -q 'has no images' "$d/m.err" && pass empty_class_no_warning_when_every_class_has_images ||
        fail empty_class_no_warning_when_every_class_has_images "$(grep 'has no images' "$d/m.err")"
    refused_early empty_class_strict_refused_early 2 \
        'ants\.parquet has no images of 1 of the 2 classes: "bees" \(label 1\) \(--strict\)' \
        "$d/cache-s" "$FTL_SAN" train "$d/ants.parquet" --val "$V" "${RUN[@]}" --strict --cache-dir "$d/cache-s" --out "$d/s.ftl"
    # ftl sweep runs the same checks before its features
    mkdir -p "$d/sw"
    SWEEP=(--val "$V" --backbone "$MODEL" --epochs 1 --grid lr=1e-3,1e-2)
    refused_early sweep_label_out_of_range_refused_early 1 "bad-rows\.parquet: row group 0: row [0-9]+: label 5 is not a class" \
        "$d/cache-w1" "$FTL_SAN" sweep "$d/bad-rows.parquet" "${SWEEP[@]}" --cache-dir "$d/cache-w1" --out "$d/sw/w1.ftl"
    refused_early sweep_empty_class_strict_refused_early 2 'ants\.parquet has no images of 1 of the 2 classes: "bees" \(label 1\) \(--strict\)' \
        "$d/cache-w2" "$FTL_SAN" sweep "$d/ants.parquet" "${SWEEP[@]}" --strict --cache-dir "$d/cache-w2" --out "$d/sw/w2.ftl"
    # Python: strict= is a keyword of ftl.train, with the same refusal
    if ls "$BUILD"/python/ftl/_ftl*.so >/dev/null 2>&1; then
        out=$(cd "$d" && PYTHONPATH="$BUILD/python" "$PY" - "$d/ants.parquet" "$V" "$MODEL" "$d/py.ftl" "$d/cache-py" 2>&1 <<'PYEOF'
import sys, ftl
train, val, backbone, out, cache = sys.argv[1:]
assert "strict" in ftl.train_options(), sorted(ftl.train_options())
try:
    ftl.train(train, val, backbone=backbone, out=out, epochs=1, strict=True, cache_dir=cache, verbose=0)
except Exception as e:
    print("refused:", e)
else:
    print("trained")
PYEOF
)
        grep -q -E 'refused: .*ants.parquet has no images of 1 of the 2 classes: "bees" \(label 1\) \((--)?strict\)' <<<"$out" &&
            [ -z "$(find "$d/cache-py" -type f 2>/dev/null)" ] && pass python_strict_keyword_refuses_an_empty_class ||
            fail python_strict_keyword_refuses_an_empty_class "$out"
    else
        skip python_strict_keyword_refuses_an_empty_class "the Python package is not built (make python)"
    fi
fi

# ---- ftl sweep --resume: a trial checkpoint of other preprocessing is refused before the features
"$FTL" train "$T" --val "$V" "${RUN[@]}" --input-scale torch --checkpoint "$d/torch/c-{epoch}.ckpt" --cache-dir "$d/cache-t" \
    --out "$d/torch.ftl" >/dev/null 2>&1 || fail early_torch_checkpoint "training with --input-scale torch failed"
mkdir -p "$d/sr"
SR=(--val "$V" --backbone "$MODEL" --epochs 2 --grid lr=1e-3,1e-2 --cache-dir "$d/sr/cache" --out "$d/sr/best.ftl")
"$FTL" sweep "$T" "${SR[@]}" >/dev/null 2>"$d/sr.err" || fail early_sweep "$(tail -3 "$d/sr.err")"
rm -f "$d/sr/best.trials/trial-0001.result.json" "$d/sr/best.trials/trial-0001.ftl" # as if killed mid-trial
cp "$d/torch/c-1.ckpt" "$d/sr/best.trials/trial-0001.ckpt"
before=$(find "$d/sr/cache" -type f | sort)
out=$("$FTL" sweep "$T" "${SR[@]}" --resume 2>&1)
rc=$?
[ $rc -ne 0 ] && ! grep -q 'feature cache:' <<<"$out" && [ "$(find "$d/sr/cache" -type f | sort)" = "$before" ] &&
    grep -q "cannot resume from $d/sr/best.trials/trial-0001.ckpt: ftl.input_scaling is" <<<"$out" &&
    pass sweep_resume_other_preprocessing_refused_early || fail sweep_resume_other_preprocessing_refused_early "rc $rc: $out"
finish
