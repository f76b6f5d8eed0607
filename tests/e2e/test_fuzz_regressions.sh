#!/usr/bin/env bash
# Replays every saved fuzz input (tests/fuzz/regressions/TARGET/*: inputs that once crashed,
# overflowed or exhausted memory, plus small ones the fuzzer found reaching new code) through the
# fuzz targets built with gcc under ASan+UBSan (build/fuzz/TARGET_replay). Each input must be handled
# (accepted or refused with an error) without a sanitizer report, leak or crash.
source "$(dirname "$0")/lib.sh"
d=$(scratch fuzz)
here=$(cd "$(dirname "$0")/.." && pwd)
for dir in "$here"/fuzz/regressions/*/; do
    t=$(basename "$dir")
    bin="$BUILD/fuzz/${t}_replay"
    if [ ! -x "$bin" ]; then
        fail "fuzz_replay_$t" "$bin missing (make test builds it)"
        continue
    fi
    n=0
    for f in "$dir"*; do
        [ -f "$f" ] || continue
        n=$((n + 1))
        if FUZZ_TMPDIR="$d" "$bin" "$f" >"$d/out" 2>"$d/err" && ! grep -q "Sanitizer\|runtime error" "$d/err"; then
            pass "fuzz_${t}_$(basename "$f")"
        else
            fail "fuzz_${t}_$(basename "$f")" "$(grep -m3 "ERROR\|runtime error\|SUMMARY" "$d/err" | tr '\n' ' ')"
        fi
    done
    [ "$n" -gt 0 ] || fail "fuzz_replay_$t" "no inputs in $dir"
done
finish
