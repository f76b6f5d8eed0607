#!/usr/bin/env bash
# Datasets with the article's schema (label, image, path) written by DuckDB, arrow-rs and
# hyparquet, for the loader's interop test (tests/unit/test_loader_interop.c): images are
# 3 x 3 x 3 = 27 bytes. NAME.json is parquet_write_ref.mjs's report with expected_columns.
# Writes $BUILD/ref/loader/; skips when the stamp (this script + the interop tools) matches.
set -u
cd "$(dirname "$0")/../.."
: "${BUILD:?BUILD must be set}" "${SHARED:?SHARED must be set}"
export INTEROP_NODE_DIR=${INTEROP_NODE_DIR:-$BUILD/interop-node}
I=$SHARED/tools/interop
OUT=$BUILD/ref/loader
mkdir -p "$OUT"
key=$(cat "$0" "$I/parquet_write_ref.mjs" "$I/package-lock.json" | sha256sum | cut -d' ' -f1)
if [ -f "$OUT/stamp" ] && [ "$(cat "$OUT/stamp")" = "$key" ]; then
    echo "ok ref-loader (up to date)"
    exit 0
fi
rm -f "$OUT"/*
failed=0
make_file() {  # NAME ARGS...
    local name=$1
    shift
    if node "$I/parquet_write_ref.mjs" "$OUT/$name.parquet" --image-bytes 27 --classes 5 "$@" >"$OUT/$name.json" 2>"$OUT/$name.log"; then
        echo "ok ref-loader-$name"
    else
        echo "FAIL ref-loader-$name: $(tail -3 "$OUT/$name.log")"
        failed=1
    fi
}
make_file duckdb_snappy --rows 5000 --engine duckdb --row-group-rows 2048 --codec snappy
make_file arrow_zstd_dict_v2 --rows 1000 --engine arrow-rs --row-group-rows 130 --codec zstd --dictionary on --page-version 2
make_file hyparquet_required --rows 700 --engine hyparquet --row-group-rows 100 --codec gzip --required
[ $failed -eq 0 ] && echo "$key" >"$OUT/stamp"
exit $failed
