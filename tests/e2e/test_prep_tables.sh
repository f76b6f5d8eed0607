#!/usr/bin/env bash
# `ftl prep` from the tables users already have, written by DuckDB from hymenoptera's JPEGs: a
# Spark binaryFile-like table partitioned by split (key=value/ folders), a Hugging Face-like pair of
# files (image struct<bytes, path>, int64 label with ClassLabel names in the `huggingface` metadata),
# a string-label table with a split column, and DuckDB's read_blob output. Each gives the class
# folders' (class, pixels) rows as a multiset (per split where the table says the split), read back
# with DuckDB; also under mpirun. Then every bad input: its message, and nothing left on disk.
source "$(dirname "$0")/lib.sh"
d=$(scratch prep_tables)
TOOLS="$(cd "$(dirname "$0")/../tools" && pwd)"
H="$SHARED/data/hymenoptera"
S=48
if [ ! -d "$INTEROP_NODE_DIR/node_modules" ]; then
    skip prep_tables "the interop tools are not installed (make test-deps)"
    finish
fi
Q() { node "$TOOLS/duckdb_query.mjs" "$1"; }

# ---- the tables, from the JPEGs (the GIF placeholder in train/ants is left out, as prep from folders
# skips it)
mkdir -p "$d/hf" "$d/str"
SPLIT="regexp_extract(filename, '/(train|val)/[^/]+/[^/]+\$', 1)"
CLASS="regexp_extract(filename, '/([^/]+)/[^/]+\$', 1)"
Q "COPY (SELECT 'file:' || replace(filename, ' ', '%20') AS path, last_modified AS modificationTime, size AS length,
          content, $SPLIT AS split FROM read_blob(['$H/*/*/*.jpg', '$H/*/*/*.jpeg']))
   TO '$d/spark' (FORMAT parquet, PARTITION_BY (split))" >/dev/null &&
for split in train val; do
    out=$([ $split = train ] && echo train || echo test)
    Q "COPY (SELECT {'bytes': content, 'path': regexp_extract(filename, '[^/]+\$')} AS image,
              (CASE WHEN $CLASS = 'ants' THEN 0 ELSE 1 END)::BIGINT AS label
              FROM read_blob(['$H/$split/*/*.jpg', '$H/$split/*/*.jpeg']) ORDER BY filename)
       TO '$d/hf/$out-00000-of-00001.parquet' (FORMAT parquet, ROW_GROUP_SIZE 64,
       KV_METADATA {huggingface: '{\"info\": {\"features\": {\"image\": {\"_type\": \"Image\"}, \"label\": {\"names\": [\"ants\", \"bees\"], \"_type\": \"ClassLabel\"}}}}'})" >/dev/null
done &&
Q "COPY (SELECT content AS picture, $CLASS AS species, $SPLIT AS part FROM read_blob(['$H/*/*/*.jpg', '$H/*/*/*.jpeg']))
   TO '$d/str/table.parquet' (FORMAT parquet, ROW_GROUP_SIZE 100)" >/dev/null &&
Q "COPY (SELECT * FROM read_blob(['$H/*/*/*.jpg', '$H/*/*/*.jpeg'])) TO '$d/blob.parquet' (FORMAT parquet)" >/dev/null ||
    fail prep_tables_written_by_duckdb "DuckDB could not write the tables"

