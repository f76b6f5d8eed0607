#!/usr/bin/env bash
# The GPU checks, for a machine with an NVIDIA GPU, run from the bundle scripts/gpu_bundle.sh makes
# (this file is its run.sh). Stages, each writing its results under $OUT before the next starts, so
# a run cut off by its time limit still reports what it did:
#   1  load check: the libraries found, the device, one model on the GPU vs the CPU   (seconds)
#   2  every per-op case vs ONNX Runtime; the shared MobileNets and a random Xception on the GPU vs
#      the CPU backend: fp32 within 1e-4, TF32 and bf16 by cosine >= 0.999
#   3  the head: 20 optimizer steps on the GPU (cuBLAS, ftl's kernels, NCCL with one rank) vs the CPU
#      within 1e-5; end to end: ftl train + eval on the GPU and on the CPU: accuracy within one image
#   4  the benchmark: backbone images/s at batch 256 (fp32, tf32, bf16) vs PyTorch on the same GPU,
#      and ftl embed through the whole pipeline with its data-wait share
# usage: OUT=DIR run.sh [STAGES]   (default 1,2,3,4)
set -u
B=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$B/out}
STAGES=${1:-1,2,3,4}
mkdir -p "$OUT"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
want() { case ",$STAGES," in *",$1,"*) return 0 ;; esac; return 1; }

tar -C "$W" -xJf "$B/lib.tar.xz"
LDSO=$(ls "$W"/lib/ld-linux-x86-64.so.2)
# the machine's NVIDIA libraries: driver, cuDNN 9, cuBLAS 13, NCCL 2, NVML (system or Python wheels)
NV=""
for lib in libcuda.so.1 libcudnn.so.9 libcublas.so.13 libcublasLt.so.13 libnccl.so.2 libnvidia-ml.so.1; do
    p=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l {print $NF; exit}')
    [ -n "$p" ] || p=$(find / -xdev -name "$lib" -not -path '/proc/*' 2>/dev/null | head -1)
    if [ -n "$p" ]; then NV="$NV:$(dirname "$p")"; echo "found $lib: $p" >>"$OUT/libraries.txt"
    else echo "MISSING $lib" >>"$OUT/libraries.txt"; fi
done
LIBPATH="$W/lib$NV"
# Every command under a time limit (RUN_LIMIT seconds, default 240), so one that hangs (a GPU
# fault, NCCL's bootstrap) costs its stage, not the rest of the machine's time.
run() { local bin=$1; shift; timeout "${RUN_LIMIT:-240}" "$LDSO" --library-path "$LIBPATH" "$B/bin/$bin" "$@"; }
# NCCL's bootstrap needs a socket interface: the loopback one is enough for one rank on one machine.
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
PY=$(command -v python3 || true)

if want 1; then
    say "== stage 1: load check ($(date -u +%FT%TZ), bundle $(cat "$B/COMMIT" 2>/dev/null))"
    nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || true
    cat "$OUT/libraries.txt" >>"$OUT/summary.txt"
    run ftl embed --help >/dev/null 2>&1 && say "ok bundle_starts" || say "FAIL bundle_starts: the bundled ftl does not start"
    FTL_CUDNN_LIBRARY=libcudnn_missing.so.9 run ftl_cuda_check model "$B/models/mobilenet_v1_0.25_128.onnx" 2 128 \
        >"$OUT/stage1-no-cudnn.txt" 2>&1
    grep -q 'no cuDNN 9' "$OUT/stage1-no-cudnn.txt" && say "ok no_cudnn_error" || say "FAIL no_cudnn_error: $(head -c 300 "$OUT/stage1-no-cudnn.txt")"
    run ftl_cuda_check model "$B/models/mobilenet_v1_0.25_128.onnx" 5 128 >"$OUT/stage1.txt" 2>&1
    cat "$OUT/stage1.txt" >>"$OUT/summary.txt"
fi

if want 2; then
    say "== stage 2: per-op suite and models ($(date -u +%T))"
    tar -C "$W" -xJf "$B/ref/ops.tar.xz"
    run ftl_cuda_check ops "$W/ops" >"$OUT/stage2-ops.txt" 2>&1
    say "ops: $(grep -c '^ok' "$OUT/stage2-ops.txt") ok, $(grep -c '^FAIL' "$OUT/stage2-ops.txt") FAIL, $(grep -c '^skip' "$OUT/stage2-ops.txt") skip"
    grep '^FAIL' "$OUT/stage2-ops.txt" | head -20 >>"$OUT/summary.txt"
    xz -dc "$B/models/mobilenet_v2_1.0_224_features.onnx.xz" >"$W/mobilenet_v2.onnx"
    run ftl_cuda_check model "$W/mobilenet_v2.onnx" 9 224 >"$OUT/stage2-models.txt" 2>&1
    if [ -n "$PY" ] && (cd "$W" && timeout 300 "$PY" "$B/models/xception_torch.py" "$W/xception.onnx" --single-file) >"$OUT/xception-export.txt" 2>&1; then
        run ftl_cuda_check model "$W/xception.onnx" 5 299 >>"$OUT/stage2-models.txt" 2>&1
    else
        say "skip xception: the random Xception could not be exported here (see xception-export.txt)"
    fi
    cat "$OUT/stage2-models.txt" >>"$OUT/summary.txt"
