#!/usr/bin/env bash
# Files written by ftl, read by three independent engines (parquet_inspect.mjs: DuckDB,
# hyparquet, arrow-rs): all engines must agree, their column checksums must equal the data
# definition's (tests/colhash_ref.py, an independent Python generator) and what
# `ftl inspect --json --checksums` reports; for an ftl dataset the class counts `ftl inspect`
# prints must equal counts regenerated in Python. Files with struct columns from DuckDB and
# arrow-rs: ftl's checksum of every struct leaf equals the colhash of DuckDB's reading of it.
source "$(dirname "$0")/lib.sh"
T=$(scratch parquet_interop)
GEN=$BUILD/tools/ftl_parquet_gen
COMPARE="$PY $(dirname "$0")/parquet_compare.py"
export SHARED
if [ ! -x "$GEN" ]; then
    fail "parquet interop setup" "$GEN missing (make test builds it)"
    finish
fi

# NAME GEN_ARGS...  (refdata files: the expected checksums come from colhash_ref.py)
check_refdata() {
    local name=$1
    shift
    local f=$T/$name.parquet spec
    if ! "$GEN" refdata "$f" "$@" >"$T/$name.written.json" 2>"$T/$name.err"; then
        fail "$name" "writing failed: $(cat "$T/$name.err")"
        return
    fi
    # the data-definition options colhash_ref.py understands
    spec=$("$PY" - "$@" <<'PYEOF'
import sys
a = sys.argv[1:]; out = []
for i, x in enumerate(a):
    if x in ("--rows", "--image-bytes", "--seed", "--classes", "--distinct-images"): out += [x, a[i + 1]]
    if x == "--utf8-paths": out.append(x)
print(" ".join(out))
PYEOF
)
    # shellcheck disable=SC2086
    "$PY" "$INTEROP/tests/colhash_ref.py" $spec >"$T/$name.expected.json"
    if ! cmp -s <("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1]))["columns"]; print(json.dumps({k: [v["sha256"], v["count"]] for k, v in d.items()}, sort_keys=True))' "$T/$name.expected.json") \
                <("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1]))["columns"]; print(json.dumps({k: [v["sha256"], v["count"]] for k, v in d.items()}, sort_keys=True))' "$T/$name.written.json"); then
        fail "$name: written data" "the writer's input differs from the data definition (colhash_ref.py)"
        return
    fi
    if ! node "$INTEROP/parquet_inspect.mjs" "$f" --no-file-sha --expect "$T/$name.expected.json" >"$T/$name.inspect.json" 2>"$T/$name.inspect.err"; then
        fail "$name: engines" "parquet_inspect: $(grep -A8 -E '"(cross_check|expect)"' "$T/$name.inspect.json" | head -c 700) $(head -c 300 "$T/$name.inspect.err")"
        return
    fi
    pass "$name: DuckDB, hyparquet and arrow-rs agree with the data definition"
    # shellcheck disable=SC2086
    compare_ftl "$name" "$f" ${CLASSES:+--classes $CLASSES}
}

compare_ftl() { # NAME FILE [--classes ROWS SEED K]
    local name=$1 f=$2
    shift 2
    if ! "$FTL" inspect --json --checksums --pages "$f" >"$T/$name.ftl.json" 2>"$T/$name.ftl.err"; then
        fail "$name: ftl inspect" "$(cat "$T/$name.ftl.err")"
        return
    fi
    local diff
    if diff=$($COMPARE "$T/$name.ftl.json" "$T/$name.inspect.json" "$@"); then
        pass "$name: ftl inspect (rows, row groups, codecs, pages, checksums) equals the engines${1:+, class counts too}"
    else
        fail "$name: ftl inspect vs engines" "$diff"
    fi
}

# CLASSES="ROWS SEED K": also check the class counts of an ftl dataset
CLASSES="3000 1 10" check_refdata snappy_dataset --rows 3000 --image-bytes 61 --row-group-rows 1000 --codec snappy --dataset
CLASSES="40 3 4" check_refdata none_big_images --rows 40 --image-bytes 150528 --row-group-rows 7 --codec none --dataset --classes 4 --seed 3
check_refdata gzip_optional_utf8 --rows 2000 --image-bytes 100 --row-group-rows 777 --codec gzip --optional --utf8-paths --seed 5 --classes 3
check_refdata zstd_small_pages --rows 5000 --image-bytes 33 --row-group-rows 2000 --codec zstd --level 19 --page-bytes 4096 --distinct-images 4 --no-crc
check_refdata one_row_groups --rows 25 --image-bytes 9 --row-group-rows 1 --codec snappy
check_refdata zero_rows --rows 0 --image-bytes 9 --row-group-rows 10 --codec zstd --dataset