# rows DATASET SPLIT: "class md5(pixels)" per row, sorted (DuckDB reads the dataset; a folder of parts too)
rows() {
    local f="$1/$2.parquet"
    [ -d "$f" ] && f="$f/*.parquet"
    Q "SELECT label, md5(image) AS h FROM read_parquet('$f')" >"$d/rows.json" &&
        Q "SELECT decode(value) AS v FROM parquet_kv_metadata('$f') WHERE decode(key) = 'ftl.classes' LIMIT 1" >"$d/classes.json" &&
        "$PY" -c '
import json, sys
classes = json.loads(json.load(open(sys.argv[2]))[0]["v"])
for r in sorted("%s %s" % (classes[r["label"]], r["h"]) for r in json.load(open(sys.argv[1]))): print(r)' "$d/rows.json" "$d/classes.json"
}
"$FTL" prep "$H" "$d/ref" --size $S --quiet 2>/dev/null || fail prep_tables_reference "prep from the folders failed"
rows "$d/ref" train >"$d/ref.train"
rows "$d/ref" val >"$d/ref.val"
sort "$d/ref.train" "$d/ref.val" >"$d/ref.all"
[ "$(wc -l <"$d/ref.all")" -gt 300 ] || fail prep_tables_reference "only $(wc -l <"$d/ref.all") reference rows"

# same_rows NAME OUT [all]: OUT's rows equal the folders', per split (or train + val together)
same_rows() {
    local name=$1 out=$2 mode=${3:-split}
    if [ "$mode" = all ]; then
        { rows "$out" train; rows "$out" val; } | sort >"$d/$name.all"
        cmp -s "$d/$name.all" "$d/ref.all" && pass "$name" || fail "$name" "rows differ: $(diff "$d/ref.all" "$d/$name.all" | head -4)"
    else
        rows "$out" train >"$d/$name.train"
        rows "$out" val >"$d/$name.val"
        if cmp -s "$d/$name.train" "$d/ref.train" && cmp -s "$d/$name.val" "$d/ref.val"; then
            pass "$name"
        else
            fail "$name" "rows differ: $(diff "$d/ref.train" "$d/$name.train" | head -3) $(diff "$d/ref.val" "$d/$name.val" | head -3)"
        fi
    fi
}
check prep_from_spark_binaryfile_table "$FTL" prep "$d/spark" "$d/o-spark" --size $S --label-from path --split-col split --quiet
same_rows prep_spark_table_same_rows_as_folders "$d/o-spark"
check prep_from_huggingface_files "$FTL" prep "$d/hf/train-00000-of-00001.parquet" "$d/o-hf" --size $S \
    --val-source "$d/hf/test-00000-of-00001.parquet" --quiet
same_rows prep_huggingface_same_rows_as_folders "$d/o-hf"
check prep_from_string_labels "$FTL" prep "$d/str/table.parquet" "$d/o-str" --size $S --image-col picture \
    --label-col species --split-col part --quiet
same_rows prep_string_labels_same_rows_as_folders "$d/o-str"
check prep_from_read_blob "$FTL" prep "$d/blob.parquet" "$d/o-blob" --size $S --label-from path --quiet
same_rows prep_read_blob_same_rows_as_folders "$d/o-blob" all
# the class names as the folders give them, in the same order
for o in o-spark o-hf o-str o-blob; do
    Q "SELECT decode(value) AS v FROM parquet_kv_metadata('$d/$o/train.parquet') WHERE decode(key) = 'ftl.classes'" >"$d/$o.classes"
done
Q "SELECT decode(value) AS v FROM parquet_kv_metadata('$d/ref/train.parquet') WHERE decode(key) = 'ftl.classes'" >"$d/ref.classes"
all_same=1
for o in o-spark o-hf o-str o-blob; do cmp -s "$d/$o.classes" "$d/ref.classes" || all_same=0; done
[ $all_same = 1 ] && pass prep_tables_class_names_as_folders || fail prep_tables_class_names_as_folders "$(cat "$d"/o-*.classes)"

