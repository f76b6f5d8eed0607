#!/usr/bin/env bash
# Checksum throughput (CRC32C both paths, zlib CRC-32, memcpy) and the cost of verifying tensor
# checksums when a safetensors file is loaded. Run from anywhere after `make`.
# usage: bench/checksum/run.sh [--mib N] [--runs K]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${BUILD:=build}"
make -s "$BUILD/bench/checksum/crc32c_bench"
exec "$BUILD/bench/checksum/crc32c_bench" --out "$BUILD/bench-tmp" "$@"
