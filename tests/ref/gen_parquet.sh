#!/usr/bin/env bash
# Reference Parquet files written by other implementations, for ftl's reader tests
# (tests/unit/test_parquet_interop.c reads every one and compares column checksums):
#  - the interop matrix of shared/tools/interop/parquet_write_ref.mjs: DuckDB, arrow-rs and
#    hyparquet x every codec each supports x dictionary auto/on/off x page v1/v2 x row-group
#    sizes x REQUIRED/OPTIONAL, plus zero rows, one-row row groups, UTF-8 paths, many small
#    pages, dictionary fallback to PLAIN mid-chunk; NAME.json is the writer's report with
#    "expected_columns" (colhash v1 of the generated data, computed before writing);
#  - tests/ref/parquet_extra.mjs: every flat type with nulls (DuckDB v1/v2, arrow-rs v1/v2,
#    BYTE_STREAM_SPLIT) and a file with nested columns; NAME.json is parquet_inspect.mjs's
#    output (the three engines must agree).
# Writes $BUILD/ref/parquet/{NAME.parquet,NAME.json,manifest.txt}; prints ok/FAIL lines;
# skips everything when the stamp (this script, the extra script, the interop tools) matches.
set -u
cd "$(dirname "$0")/../.."
: "${BUILD:?BUILD must be set}" "${SHARED:?SHARED must be set}"
export INTEROP_NODE_DIR=${INTEROP_NODE_DIR:-$BUILD/interop-node}
I=$SHARED/tools/interop
OUT=$BUILD/ref/parquet
mkdir -p "$OUT"

key=$(cat "$0" tests/ref/parquet_extra.mjs "$I/parquet_write_ref.mjs" "$I/parquet_inspect.mjs" "$I/interop_common.mjs" \
      "$I/package-lock.json" | sha256sum | cut -d' ' -f1)
if [ -f "$OUT/stamp" ] && [ "$(cat "$OUT/stamp")" = "$key" ] && [ -f "$OUT/manifest.txt" ]; then
    echo "ok ref-parquet (up to date: $(wc -l <"$OUT/manifest.txt") files in $OUT)"
    exit 0
