# Helpers for end-to-end test scripts: each check prints `ok NAME` or `FAIL NAME: why`.
# Source it; call `finish` at the end (exit status 1 when anything failed).
set -u
: "${BUILD:?BUILD must be set (run through tests/run_tests.sh or make test)}"
: "${SHARED:?SHARED must be set}"
: "${FTL:=$BUILD/ftl}" "${FTL_SAN:=$BUILD/ftl_san}" "${PY:=/usr/bin/python3}"
: "${INTEROP_NODE_DIR:=$BUILD/interop-node}"
export INTEROP_NODE_DIR
INTEROP="$SHARED/tools/interop"
E2E_FAILED=0

pass() { echo "ok $1"; }
# A test that cannot run here: reported with its reason, never counted as passed.
skip() { echo "skip $1: $2"; }
fail() {
    echo "FAIL $1: ${2:-}"
    E2E_FAILED=$((E2E_FAILED + 1))
}

# Why int8 cannot run here ("" when it can): ftl refuses int8 on CPUs whose oneDNN int8 kernels
# saturate (no VNNI or AMX), saying so.
no_int8_reason() {
    local err
    err=$("$FTL" inspect "$SHARED/models/mobilenet_v1_0.25_128.onnx" --profile --precision int8 --batch 1 2>&1 >/dev/null)
    grep -q 'no int8 dot-product instructions' <<<"$err" &&
        echo "this CPU has no int8 dot-product instructions (VNNI or AMX): oneDNN's int8 kernels saturate there, so ftl refuses int8"
    return 0
}

# A fresh scratch folder under the build folder for this script.
scratch() {
    local d="$BUILD/test-tmp/e2e-$1"
    rm -rf "$d"
    mkdir -p "$d"
    echo "$d"
}

# check NAME command...   passes when the command exits 0 (its output goes to the log).
check() {
    local name=$1
    shift
    if "$@"; then pass "$name"; else fail "$name" "command failed: $*"; fi
}

# expect_error NAME EXIT_CODE REGEX command...
# The command must exit with EXIT_CODE, print a message matching REGEX on stderr, and show no
# sanitizer report (run it under $FTL_SAN to catch crashes and out-of-bounds reads).
expect_error() {
    local name=$1 want_rc=$2 pattern=$3
    shift 3
    local err rc
    err=$("$@" 2>&1 >/dev/null)
    rc=$?
    if grep -q -E 'AddressSanitizer|runtime error:|LeakSanitizer' <<<"$err"; then
        fail "$name" "sanitizer report: $(head -c 600 <<<"$err")"
    elif [ "$rc" -ne "$want_rc" ]; then
        fail "$name" "exit status $rc, expected $want_rc; stderr: $(head -c 400 <<<"$err")"
    elif ! grep -q -E -- "$pattern" <<<"$err"; then
        fail "$name" "stderr does not match /$pattern/: $(head -c 400 <<<"$err")"
    else
        pass "$name"
    fi
}

# Prints why this CPU cannot run --precision bf16 (and returns 0), or returns 1 when it can.
no_bf16_reason() {
    "$FTL" --version | grep -q '^CPU: .*(avx512' && return 1
    echo "this CPU has no bf16 kernels in oneDNN (bf16 needs AVX-512; $("$FTL" --version | sed -n 's/^CPU: //p'))"
}

finish() {
    [ "$E2E_FAILED" -eq 0 ]
    exit $?
}