# arrow-rs writes one more: Hugging Face's layout in many small pages and row groups
for split in train val; do
    for class in ants bees; do
        for f in "$H/$split/$class"/*.jp*g; do printf '%d\t%s\n' "$([ $class = ants ] && echo 0 || echo 1)" "$f"; done
    done >"$d/arrow-$split.tsv"
    SHARED="$SHARED" node "$TOOLS/arrow_image_table.mjs" "$d/arrow-$split.tsv" "$d/arrow-$split.parquet" ants bees >/dev/null ||
        fail prep_tables_written_by_arrow_rs "arrow-rs could not write the $split table"
done
check prep_from_arrow_rs_table "$FTL" prep "$d/arrow-train.parquet" "$d/o-arrow" --size $S --val-source "$d/arrow-val.parquet" --quiet
same_rows prep_arrow_rs_same_rows_as_folders "$d/o-arrow"

# under mpirun: the same rows as one process
if command -v mpirun >/dev/null 2>&1 && "$FTL" --version | grep -q 'Open MPI'; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    if mpirun --oversubscribe --bind-to none -np 2 "$FTL" prep "$d/spark" "$d/o-mpi" --size $S --label-from path \
        --split-col split --quiet >"$d/mpi.log" 2>&1; then
        same_rows prep_table_under_mpirun_same_rows "$d/o-mpi"
    else
        fail prep_table_under_mpirun_same_rows "$(tail -3 "$d/mpi.log")"
    fi
else
    skip prep_table_under_mpirun_same_rows "mpirun (openmpi-bin) is not installed or ftl was built without MPI"
fi

# ---- bad input: the message, and nothing written
# gone NAME OUT: nothing under OUT's name or beside it
gone() { [ ! -e "$2" ] && [ -z "$(ls -d "$2".tmp-* 2>/dev/null)" ] || fail "$1_nothing_left" "$(ls -d "$2"* 2>/dev/null)"; }
ONE="$(ls "$H/train/ants/"*.jpg | head -1)"
# rows that hold no image: NULL, empty, not an image, a JPEG cut short; and one good row per class
mkdir -p "$d/n"
: >"$d/n/empty.jpg"
echo "not an image" >"$d/n/text.jpg"
head -c 900 "$ONE" >"$d/n/cut.jpg"
cp "$ONE" "$d/n/good1.jpg" && cp "$ONE" "$d/n/good2.jpg"
Q "COPY (SELECT * FROM (
      SELECT NULL::BLOB AS content, 'ants' AS label, 'n/null.jpg' AS path, 0 AS k
      UNION ALL SELECT content, CASE WHEN filename LIKE '%good2%' OR filename LIKE '%text%' OR filename LIKE '%cut%' THEN 'bees'
                                     ELSE 'ants' END, 'n/' || regexp_extract(filename, '[^/]+\$'),
                       CASE WHEN filename LIKE '%empty%' THEN 1 WHEN filename LIKE '%text%' THEN 2 WHEN filename LIKE '%cut%' THEN 3
                            WHEN filename LIKE '%good1%' THEN 4 ELSE 5 END
      FROM read_blob('$d/n/*.jpg')) ORDER BY k) TO '$d/bad_rows.parquet' (FORMAT parquet)" >/dev/null
out=$("$FTL" prep "$d/bad_rows.parquet" "$d/o-bad" --size $S --val-fraction 0 2>&1)
rc=$?
n=$(Q "SELECT count(*) AS n FROM read_parquet('$d/o-bad/train.parquet')" 2>/dev/null | grep -o '[0-9]*')
if [ $rc -eq 0 ] && [ "$n" = 2 ] && grep -q 'skipping .*bad_rows.parquet row 0 (n/null.jpg): no image' <<<"$out" &&
    grep -q 'row 1 (n/empty.jpg)' <<<"$out" && grep -q 'row 2 (n/text.jpg)' <<<"$out" && grep -q 'row 3 (n/cut.jpg)' <<<"$out" &&
    grep -q 'skipped 4' <<<"$out"; then
    pass prep_table_bad_rows_skipped_and_counted
else
    fail prep_table_bad_rows_skipped_and_counted "rc $rc, $n rows: $out"
fi
expect_error prep_table_bad_row_strict 1 'bad_rows.parquet row [0-3] \(n/(null|empty|text|cut).jpg\): .*\(--strict\)' \
    "$FTL_SAN" prep "$d/bad_rows.parquet" "$d/o-strict" --size $S --strict --quiet
gone prep_table_bad_row_strict "$d/o-strict"
# bytes NULL with a path: read from disk only with --images-root, only under it
mkdir -p "$d/root/sub" && cp "$ONE" "$d/root/sub/a.jpg" && cp "$ONE" "$d/outside.jpg"
hf_paths() { # FILE PATH...: an HF-like table whose image structs have no bytes, only these paths
    local file=$1 values=""
    shift
    for p in "$@"; do values="$values${values:+, }({'bytes': NULL::BLOB, 'path': '$p'}, 0::BIGINT)"; done
    Q "COPY (SELECT * FROM (VALUES ({'bytes': (SELECT content FROM read_blob('$ONE')), 'path': 'x.jpg'}, 1::BIGINT), $values) t(image, label))
       TO '$file' (FORMAT parquet)" >/dev/null
}
hf_paths "$d/paths_ok.parquet" sub/a.jpg
out=$("$FTL" prep "$d/paths_ok.parquet" "$d/o-paths0" --size $S --val-fraction 0 2>&1)
grep -q 'no image bytes (its path sub/a.jpg is read from disk only with --images-root DIR)' <<<"$out" &&
    pass prep_table_path_without_images_root_skipped || fail prep_table_path_without_images_root_skipped "$out"
if "$FTL" prep "$d/paths_ok.parquet" "$d/o-paths" --size $S --val-fraction 0 --images-root "$d/root" --quiet 2>"$d/paths.err" &&
    [ "$(Q "SELECT count(*) AS n FROM read_parquet('$d/o-paths/train.parquet')" | grep -o '[0-9]*')" = 2 ]; then
    pass prep_table_images_root_reads_the_path
else
    fail prep_table_images_root_reads_the_path "$(cat "$d/paths.err")"
fi
for case in "abs:$d/outside.jpg" "climb:../outside.jpg" "deep:sub/../../outside.jpg"; do
    name=${case%%:*} p=${case#*:}
    hf_paths "$d/paths_$name.parquet" "$p"
    expect_error "prep_table_images_root_refuses_$name" 2 "its path '.*' is absolute or climbs out with '..'" \
        "$FTL_SAN" prep "$d/paths_$name.parquet" "$d/o-$name" --size $S --images-root "$d/root" --quiet
    gone "prep_table_images_root_refuses_$name" "$d/o-$name"
done
ln -sf "$d/outside.jpg" "$d/root/link.jpg"
hf_paths "$d/paths_link.parquet" link.jpg
expect_error prep_table_images_root_refuses_a_link_out 2 "leads out of --images-root" \
    "$FTL_SAN" prep "$d/paths_link.parquet" "$d/o-link" --size $S --images-root "$d/root" --quiet
gone prep_table_images_root_refuses_a_link_out "$d/o-link"
# labels: out of range of the ClassLabel names, of another type, missing; a split of no known name
Q "COPY (SELECT {'bytes': content, 'path': 'a.jpg'} AS image, 5::BIGINT AS label FROM read_blob('$ONE'))
   TO '$d/label5.parquet' (FORMAT parquet, KV_METADATA {huggingface: '{\"info\": {\"features\": {\"label\": {\"names\": [\"ants\", \"bees\"], \"_type\": \"ClassLabel\"}}}}'})" >/dev/null
expect_error prep_table_label_out_of_range 2 'label5.parquet row 0 \(a.jpg\).*: label 5 is out of range: the Hugging Face ClassLabel names of .label. in .* names 2 classes' \
    "$FTL_SAN" prep "$d/label5.parquet" "$d/o-l5" --size $S --quiet
gone prep_table_label_out_of_range "$d/o-l5"
Q "COPY (SELECT content, 1.5::DOUBLE AS label FROM read_blob('$ONE')) TO '$d/labelf.parquet' (FORMAT parquet)" >/dev/null
expect_error prep_table_label_of_another_type 2 "labelf.parquet row 0: label column 'label' is DOUBLE: labels are integers or text" \
    "$FTL_SAN" prep "$d/labelf.parquet" "$d/o-lf" --size $S --quiet
Q "COPY (SELECT content FROM read_blob('$ONE')) TO '$d/nolabel.parquet' (FORMAT parquet)" >/dev/null
expect_error prep_table_without_labels 2 "nolabel.parquet: no label column 'label' \(give --label-col NAME, or --label-from path" \
    "$FTL_SAN" prep "$d/nolabel.parquet" "$d/o-nl" --size $S --quiet
expect_error prep_table_unknown_split 2 "split 'ants' in --split-col species: expected train, or val" \
    "$FTL_SAN" prep "$d/str/table.parquet" "$d/o-sp" --size $S --image-col picture --label-col species --split-col species --quiet
Q "COPY (SELECT content, content AS other, 'ants' AS label FROM read_blob('$ONE')) TO '$d/two_images.parquet' (FORMAT parquet)" >/dev/null
expect_error prep_table_two_image_columns 2 '2 columns could hold the images \(content, other\): choose one with --image-col' \
    "$FTL_SAN" prep "$d/two_images.parquet" "$d/o-two" --size $S --quiet
# a Delta table: its folder of parts may hold removed files
mkdir -p "$d/delta/_delta_log" && cp "$d/blob.parquet" "$d/delta/part-0.parquet"
expect_error prep_delta_table_refused 2 'is a Delta table \(it has a _delta_log/ folder\)' \
    "$FTL_SAN" prep "$d/delta" "$d/o-delta" --size $S --label-from path --quiet
gone prep_delta_table_refused "$d/o-delta"
# the loader reads folders of parts by the same rule: a Delta table refused, Spark's _temporary/ skipped
mkdir -p "$d/parts/_temporary/0" "$d/dparts/_delta_log"
cp "$d/o-bad/train.parquet" "$d/parts/part-00000.parquet" && cp "$d/o-bad/train.parquet" "$d/dparts/part-00000.parquet"
echo "an unfinished part" >"$d/parts/_temporary/0/part-00001.parquet"
M="$SHARED/models/mobilenet_v1_0.25_128.onnx"
check loader_skips_spark_temporary_folder "$FTL" embed "$d/parts" --backbone "$M" "$d/parts-features.parquet" --quiet
expect_error loader_refuses_delta_table 2 'dparts is a Delta table \(it has a _delta_log/ folder\)' \
    "$FTL_SAN" embed "$d/dparts" --backbone "$M" "$d/dparts-features.parquet" --quiet
gone loader_refuses_delta_table "$d/dparts-features.parquet"
# a table's list column is named, not read
Q "COPY (SELECT [content] AS images, 'ants' AS label FROM read_blob('$ONE')) TO '$d/list.parquet' (FORMAT parquet)" >/dev/null
expect_error prep_table_list_column_refused 2 "--image-col images is not a binary column" \
    "$FTL_SAN" prep "$d/list.parquet" "$d/o-list" --size $S --image-col images --quiet
# options for tables given with folders
expect_error prep_table_options_with_folders 2 'is a folder of class folders: --image-col' \
    "$FTL_SAN" prep "$H" "$d/o-f" --size $S --image-col x --quiet
# Python's prep takes the same sources and options
if ls "$BUILD"/python/ftl/_ftl*.so >/dev/null 2>&1; then
    if PYTHONPATH="$BUILD/python" "$PY" -c '
import sys, ftl
s = ftl.prep(sys.argv[1], sys.argv[2], size=int(sys.argv[3]), val_source=sys.argv[4], verbose=0)
assert s["classes"] == ["ants", "bees"], s["classes"]' "$d/hf/train-00000-of-00001.parquet" "$d/o-py" $S \
        "$d/hf/test-00000-of-00001.parquet" 2>"$d/py.err"; then
        same_rows prep_tables_from_python "$d/o-py"
    else
        fail prep_tables_from_python "$(tail -3 "$d/py.err")"
    fi
else
    skip prep_tables_from_python "the Python package is not built (make python)"
fi
finish