fi
rm -f "$OUT"/*.parquet "$OUT"/*.json "$OUT"/*.log "$OUT/stamp" "$OUT/manifest.txt"

# ---- the job list: NAME ARGS... for parquet_write_ref.mjs ----
jobs_file=$OUT/jobs.txt
: >"$jobs_file"
add() { echo "$*" >>"$jobs_file"; }
B="--rows 3000 --image-bytes 61"
for c in none snappy gzip zstd; do
    for d in auto off; do for pv in 1 2; do
        add "duckdb_${c}_dict-${d}_v$pv $B --engine duckdb --row-group-rows 2048 --codec $c --dictionary $d --page-version $pv"
    done; done
done
i=0
for c in none snappy gzip zstd; do
    for d in auto on off; do for pv in 1 2; do
        rg=(1000 777 3000); req=(--required "")
        add "arrow_${c}_dict-${d}_v${pv}_rg${rg[i % 3]}${req[i % 2]:+_req} $B --engine arrow-rs --codec $c --dictionary $d --page-version $pv --row-group-rows ${rg[i % 3]} ${req[i % 2]}"
        i=$((i + 1))
    done; done
done
for c in none snappy gzip; do
    for d in auto on off; do
        rg=(1000 512); req=(--required "")
        r=${req[(i / 2) % 2]}
        add "hyparquet_${c}_dict-${d}_rg${rg[i % 2]}${r:+_req} $B --engine hyparquet --codec $c --dictionary $d --row-group-rows ${rg[i % 2]} $r"
        i=$((i + 1))
    done
done
add "duckdb_plain_distinct_utf8 $B --engine duckdb --row-group-rows 2048 --codec snappy --encoding plain --distinct-images 5 --utf8-paths --seed 7 --classes 3"
add "duckdb_v2_distinct $B --engine duckdb --row-group-rows 2048 --codec zstd --page-version 2 --distinct-images 7"
add "arrow_plain_v2_pages4k $B --engine arrow-rs --row-group-rows 1000 --codec zstd --encoding plain --page-version 2 --page-bytes 4096"
add "arrow_pages1k_req $B --engine arrow-rs --row-group-rows 1500 --codec snappy --page-bytes 1024 --dictionary off --required"
add "hyparquet_pages4k_utf8_req $B --engine hyparquet --row-group-rows 1000 --codec snappy --page-bytes 4096 --utf8-paths --required"
add "arrow_zero_rows --rows 0 --image-bytes 8 --row-group-rows 10 --engine arrow-rs --codec snappy"
add "hyparquet_zero_rows --rows 0 --image-bytes 8 --row-group-rows 10 --engine hyparquet --codec none"
add "duckdb_zero_rows --rows 0 --image-bytes 8 --row-group-rows 2048 --engine duckdb --codec zstd"
add "arrow_one_row_groups --rows 40 --image-bytes 5 --row-group-rows 1 --engine arrow-rs --codec gzip --required"
add "arrow_dict_fallback --rows 64 --image-bytes 150528 --row-group-rows 32 --engine arrow-rs --codec snappy"
add "arrow_big_images_v2 --rows 16 --image-bytes 150528 --row-group-rows 8 --engine arrow-rs --codec zstd --page-version 2 --dictionary off"

run_job() { # NAME ARGS...
    local name=$1
    shift
    # shellcheck disable=SC2068
    if node "$I/parquet_write_ref.mjs" "$OUT/$name.parquet" $@ >"$OUT/$name.json.tmp" 2>"$OUT/$name.err"; then
        mv "$OUT/$name.json.tmp" "$OUT/$name.json"
        rm -f "$OUT/$name.err"
        echo "ok ref-parquet $name"
    else
        echo "FAIL ref-parquet $name: parquet_write_ref.mjs $*: $(tail -c 400 "$OUT/$name.err")"
    fi
}

# two at a time: node start-up dominates and the machine has 2 cores
n=0
while read -r name args; do
    run_job "$name" $args >"$OUT/$name.log" &
    n=$((n + 1))
    if [ "$n" -ge 2 ]; then wait -n; n=$((n - 1)); fi
done <"$jobs_file"
wait

# ---- other types, nulls, nested columns ----
extras=$(node tests/ref/parquet_extra.mjs "$OUT" "$SHARED" 2>"$OUT/extra.err")
if [ $? -ne 0 ]; then
    echo "FAIL ref-parquet extra files: $(tail -c 400 "$OUT/extra.err")"
else
    rm -f "$OUT/extra.err"
fi
for f in $extras; do
    name=$(basename "$f" .parquet)
    if node "$I/parquet_inspect.mjs" "$f" --no-file-sha >"$OUT/$name.json.tmp" 2>"$OUT/$name.err"; then
        mv "$OUT/$name.json.tmp" "$OUT/$name.json"
        rm -f "$OUT/$name.err"
        echo "ok ref-parquet $name (three engines agree)" >"$OUT/$name.log"
    else
        echo "FAIL ref-parquet $name: parquet_inspect.mjs: engines disagree or failed: $(grep -A3 '"problems"' "$OUT/$name.json.tmp" | head -c 400)" >"$OUT/$name.log"
    fi
    echo "$name" >>"$jobs_file"
done

cut -d' ' -f1 "$jobs_file" >"$OUT/manifest.txt"
failed=0
while read -r name; do
    cat "$OUT/$name.log"
    grep -q '^FAIL' "$OUT/$name.log" && failed=1
done <"$OUT/manifest.txt"
rm -f "$OUT"/*.log "$jobs_file"
[ "$failed" -eq 0 ] && echo "$key" >"$OUT/stamp"
exit "$failed"
