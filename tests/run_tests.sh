#!/usr/bin/env bash
# Runs every test suite and prints the total `N passed, N failed`; exits 1 on any failure.
# Suites: reference generators (tests/ref/gen_*), unit tests (plain and ASan+UBSan),
# end-to-end scripts (tests/e2e/test_*.sh). Each prints `ok NAME` / `FAIL NAME` lines, and
# `skip NAME: reason` for a test that cannot run here (never counted as passed).
# Usage: tests/run_tests.sh [SUITE_NAME_SUBSTRING]
set -u
cd "$(dirname "$0")/.."
: "${BUILD:=$PWD/build}"
: "${SHARED:=$(cd .. && pwd)/shared}"
: "${INTEROP_NODE_DIR:=$BUILD/interop-node}"
export BUILD SHARED INTEROP_NODE_DIR
export FTL="$BUILD/ftl" FTL_SAN="$BUILD/ftl_san" PY=/usr/bin/python3
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
filter=${1:-}
logs="$BUILD/test-logs"
mkdir -p "$logs"

total_passed=0
total_failed=0
total_skipped=0
run_suite() {  # name command...
    local name=$1
    shift
    case "$name" in *"$filter"*) ;; *) return ;; esac
    local log="$logs/$name.log" start end rc passed failed
    start=$(date +%s)
    "$@" >"$log" 2>&1
    rc=$?
    end=$(date +%s)
    # -a: a log may hold bytes that are not text (file names that are not UTF-8)
    passed=$(grep -a -c '^ok ' "$log")
    failed=$(grep -a -c '^FAIL ' "$log")
    skipped=$(grep -a -c '^skip ' "$log")
    if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
        echo "FAIL $name: exited with status $rc without naming a failed test" >>"$log"
        failed=1
    fi
    if [ "$skipped" -gt 0 ]; then
        printf '%-28s %4d passed, %3d failed, %3d skipped  (%ds)\n' "$name" "$passed" "$failed" "$skipped" $((end - start))
        grep -a '^skip ' "$log" | sed 's/^/    /'
    else
        printf '%-28s %4d passed, %3d failed  (%ds)\n' "$name" "$passed" "$failed" $((end - start))
    fi
    if [ "$failed" -gt 0 ]; then
        grep -a -B2 -A12 '^FAIL ' "$log" | head -80 | cat -v | sed 's/^/    /'
        echo "    (full log: $log)"
    fi
    total_passed=$((total_passed + passed))
    total_failed=$((total_failed + failed))
    total_skipped=$((total_skipped + skipped))
}

for gen in tests/ref/gen_*.sh; do
    [ -e "$gen" ] || continue
    run_suite "ref-$(basename "$gen" .sh | sed 's/^gen_//')" bash "$gen"
done
run_suite unit "$BUILD/ftl_unit"
run_suite unit-asan-ubsan env FTL_TEST_LABEL=san: "$BUILD/ftl_unit_san"
for t in tests/e2e/test_*.sh; do
    [ -e "$t" ] || continue
    run_suite "e2e-$(basename "$t" .sh | sed 's/^test_//')" bash "$t"
done

if [ "$total_skipped" -gt 0 ]; then
    echo "$total_passed passed, $total_failed failed, $total_skipped skipped"
else
    echo "$total_passed passed, $total_failed failed"
fi
[ "$total_failed" -eq 0 ]
