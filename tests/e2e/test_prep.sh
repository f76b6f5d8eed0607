#!/usr/bin/env bash
# ftl prep end to end on the real hymenoptera photos: row contents checked with DuckDB against
# the folder listing, pixels against Pillow's recipe, determinism across thread counts, the
# seeded split, and every documented bad-input case (under ASan+UBSan).
source "$(dirname "$0")/lib.sh"
d=$(scratch prep)
SRC="$SHARED/data/hymenoptera"
DUCK="node $(dirname "$0")/../tools/duckdb_query.mjs"
query() { $DUCK "$1"; }

# ---- the main run
if "$FTL" prep "$SRC" "$d/out" --threads 2 >"$d/prep.out" 2>"$d/prep.err"; then
    pass prep_hymenoptera_exit_0
else
    fail prep_hymenoptera_exit_0 "$(cat "$d/prep.err")"
fi
grep -q -E 'skipping .*train/ants/imageNotFound\.gif: unsupported image format GIF' "$d/prep.err" &&
    pass prep_warns_about_gif_placeholder || fail prep_warns_about_gif_placeholder "$(cat "$d/prep.err")"
grep -q 'skipped 1 file' "$d/prep.out" && pass prep_summary_counts_skipped || fail prep_summary_counts_skipped "$(cat "$d/prep.out")"

# Expected (label, path) pairs from the folder listing: label = index of the sorted class folder.
expected_rows() {  # split
    local i=0
    for c in $(ls "$SRC/$1" | LC_ALL=C sort); do
        (cd "$SRC" && find "$1/$c" -type f \( -iname '*.jpg' -o -iname '*.jpeg' -o -iname '*.png' \)) |
            while IFS= read -r p; do printf '%d\t%s\n' "$i" "$p"; done
        i=$((i + 1))
    done | LC_ALL=C sort
}
for split in train val; do
    expected_rows "$split" >"$d/expected_$split.tsv"
    query "SELECT label, path FROM read_parquet('$d/out/$split.parquet')" |
        $PY -c 'import json,sys; [print("%d\t%s" % (r["label"], r["path"])) for r in json.load(sys.stdin)]' |
        LC_ALL=C sort >"$d/got_$split.tsv"
    if [ -s "$d/expected_$split.tsv" ] && cmp -s "$d/expected_$split.tsv" "$d/got_$split.tsv"; then
        pass "prep_${split}_rows_match_folders_duckdb"
    else
        fail "prep_${split}_rows_match_folders_duckdb" "$(diff "$d/expected_$split.tsv" "$d/got_$split.tsv" | head -5)"
    fi
done

# Metadata and image sizes as DuckDB sees them.
meta=$(query "SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata('$d/out/train.parquet')")
$PY - "$meta" <<'PYEOF' && pass prep_metadata || fail prep_metadata "$meta"
import json, sys
kv = {r["k"]: r["v"] for r in json.loads(sys.argv[1])}
assert json.loads(kv["ftl.classes"]) == ["ants", "bees"], kv
assert kv["ftl.image_size"] == "299" and kv["ftl.split"] == "train" and kv["ftl.split_method"] == "folders", kv
assert json.loads(kv["ftl.class_counts"]) == [123, 121], kv
PYEOF
sizes=$(query "SELECT min(octet_length(image)) AS lo, max(octet_length(image)) AS hi, count(*) AS n FROM read_parquet('$d/out/train.parquet')")
[ "$sizes" = '[{"lo":268203,"hi":268203,"n":244}]' ] && pass prep_image_bytes_are_299x299x3 || fail prep_image_bytes_are_299x299x3 "$sizes"

# Pixels of a few rows against Pillow's recipe run on the source files.
inlist=$(printf "'%s'," "train/ants/0013035.jpg" "train/ants/ant photos.jpg" "train/bees/2405441001_b06c36fa72.jpg" "train/ants/formica.jpeg")
query "SELECT path, hex(image) AS hex FROM read_parquet('$d/out/train.parquet') WHERE path IN (${inlist%,})" >"$d/rows.json"
PYTHONPATH="$(dirname "$0")/../tools" $PY - "$d/rows.json" "$SRC" <<'PYEOF' && pass prep_pixels_match_pillow_recipe || fail prep_pixels_match_pillow_recipe "see log"
import json, sys
from pillow_recipe import scale_image
rows = json.load(open(sys.argv[1]))
assert len(rows) == 4, rows
for r in rows:
    _, ref = scale_image(sys.argv[2] + "/" + r["path"], 299)
    got = bytes.fromhex(r["hex"])
    diffs = [abs(a - b) for a, b in zip(got, ref)]
    mean, worst = sum(diffs) / len(diffs), max(diffs)
    print(r["path"], "mean", mean, "max", worst)
    assert len(got) == len(ref) and mean <= 1.0 and worst <= 8, (r["path"], mean, worst)