# every physical type, nulls in every column
for spec in "zstd --optional --page-bytes 700" "none" "snappy --optional" "gzip --optional --no-crc"; do
    codec=${spec%% *}
    name=types_${codec}$( [[ $spec == *optional* ]] && echo _optional)
    f=$T/$name.parquet
    # shellcheck disable=SC2086
    if ! "$GEN" types "$f" --rows 3000 --row-group-rows 1100 --codec $spec >"$T/$name.written.json" 2>"$T/$name.err"; then
        fail "$name" "writing failed: $(cat "$T/$name.err")"
        continue
    fi
    # --expect: the checksums of the data ftl was given to write
    if node "$INTEROP/parquet_inspect.mjs" "$f" --no-file-sha --expect "$T/$name.written.json" >"$T/$name.inspect.json" 2>"$T/$name.inspect.err"; then
        pass "$name: DuckDB, hyparquet and arrow-rs agree with the data written"
        compare_ftl "$name" "$f"
    else
        fail "$name: engines" "$(grep -A8 '"cross_check"' "$T/$name.inspect.json" | head -c 800) $(head -c 300 "$T/$name.inspect.err")"
    fi
done

# files from other writers: ftl inspect's view (row groups, codecs, sizes, page counts by
# type/encoding, checksums) equals the engines'
for name in arrow_dict_fallback duckdb_types_v2 hyparquet_snappy_dict-auto_rg512 arrow_types_bss; do
    f=$BUILD/ref/parquet/$name.parquet
    if [ ! -f "$f" ]; then
        fail "reference $name" "$f missing (tests/ref/gen_parquet.sh makes it)"
    elif node "$INTEROP/parquet_inspect.mjs" "$f" --no-file-sha >"$T/$name.inspect.json" 2>"$T/$name.inspect.err"; then
        compare_ftl "$name" "$f"
    else
        fail "reference $name: engines" "$(head -c 400 "$T/$name.inspect.err")"
    fi
done

# struct columns from DuckDB and arrow-rs (tests/ref/gen_parquet_nested.sh): the checksums of
# every struct leaf in `ftl inspect --json --checksums` equal the colhash of DuckDB's reading of
# it; leaves inside lists and maps get none
nested=$BUILD/ref/parquet_nested
if [ ! -f "$nested/manifest.txt" ]; then
    fail "nested reference files" "$nested/manifest.txt missing (tests/ref/gen_parquet_nested.sh makes it)"
fi
while read -r name; do
    [ -n "$name" ] || continue
    if ! "$FTL" inspect --json --checksums "$nested/$name.parquet" >"$T/nested_$name.ftl.json" 2>"$T/nested_$name.err"; then
        fail "nested $name: ftl inspect" "$(cat "$T/nested_$name.err")"
    elif diff=$("$PY" - "$T/nested_$name.ftl.json" "$nested/$name.json" <<'PYEOF'
import json, sys
ftl, ref = (json.load(open(p)) for p in sys.argv[1:3])
cols = ftl.get("columns", {})
for leaf, want in ref["leaves"].items():
    got = cols.get(leaf)
    for k in ("sha256", "nulls_sha256", "count", "null_count"):
        if not got or got[k] != want["colhash"][k]:
            print(f"{leaf} {k}: ftl {got and got[k]} vs DuckDB {want['colhash'][k]}")
            break
for leaf in ref["repeated"]:
    if leaf in cols:
        print(f"{leaf}: a list's leaf got a checksum")
if not ref["leaves"]:
    print("no struct leaves in the reference")
PYEOF
    ) && [ -z "$diff" ]; then
        pass "nested $name: ftl inspect's struct-leaf checksums equal DuckDB's reading"
    else
        fail "nested $name: ftl inspect vs DuckDB" "$diff"
    fi
done <"$nested/manifest.txt"

# the text view of a dataset names the classes and their counts
if "$FTL" inspect "$T/snappy_dataset.parquet" >"$T/text.out" 2>&1 && grep -q '^classes: *10' "$T/text.out" &&
    grep -qE '^ +0 class_0 +[0-9]+' "$T/text.out" && grep -q 'ftl.format = ftl-dataset-1' "$T/text.out" &&
    grep -q 'label  *INT32 REQUIRED' "$T/text.out"; then
    pass "ftl inspect text: schema, metadata, class names and counts"
else
    fail "ftl inspect text" "$(head -c 1500 "$T/text.out")"
fi

# same input, same bytes
"$GEN" refdata "$T/again.parquet" >/dev/null --rows 3000 --image-bytes 61 --row-group-rows 1000 --codec snappy --dataset
check "deterministic output (byte-identical rewrite)" cmp -s "$T/again.parquet" "$T/snappy_dataset.parquet"
finish
