#!/usr/bin/env bash
# Tar shards for the tar index tests (tests/unit/test_tar_index.c) that GNU tar does not write on its
# own, made by Python's tarfile (tar_cases.py) with its read-back listings, under $BUILD/ref/tar.
# Regenerated only when this script, tar_cases.py or the Python version change.
set -u
cd "$(dirname "$0")"
: "${BUILD:?BUILD must be set}" "${PY:=/usr/bin/python3}"
out="$BUILD/ref/tar"
mkdir -p "$out"
key=$( { cat gen_tar.sh tar_cases.py; "$PY" --version 2>&1; } | sha256sum | cut -d' ' -f1)
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$key" ]; then
    echo "ok ref-tar (cached)"
    exit 0
fi
rm -f "$out"/*
if "$PY" tar_cases.py "$out" >"$out/log" 2>&1; then
    echo "$key" >"$out/stamp"
    echo "ok ref-tar"
else
    echo "FAIL ref-tar: tar_cases.py failed: $(tail -3 "$out/log")"
    exit 1
fi