PYEOF

# ---- determinism: thread count does not change a byte
"$FTL" prep "$SRC" "$d/out1" --threads 1 --quiet 2>/dev/null
"$FTL" prep "$SRC" "$d/out3" --threads 3 --quiet 2>/dev/null
if cmp -s "$d/out/train.parquet" "$d/out1/train.parquet" && cmp -s "$d/out/val.parquet" "$d/out1/val.parquet" &&
    cmp -s "$d/out/train.parquet" "$d/out3/train.parquet" && cmp -s "$d/out/val.parquet" "$d/out3/val.parquet"; then
    pass prep_identical_bytes_for_1_2_3_threads
else
    fail prep_identical_bytes_for_1_2_3_threads "files differ"
fi

# ---- seeded split of a flat class-folder dataset (symlinked class folders)
mkdir -p "$d/flat"
ln -s "$SRC/train/ants" "$d/flat/ants"
ln -s "$SRC/train/bees" "$d/flat/bees"
"$FTL" prep "$d/flat" "$d/split42" --quiet 2>/dev/null
"$FTL" prep "$d/flat" "$d/split42b" --quiet 2>/dev/null
"$FTL" prep "$d/flat" "$d/split7" --seed 7 --quiet 2>/dev/null
"$FTL" prep "$d/flat" "$d/random" --no-stratify --val-fraction 0.25 --quiet 2>/dev/null
counts=$(query "SELECT label, count(*) AS n FROM read_parquet('$d/split42/val.parquet') GROUP BY label ORDER BY label")
# round(123 * 0.1) = 12 ants, round(121 * 0.1) = 12 bees
[ "$counts" = '[{"label":0,"n":12},{"label":1,"n":12}]' ] && pass prep_stratified_val_counts || fail prep_stratified_val_counts "$counts"
cmp -s "$d/split42/val.parquet" "$d/split42b/val.parquet" && pass prep_same_seed_same_split || fail prep_same_seed_same_split "differ"
a=$(query "SELECT string_agg(path, ',' ORDER BY path) AS s FROM read_parquet('$d/split42/val.parquet')")
b=$(query "SELECT string_agg(path, ',' ORDER BY path) AS s FROM read_parquet('$d/split7/val.parquet')")
[ "$a" != "$b" ] && pass prep_other_seed_other_split || fail prep_other_seed_other_split "same val set for seeds 42 and 7"
n=$(query "SELECT (SELECT count(*) FROM read_parquet('$d/random/val.parquet')) + (SELECT count(*) FROM read_parquet('$d/random/train.parquet')) AS total, (SELECT count(*) FROM read_parquet('$d/random/val.parquet')) AS val")
$PY -c 'import json,sys; r=json.loads(sys.argv[1])[0]; assert r["total"]==244 and 35<=r["val"]<=90, r' "$n" &&
    pass prep_random_split_fraction || fail prep_random_split_fraction "$n"
# Rows are written in a seeded shuffled order, so that row groups mix classes.
first=$(query "SELECT count(DISTINCT label) AS k FROM (SELECT label FROM read_parquet('$d/split42/train.parquet') LIMIT 20)")
[ "$first" = '[{"k":2}]' ] && pass prep_rows_shuffled_across_classes || fail prep_rows_shuffled_across_classes "$first"

# ---- codecs: same decoded images whatever the codec
for codec in snappy zstd; do
    "$FTL" prep "$SRC" "$d/$codec" --codec "$codec" --quiet 2>/dev/null
    h1=$(query "SELECT md5(string_agg(md5(image), '' ORDER BY path)) AS h FROM read_parquet('$d/out/val.parquet')")
    h2=$(query "SELECT md5(string_agg(md5(image), '' ORDER BY path)) AS h FROM read_parquet('$d/$codec/val.parquet')")
    codec_seen=$(query "SELECT DISTINCT compression AS c FROM parquet_metadata('$d/$codec/val.parquet') WHERE path_in_schema = 'image'")
    if [ "$h1" = "$h2" ] && grep -qi "$codec" <<<"$codec_seen"; then pass "prep_codec_${codec}_same_images"; else fail "prep_codec_${codec}_same_images" "$h1 $h2 $codec_seen"; fi
done

