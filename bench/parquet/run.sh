#!/usr/bin/env bash
# Parquet read/write throughput on ~105 MB of 224x224x3 images (700 rows; real photo crops from
# the hymenoptera JPEGs), 1 MiB row groups as in the article, codecs none/snappy/zstd.
# usage: bench/parquet/run.sh [extra parquet_bench options]
set -eu
cd "$(dirname "$0")/../.."
: "${SHARED:=$(cd .. && pwd)/shared}"
make -s -j2 build/bench/parquet/parquet_bench
exec build/bench/parquet/parquet_bench --images "$SHARED/data/hymenoptera" --out build/bench-tmp "$@"
