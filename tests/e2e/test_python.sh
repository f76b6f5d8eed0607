#!/usr/bin/env bash
# `import ftl` (python/): the package built by `make python`, its tests under pytest against the CLI
# and independent references (tests/python/test_ftl.py).
source "$(dirname "$0")/lib.sh"
d=$(scratch python)
TESTS="$(cd "$(dirname "$0")/../python" && pwd)/test_ftl.py"
if ! "$PY" -c 'import pytest' 2>/dev/null; then
    skip python_package "pytest is not installed (scripts/install_deps.sh test installs python3-pytest)"
    finish
fi
if ! ls "$BUILD"/python/ftl/_ftl*.so >/dev/null 2>&1; then
    fail python_package_built "no $BUILD/python/ftl/_ftl*.so: make python"
    finish
fi
MODEL="$SHARED/models/mobilenet_v1_0.25_128.onnx"  # small and fast
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --size 128 --quiet 2>/dev/null || fail python_prep "prep failed"
"$FTL" train "$d/ds/train.parquet" --val "$d/ds/val.parquet" --backbone "$MODEL" --epochs 2 --out "$d/model.ftl" \
    --quiet >/dev/null 2>&1 || fail python_train "ftl train failed"
out=$(cd "$d" && FTL="$FTL" FTL_PY_MODEL="$d/model.ftl" FTL_PY_BACKBONE="$MODEL" FTL_PY_SCRATCH="$d" \
    PYTHONPATH="$BUILD/python" "$PY" -m pytest -q -p no:cacheprovider "$TESTS" -rA 2>&1)
echo "$out"
# one line per pytest test, as this runner counts them
while read -r status name; do
    case "$status" in
    PASSED) pass "python_${name##*::}" ;;
    FAILED | ERROR) fail "python_${name##*::}" "see the pytest output in the log" ;;
    SKIPPED) skip "python_${name##*::}" "skipped by pytest" ;;
    esac
done < <(grep -E '^(PASSED|FAILED|ERROR|SKIPPED) ' <<<"$out" | sed -E 's/ - .*//')
grep -q -E '^(PASSED|FAILED|ERROR) ' <<<"$out" || fail python_tests_ran "$(tail -5 <<<"$out")"
finish
