#!/usr/bin/env bash
# `ftl prep` from WebDataset shards made by GNU tar from hymenoptera's JPEGs (KEY.jpg with KEY.cls,
# or KEY.json with a class name; pax and GNU formats, members in folders, long names): each gives the
# class folders' (class, pixels) rows per split, read back with DuckDB; also under mpirun. Then a
# shard cut short, a sample without a label, a .gif sample: the message, and nothing left on disk.
source "$(dirname "$0")/lib.sh"
d=$(scratch prep_shards)
TOOLS="$(cd "$(dirname "$0")/../tools" && pwd)"
H="$SHARED/data/hymenoptera"
S=48
if [ ! -d "$INTEROP_NODE_DIR/node_modules" ]; then
    skip prep_shards "the interop tools are not installed (make test-deps)"
    finish
fi
if ! tar --version 2>/dev/null | grep -q 'GNU tar'; then
    skip prep_shards "GNU tar is not installed"
    finish
fi
Q() { node "$TOOLS/duckdb_query.mjs" "$1"; }

# stage SPLIT FOLDER LABEL-KIND: the split's images as KEY.jpg + KEY.cls (class index) or KEY.json
# ({"label": "ants"}), keys numbered in a folder under FOLDER (long names: a deep folder)
stage() {
    local split=$1 out=$2 kind=$3 i=0 c=0
    local deep="$out/a-folder-name-long-enough-to-need-more-than-the-hundred-bytes-of-a-ustar-name/$split"
    mkdir -p "$deep"
    for class in ants bees; do
        for f in "$H/$split/$class"/*.jp*g; do
            key=$(printf '%s/%06d' "$deep" $i)
            cp "$f" "$key.jpg"
            if [ "$kind" = cls ]; then printf '%d\n' $c >"$key.cls"; else printf '{"label": "%s"}' $class >"$key.json"; fi
            i=$((i + 1))
        done
        c=$((c + 1))
    done
}
mkdir -p "$d/cls-train" "$d/cls-val" "$d/json" "$d/shards"
stage train "$d/cls-train" cls
stage val "$d/cls-val" cls
stage train "$d/json" json
# two train shards (GNU and pax headers), one val shard; samples adjacent (sorted names)
(cd "$d/cls-train" && find . -type f | sed 's|^\./||' | sort >"$d/list")
half=$(($(wc -l <"$d/list") / 2 / 2 * 2)) # an even cut: a sample's .cls and .jpg stay together
head -n $half "$d/list" >"$d/list0" && tail -n +$((half + 1)) "$d/list" >"$d/list1"
tar --format=gnu -C "$d/cls-train" -cf "$d/shards/train-000000.tar" -T "$d/list0" &&
    tar --format=pax -C "$d/cls-train" -cf "$d/shards/train-000001.tar" -T "$d/list1" &&
    tar --format=gnu --sort=name -C "$d/cls-val" -cf "$d/val-000000.tar" . &&
    tar --format=pax --sort=name -C "$d/json" -cf "$d/json.tar" . || fail prep_shards_made_by_tar "tar failed"

# rows DATASET SPLIT [index]: "class md5(pixels)" per row, sorted; with index the class's index in
# the sorted class names instead of its name (a .cls shard's classes are named by their index)
rows() {
    Q "SELECT label, md5(image) AS h FROM read_parquet('$1/$2.parquet$([ -d "$1/$2.parquet" ] && echo '/*.parquet')')" >"$d/rows.json" &&
        Q "SELECT decode(value) AS v FROM parquet_kv_metadata('$1/train.parquet$([ -d "$1/train.parquet" ] && echo '/*.parquet')') WHERE decode(key) = 'ftl.classes' LIMIT 1" >"$d/classes.json" &&
        "$PY" -c '
import json, sys
classes = json.loads(json.load(open(sys.argv[2]))[0]["v"])
by_index = len(sys.argv) > 3
name = lambda i: str(sorted(classes).index(classes[i])) if by_index else classes[i]
for r in sorted("%s %s" % (name(r["label"]), r["h"]) for r in json.load(open(sys.argv[1]))): print(r)' "$d/rows.json" "$d/classes.json" ${3:+index}
}
"$FTL" prep "$H" "$d/ref" --size $S --quiet 2>/dev/null || fail prep_shards_reference "prep from the folders failed"
rows "$d/ref" train >"$d/ref.train"
rows "$d/ref" val >"$d/ref.val"
rows "$d/ref" train index >"$d/ref.train.index"
rows "$d/ref" val index >"$d/ref.val.index"
# same_rows NAME OUT [train] [index]: OUT's rows equal the folders', per split (train: its train
# the folders' train); index: classes compared by index
same_rows() {
    local name=$1 out=$2 only=${3:-} by=${4:-} ext=${4:+.index}
    rows "$out" train $by >"$d/$name.train"
    [ "$only" = train ] && cp "$d/ref.val$ext" "$d/$name.val" || rows "$out" val $by >"$d/$name.val"
    if [ -s "$d/$name.train" ] && cmp -s "$d/$name.train" "$d/ref.train$ext" && cmp -s "$d/$name.val" "$d/ref.val$ext"; then
        pass "$name"
    else
        fail "$name" "rows differ: $(diff "$d/ref.train" "$d/$name.train" | head -3) $(diff "$d/ref.val" "$d/$name.val" | head -3)"
    fi
}
check prep_from_shards_folder "$FTL" prep "$d/shards" "$d/o-cls" --size $S --val-source "$d/val-000000.tar" --quiet
same_rows prep_shards_same_rows_as_folders "$d/o-cls" both index
Q "SELECT decode(value) AS v FROM parquet_kv_metadata('$d/o-cls/train.parquet') WHERE decode(key) = 'ftl.class_folders'" >"$d/cls.folders"
grep -q '\[\\"0\\", \\"1\\"\]' "$d/cls.folders" && pass prep_shards_cls_classes_named_by_index ||
    fail prep_shards_cls_classes_named_by_index "$(cat "$d/cls.folders")"
check prep_from_json_labelled_shard "$FTL" prep "$d/json.tar" "$d/o-json" --size $S --val-fraction 0 --quiet
same_rows prep_json_shard_same_rows_as_folders_train "$d/o-json" train
Q "SELECT decode(value) AS v FROM parquet_kv_metadata('$d/o-json/train.parquet') WHERE decode(key) = 'ftl.classes'" >"$d/json.classes"
grep -q '\[\\"ants\\", \\"bees\\"\]' "$d/json.classes" && pass prep_json_shard_class_names ||
    fail prep_json_shard_class_names "$(cat "$d/json.classes")"
if command -v mpirun >/dev/null 2>&1 && "$FTL" --version | grep -q 'Open MPI'; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    if mpirun --oversubscribe --bind-to none -np 2 "$FTL" prep "$d/shards" "$d/o-mpi" --size $S \
        --val-source "$d/val-000000.tar" --quiet >"$d/mpi.log" 2>&1; then
        same_rows prep_shards_under_mpirun_same_rows "$d/o-mpi" both index
    else
        fail prep_shards_under_mpirun_same_rows "$(tail -3 "$d/mpi.log")"
    fi
else
    skip prep_shards_under_mpirun_same_rows "mpirun (openmpi-bin) is not installed or ftl was built without MPI"
fi

# ---- bad input
gone() { [ ! -e "$2" ] && [ -z "$(ls -d "$2".tmp-* 2>/dev/null)" ] || fail "$1_nothing_left" "$(ls -d "$2"* 2>/dev/null)"; }
size=$(stat -c %s "$d/val-000000.tar")
head -c $((size / 2 + 100)) "$d/val-000000.tar" >"$d/cut.tar"
expect_error prep_shard_cut_short 1 'cut.tar: .*' "$FTL_SAN" prep "$d/cut.tar" "$d/o-cut" --size $S --quiet
gone prep_shard_cut_short "$d/o-cut"
mkdir -p "$d/nolabel"
cp "$(ls "$H/train/ants/"*.jpg | head -1)" "$d/nolabel/000000.jpg"
tar -C "$d/nolabel" -cf "$d/nolabel.tar" 000000.jpg
expect_error prep_shard_sample_without_label 2 "nolabel.tar: sample '000000' has no label \(a KEY.cls member" \
    "$FTL_SAN" prep "$d/nolabel.tar" "$d/o-nolabel" --size $S --quiet
gone prep_shard_sample_without_label "$d/o-nolabel"
mkdir -p "$d/gif"
cp "$H/train/ants/imageNotFound.gif" "$d/gif/000000.gif" && echo 0 >"$d/gif/000000.cls"
cp "$(ls "$H/train/ants/"*.jpg | head -1)" "$d/gif/000001.jpg" && echo 0 >"$d/gif/000001.cls"
cp "$(ls "$H/train/bees/"*.jpg | head -1)" "$d/gif/000002.jpg" && echo 1 >"$d/gif/000002.cls"
tar --sort=name -C "$d/gif" -cf "$d/gif.tar" .
out=$("$FTL" prep "$d/gif.tar" "$d/o-gif" --size $S --val-fraction 0 2>&1)
grep -q 'skipping .*gif.tar/000000.gif: unsupported image format GIF' <<<"$out" && grep -q 'skipped 1' <<<"$out" &&
    pass prep_shard_gif_sample_skipped || fail prep_shard_gif_sample_skipped "$out"
expect_error prep_shard_gif_strict 1 'gif.tar/000000.gif: unsupported image format GIF.*--strict' \
    "$FTL_SAN" prep "$d/gif.tar" "$d/o-gif-strict" --size $S --strict --quiet
echo 7 >"$d/gif/000002.cls"
tar --sort=name -C "$d/gif" -cf "$d/gif7.tar" 000001.jpg 000001.cls 000002.cls 000002.jpg
out=$("$FTL" prep "$d/gif7.tar" "$d/o-gif7" --size $S --val-fraction 0 --quiet 2>&1)
[ $? -eq 0 ] && [ "$(Q "SELECT decode(value) AS v FROM parquet_kv_metadata('$d/o-gif7/train.parquet') WHERE decode(key) = 'ftl.classes'" |
    grep -o '\\"[0-9]\\"' | wc -l)" = 8 ] && pass prep_shard_cls_indexes_make_classes_up_to_the_largest ||
    fail prep_shard_cls_indexes_make_classes_up_to_the_largest "$out"
expect_error prep_shard_table_options_refused 2 'is WebDataset shards: their labels come from KEY.cls or KEY.json' \
    "$FTL_SAN" prep "$d/gif.tar" "$d/o-opt" --size $S --label-col x --quiet
finish
