#!/usr/bin/env bash
# Reference Parquet files with struct columns (NULLs at every level, required inside optional and
# the reverse, dictionary and plain binary, v1 and v2 pages, many pages per chunk), written by
# DuckDB and arrow-rs, and DuckDB's reading of every leaf (tests/tools/parquet_nested.mjs), for
# tests/unit/test_parquet_nested.c and the nested part of tests/e2e/test_parquet_interop.sh.
# Writes $BUILD/ref/parquet_nested/{NAME.parquet,NAME.json,manifest.txt}; prints ok/FAIL lines;
# skips everything when the stamp (this script, the writer script, the interop tools) matches.
set -u
cd "$(dirname "$0")/../.."
: "${BUILD:?BUILD must be set}" "${SHARED:?SHARED must be set}"
export INTEROP_NODE_DIR=${INTEROP_NODE_DIR:-$BUILD/interop-node}
I=$SHARED/tools/interop
OUT=$BUILD/ref/parquet_nested
mkdir -p "$OUT"

key=$(cat "$0" tests/tools/parquet_nested.mjs "$I/interop_common.mjs" "$I/package-lock.json" | sha256sum | cut -d' ' -f1)
if [ -f "$OUT/stamp" ] && [ "$(cat "$OUT/stamp")" = "$key" ] && [ -f "$OUT/manifest.txt" ]; then
    echo "ok ref-parquet-nested (up to date: $(wc -l <"$OUT/manifest.txt") files in $OUT)"
    exit 0
fi
rm -f "$OUT"/*.parquet "$OUT"/*.json "$OUT/stamp" "$OUT/manifest.txt"
if ! node tests/tools/parquet_nested.mjs "$OUT" "$SHARED" >"$OUT/files.txt" 2>"$OUT/err.txt"; then
    echo "FAIL ref-parquet-nested: parquet_nested.mjs: $(tail -c 600 "$OUT/err.txt")"
    exit 1
fi
failed=0
while read -r f; do
    name=$(basename "$f" .parquet)
    if [ -s "$OUT/$name.parquet" ] && [ -s "$OUT/$name.json" ]; then
        echo "$name" >>"$OUT/manifest.txt"
        echo "ok ref-parquet-nested $name"
    else
        echo "FAIL ref-parquet-nested $name: file or reference JSON missing"
        failed=1
    fi
done <"$OUT/files.txt"
rm -f "$OUT/files.txt" "$OUT/err.txt"
[ "$failed" -eq 0 ] && echo "$key" >"$OUT/stamp"
exit "$failed"
