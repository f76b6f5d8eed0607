#!/usr/bin/env bash
# Fuzzes ftl's parsers with libFuzzer (clang-14, ASan+UBSan), one target after another.
# usage: tests/fuzz/run.sh fuzz_parquet fuzz_onnx ...   (FUZZ_SECONDS per target, default 120)
# Seeds come from the test data (Parquet files written by ftl and the reference engines, the per-op
# ONNX graphs, the hymenoptera photos, ftl's own model files); run `make test` first for the richest
# seeds. New inputs go to build/fuzz/corpus/TARGET, crashes to build/fuzz/findings/TARGET: a crash
# there becomes a regression input by copying it to tests/fuzz/regressions/TARGET/ (make test replays
# those under ASan+UBSan).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${BUILD:=$PWD/build}" "${SHARED:=$(cd .. && pwd)/shared}" "${FUZZ_SECONDS:=120}"
CLANG=${CLANG:-clang-14}
out="$BUILD/fuzz"
objs="$out/obj"
mkdir -p "$objs"
flags=(-O1 -g -std=c17 -D_GNU_SOURCE -Iinclude -Isrc -I"$BUILD/gen" -fsanitize=fuzzer-no-link,address,undefined
       -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
libs=(-lturbojpeg -lpng -lprotobuf-c -ldnnl -lgomp -lzstd -lsnappy -lz -lm -lpthread)

# the library, instrumented (rebuilt when a source is newer than its object)
lib_objs=()
# (the single-process collectives: the parsers need no MPI)
# (every C file under src/, layer subfolders included; the CUDA backend's own are left out: cuda_none.c stands in)
for src in $(find src -name '*.c' -not -path 'src/nn/cuda/*' | sort | grep -v -e '^src/cli/' -e '^src/parallel/transport_mpi.c') "$BUILD/gen/onnx.pb-c.c"; do
    o="$objs/$(echo "$src" | tr '/' '_' | sed 's/\.c$/.o/')"
    if [ ! -f "$o" ] || [ "$src" -nt "$o" ]; then "$CLANG" "${flags[@]}" -c "$src" -o "$o"; fi
    lib_objs+=("$o")
done

seeds() {  # seeds TARGET DIR: copies up to 200 small files of the target's kind into DIR
    # (a seed folder that does not exist yet, build/demo before `make demo`, leaves fewer seeds: no error)
    local t=$1 dir=$2
    mkdir -p "$dir"
    case $t in
    fuzz_parquet) find "$BUILD/ref" "$BUILD/test-tmp" "$BUILD/demo" -name '*.parquet' -size -2M 2>/dev/null || true ;;
    fuzz_onnx) find "$BUILD/ref/nn/ops" -name '*.onnx' -size -200k 2>/dev/null || true ;;
    fuzz_image) find "$SHARED/data/hymenoptera" "$BUILD/ref" \( -iname '*.jpg' -o -iname '*.png' \) -size -60k 2>/dev/null || true ;;
    fuzz_safetensors) find "$BUILD/test-tmp" "$BUILD/demo" \( -name '*.ftl' -o -name '*.ckpt' \) -size -2M 2>/dev/null || true ;;
    fuzz_loader) find "$BUILD/test-tmp" "$BUILD/demo" -name '*.parquet' -size -400k 2>/dev/null || true ;;
    fuzz_tar) find "$BUILD/test-tmp" "$BUILD/ref/tar" -name '*.tar' -size -400k 2>/dev/null || true ;;
    fuzz_loader_position) : >"$out/empty-input" # one run on an empty input writes the seeds
        FUZZ_TMPDIR="$out" FUZZ_WRITE_SEEDS="$dir" "$out/$t" "$out/empty-input" >/dev/null 2>&1 ;;
    esac | head -200 | while read -r f; do cp "$f" "$dir/$(echo "$f" | sha256sum | cut -c1-16)"; done
    cp tests/fuzz/regressions/"$t"/* "$dir"/ 2>/dev/null || true
}

status=0
for t in "$@"; do
    bin="$out/$t"
    "$CLANG" "${flags[@]}" -fsanitize=fuzzer -o "$bin" "tests/fuzz/$t.c" "${lib_objs[@]}" "${libs[@]}"
    corpus="$out/corpus/$t" findings="$out/findings/$t"
    mkdir -p "$findings"
    [ -d "$corpus" ] || seeds "$t" "$corpus"
    echo "== $t: $(ls "$corpus" | wc -l) seeds, ${FUZZ_SECONDS}s"
    if ! FUZZ_TMPDIR="$out" ASAN_OPTIONS=detect_leaks=1 "$bin" "$corpus" -max_total_time="$FUZZ_SECONDS" \
        -max_len=1048576 -rss_limit_mb=4096 -timeout=20 -artifact_prefix="$findings/" -print_final_stats=1 \
        >"$out/$t.log" 2>&1; then
        echo "   FOUND a crash: $(ls "$findings" | head -3) (log: $out/$t.log)"
        status=1
    fi
    grep -E "stat::number_of_executed_units|stat::new_units_added" "$out/$t.log" | sed 's/^/   /'
done
exit $status