fi

if want 3; then
    say "== stage 3: the head on the GPU, then train + eval, GPU vs CPU ($(date -u +%T))"
    RUN_LIMIT=90 run ftl_cuda_check head >"$OUT/stage3-head.txt" 2>&1 || say "ftl_cuda_check head ended with status $?"
    cat "$OUT/stage3-head.txt" >>"$OUT/summary.txt"
    for dev in cuda cpu; do
        run ftl train "$B/data/hymenoptera128/train.parquet" --val "$B/data/hymenoptera128/val.parquet" --backbone "$B/models/mobilenet_v1_0.25_128.onnx" \
            --epochs 5 --batch 16 --device $dev --seed 7 --out "$W/$dev.ftl" --quiet >"$OUT/stage3-train-$dev.txt" 2>&1
        run ftl eval "$W/$dev.ftl" "$B/data/hymenoptera128/val.parquet" --device $dev >"$OUT/stage3-eval-$dev.txt" 2>&1
    done
    a=$(grep -o 'top-1: [0-9.]*' "$OUT/stage3-eval-cuda.txt" | head -1); b=$(grep -o 'top-1: [0-9.]*' "$OUT/stage3-eval-cpu.txt" | head -1)
    say "eval gpu: ${a:-?}; cpu: ${b:-?} (153 images: one image = 0.0065)"
    grep -h 'Head on\|ftl.device\|GPU util\|Epoch' "$OUT/stage3-train-cuda.txt" | head -8 >>"$OUT/summary.txt"
fi

if want 4; then
    say "== stage 4: benchmark ($(date -u +%T))"
    models=("$W/mobilenet_v2.onnx:224")
    [ -e "$W/xception.onnx" ] && models+=("$W/xception.onnx:299")
    for round in 1 2; do
        for spec in "${models[@]}"; do
            m=${spec%%:*}
            for prec in fp32 tf32 bf16; do
                run ftl_bench "$m" --device cuda --batch 256 --precision $prec --reps 3 --min-rep-s 1 >>"$OUT/bench.jsonl" 2>>"$OUT/bench.err"
                # the same with the plan's steps replayed from a CUDA Graph (opt-in until this says it pays)
                FTL_CUDA_GRAPHS=1 run ftl_bench "$m" --device cuda --batch 256 --precision $prec --reps 3 --min-rep-s 1 2>>"$OUT/bench.err" |
                    sed 's/"engine":"ftl"/"engine":"ftl-graphs"/' >>"$OUT/bench.jsonl"
            done
            [ -n "$PY" ] && timeout 240 "$PY" "$B/torch_peer.py" "$m" --batch 256 --onnx-torch "$B/models/onnx_torch.py" \
                >>"$OUT/bench.jsonl" 2>>"$OUT/bench.err"
        done
    done
    # the whole pipeline: Parquet -> GPU -> features, with the share of time spent waiting for data
    run ftl_parquet_gen refdata "$W/images.parquet" --rows 4096 --image-bytes $((224 * 224 * 3)) --row-group-rows 256 \
        --dataset --classes 10 >/dev/null 2>>"$OUT/bench.err"
    run ftl embed "$W/images.parquet" --backbone "$W/mobilenet_v2.onnx" "$W/features.parquet" --device cuda --batch 256 \
        --image-size 224 --loader-threads 4 >>"$OUT/bench-embed.txt" 2>&1
    tail -3 "$OUT/bench-embed.txt" >>"$OUT/summary.txt"
    [ -n "$PY" ] && "$PY" - "$OUT/bench.jsonl" <<'PYEOF' >>"$OUT/summary.txt" 2>&1
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
best = collections.defaultdict(list)
for r in rows:
    best[(r.get("engine"), r["model"].split("/")[-1], r.get("precision", r.get("mode")))].append(r["median"])
for k, v in sorted(best.items()):
    v.sort()
    print(f"{k[0]:6} {k[1]:22} {k[2]:12} median of rounds {v[len(v) // 2]:9.1f} images/s  (rounds: {', '.join(f'{x:.1f}' for x in v)})")
PYEOF
fi
say "== done ($(date -u +%T))"