# ---- layouts: train/ + test/ is a split; train/ alone is refused; OUT with a trailing slash
mkdir -p "$d/tt" "$d/trainonly"
ln -s "$SRC/train" "$d/tt/train"
ln -s "$SRC/val" "$d/tt/test"
"$FTL" prep "$d/tt" "$d/tt-out/" --val-fraction 0.3 >"$d/tt.out" 2>"$d/tt.err"
if grep -q '244 train, 153 val' "$d/tt.out" && grep -q 'split is kept and --val-fraction' "$d/tt.err" &&
    [ -f "$d/tt-out/train.parquet" ] && [ -z "$(ls -a "$d" | grep 'tt-out.tmp')" ]; then
    pass prep_train_test_layout_and_trailing_slash
else
    fail prep_train_test_layout_and_trailing_slash "$(cat "$d/tt.out" "$d/tt.err" | head -5)"
fi
ln -s "$SRC/train" "$d/trainonly/train"
expect_error prep_train_without_val_refused 2 'train/ folder but no val/' "$FTL_SAN" prep "$d/trainonly" "$d/x"

# ---- bad input (under sanitizers)
expect_error prep_missing_source_exit_2 2 'does not exist' "$FTL_SAN" prep "$d/no-such-folder" "$d/x"
mkdir -p "$d/empty/ants" "$d/empty/bees"
expect_error prep_no_images_exit_2 2 'no images found under' "$FTL_SAN" prep "$d/empty" "$d/x"
expect_error prep_existing_output_refused 2 'already exists \(use --overwrite' "$FTL_SAN" prep "$SRC" "$d/out"
[ -f "$d/out/train.parquet" ] && pass prep_existing_output_kept || fail prep_existing_output_kept "old OUT damaged"
# a file name that is not UTF-8 (Latin-1 "café.jpg"): the path column becomes plain bytes (a STRING
# column holding it is refused by DuckDB and Arrow), with a warning; the exact name reads back
mkdir -p "$d/latin1/ants" "$d/latin1/bees"
cp "$SRC"/train/ants/0013035.jpg "$d/latin1/ants/caf$(printf '\xe9').jpg"
cp "$SRC"/train/ants/1030023514_aad5c608f9.jpg "$d/latin1/ants/"
cp "$SRC"/train/bees/1*.jpg "$d/latin1/bees/"
"$FTL_SAN" prep "$d/latin1" "$d/latin1-ds" --val-fraction 0 --quiet 2>"$d/latin1.err"
got=$($DUCK "SELECT count(*) AS n, sum(CASE WHEN path = 'ants/caf\\xE9.jpg'::BLOB THEN 1 ELSE 0 END) AS named FROM read_parquet('$d/latin1-ds/train.parquet')" 2>&1)
LC_ALL=C grep -q 'file names that are not UTF-8 .*: the path column is written as bytes, not a string' "$d/latin1.err" &&
    grep -q '"n":22,"named":1' <<<"$got" && pass prep_non_utf8_names_readable_by_duckdb ||
    fail prep_non_utf8_names_readable_by_duckdb "$got $(head -c 300 "$d/latin1.err" | cat -v)"
# and embed keeps them as bytes in the features file
"$FTL_SAN" embed "$d/latin1-ds/train.parquet" --backbone "$SHARED/models/mobilenet_v1_0.25_128.onnx" "$d/latin1-feat.parquet" \
    --quiet 2>"$d/latin1-embed.err"
got=$($DUCK "SELECT count(*) AS n, sum(CASE WHEN path = 'ants/caf\\xE9.jpg'::BLOB THEN 1 ELSE 0 END) AS named FROM read_parquet('$d/latin1-feat.parquet')" 2>&1)
grep -q '"n":22,"named":1' <<<"$got" && pass embed_keeps_non_utf8_names_as_bytes ||
    fail embed_keeps_non_utf8_names_as_bytes "$got $(head -c 300 "$d/latin1-embed.err" | cat -v)"
# --overwrite would delete OUT: never when OUT is the source folder or holds it
mkdir -p "$d/self/photos/ants" "$d/self/photos/bees"
cp "$SRC"/train/ants/0*.jpg "$d/self/photos/ants/"
cp "$SRC"/train/bees/1*.jpg "$d/self/photos/bees/"
n_before=$(find "$d/self" -type f | wc -l)
expect_error prep_out_equal_to_source_refused 2 'is the source folder .* or holds it' \
    "$FTL_SAN" prep "$d/self/photos" "$d/self/photos" --overwrite
expect_error prep_out_holding_source_refused 2 'is the source folder .* or holds it' \
    "$FTL_SAN" prep "$d/self/photos" "$d/self" --overwrite
[ "$(find "$d/self" -type f | wc -l)" -eq "$n_before" ] && [ "$n_before" -gt 10 ] && pass prep_source_images_kept ||
    fail prep_source_images_kept "$n_before files before, $(find "$d/self" -type f | wc -l) after"
expect_error prep_negative_stall_timeout_refused 2 'stall-timeout must be a finite number' \
    "$FTL_SAN" prep "$SRC" "$d/x" --stall-timeout -5
expect_error prep_unknown_option 2 "unknown option '--thread' \(did you mean '--threads'" "$FTL_SAN" prep "$SRC" "$d/x" --thread 2
expect_error prep_bad_codec 2 "unknown codec 'lz4'" "$FTL_SAN" prep "$SRC" "$d/x" --codec lz4
[ ! -e "$d/x" ] && pass prep_failed_runs_leave_no_output || fail prep_failed_runs_leave_no_output "$(ls "$d/x")"

# A folder with bad images and an empty class: warnings, skipped, the rest written.
mkdir -p "$d/bad/ants" "$d/bad/bees" "$d/bad/wasps"
cp "$SRC/train/ants/0013035.jpg" "$SRC/train/ants/formica.jpeg" "$d/bad/ants/"
cp "$SRC/train/bees/2405441001_b06c36fa72.jpg" "$d/bad/bees/"
head -c 3000 "$SRC/train/bees/2405441001_b06c36fa72.jpg" >"$d/bad/bees/truncated.jpg"
head -c 4096 /dev/urandom >"$d/bad/bees/noise.jpg"
: >"$d/bad/ants/empty.png"
cp "$SRC/train/ants/imageNotFound.gif" "$d/bad/ants/"
"$FTL_SAN" prep "$d/bad" "$d/bad-out" --val-fraction 0 >"$d/bad.out" 2>"$d/bad.err"
rc=$?
if [ $rc -eq 0 ] && grep -q 'skipped 4 files' "$d/bad.out" && grep -q "class folder 'wasps'" "$d/bad.err" &&
    grep -q 'truncated.jpg' "$d/bad.err" && grep -q 'noise.jpg' "$d/bad.err" && grep -q 'empty.png' "$d/bad.err" &&
    ! grep -q -E 'AddressSanitizer|runtime error' "$d/bad.err"; then
    pass prep_bad_images_skipped_with_warnings
else
    fail prep_bad_images_skipped_with_warnings "rc=$rc $(cat "$d/bad.out" "$d/bad.err" | head -30)"
fi
n=$(query "SELECT count(*) AS n FROM read_parquet('$d/bad-out/train.parquet')")
[ "$n" = '[{"n":3}]' ] && pass prep_bad_folder_keeps_good_images || fail prep_bad_folder_keeps_good_images "$n"
expect_error prep_strict_fails_on_bad_image 1 '(truncated|noise|empty|imageNotFound).*--strict' "$FTL_SAN" prep "$d/bad" "$d/strict-out" --strict
[ ! -e "$d/strict-out" ] && pass prep_strict_leaves_no_output || fail prep_strict_leaves_no_output "strict-out exists"

# Ctrl-C in the middle: no OUT, no temporary files left behind (a source that takes several
# seconds: 60 copies of a 4000x4000 PNG of one colour, 53 KB each; copies, since prep reads a
# file that links lead to once).
mkdir -p "$d/many/c1" "$d/many/c2"
$PY - "$d/big.png" <<'PYEOF'
import struct, sys, zlib
side = 4000
data = zlib.compress((b"\0" + bytes([200, 120, 40]) * side) * side, 9)
def chunk(kind, body): return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
ihdr = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", data) + chunk(b"IEND", b""))
PYEOF
for i in $(seq -w 1 30); do cp "$d/big.png" "$d/many/c1/$i.png"; cp "$d/big.png" "$d/many/c2/$i.png"; done
"$FTL" prep "$d/many" "$d/interrupted" --threads 1 --quiet 2>"$d/int.err" &
pid=$!
sleep 1
kill -INT $pid
wait $pid
rc=$?
left=$(ls -a "$d" | grep -c -E 'interrupted')
if [ $rc -eq 130 ] && [ "$left" -eq 0 ]; then
    pass prep_interrupt_leaves_nothing
else
    fail prep_interrupt_leaves_nothing "rc=$rc leftovers: $(ls -a "$d" | grep interrupted)"
fi
finish
