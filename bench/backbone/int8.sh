#!/usr/bin/env bash
# int8 vs fp32 backbones: ftl --precision int8 (calibrated on synthetic images: the speed does not
# depend on the scales) and fp32, against PyTorch 1.13's FX int8 quantization and its fp32
# channels-last (bench/backbone/torch_int8.py), same threads and batch, interleaved round by round so
# the shared machine's drift hits both. Also the int8 rate as % of the VNNI peak and the int8 choice
# per node (ftl inspect --profile --precision int8).
# usage: bench/backbone/int8.sh [--models resnet50,mobilenet_v2,xception,vit_b_16] [--batches 16,1] [--rounds 2] [--threads N]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${SHARED:=$(cd .. && pwd)/shared}"
: "${BUILD:=$PWD/build}"
models=resnet50,mobilenet_v2,xception batches=16,1 rounds=2 threads=$(nproc)
while [ $# -gt 0 ]; do
    case $1 in
    --models) models=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
out=$BUILD/bench/int8-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
PY=/usr/bin/python3
make -s -j2 all >/dev/null
cc -O2 -std=c17 -D_GNU_SOURCE -Iinclude bench/backbone/ftl_bench.c "$BUILD/libftl.a" -lturbojpeg -lpng -lprotobuf-c -ldnnl \
    -lgomp -lzstd -lsnappy -lz -lm -lpthread -L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi -ldl -o "$BUILD/bench/ftl_bench"
$PY -W ignore bench/backbone/export_models.py "$BUILD/bench" "$SHARED" >&2
model_path() { case $1 in xception) echo "$SHARED/models/xception_random.onnx" ;; *) echo "$BUILD/bench/$1.onnx" ;; esac; }
# bf16 rows where the CPU has native bf16 dot products (their rate is then 2x fp32's on Zen 4/5)
bf16=; grep -q avx512_bf16 /proc/cpuinfo && bf16=bf16
res=$out/results.jsonl
: >"$res"
lscpu | grep -E "Model name|^CPU\(s\)" | tr -s ' ' >"$out/env.txt"
for m in ${models//,/ }; do
    "$BUILD/ftl" inspect "$(model_path "$m")" --profile --precision int8 --batch 16 --threads "$threads" --reps 3 --top 5 \
        >"$out/profile-$m.txt" 2>&1 || true
    for r in $(seq 1 "$rounds"); do
        for b in ${batches//,/ }; do
            for p in fp32 int8 $bf16; do
                OMP_NUM_THREADS=$threads "$BUILD/bench/ftl_bench" "$(model_path "$m")" --batch "$b" --precision "$p" \
                    --threads "$threads" --reps 3 | sed "s/^{/{\"round\":$r,\"name\":\"$m\",/" >>"$res"
            done
        done
        OMP_NUM_THREADS=$threads $PY -W ignore bench/backbone/torch_int8.py --models "$m" --batches "$batches" \
            --threads "$threads" --reps 3 --calibration-rows 32 --shared "$SHARED" 2>/dev/null |
            sed "s/^{/{\"round\":$r,\"name\":\"$m\",/" >>"$res"
    done
done
$PY - "$res" "$out" <<'PYEOF'
import json, statistics, sys, glob, re
rows = [json.loads(l) for f in sys.argv[1].split(",") for l in open(f)]
def med(name, b, key, val):
    xs = [r["median"] for r in rows if r["name"] == name and r["batch"] == b and r.get(key) == val and "median" in r]
    return (statistics.median(xs), min(xs), max(xs)) if xs else (float("nan"),) * 3
print("| model | batch | ftl fp32 img/s | ftl bf16 img/s | ftl int8 img/s | int8/fp32 | PyTorch fp32_cl | PyTorch int8 | ftl int8 / PyTorch int8 |")
print("|---|---|---|---|---|---|---|---|---|")
for name in dict.fromkeys(r["name"] for r in rows):
    for b in sorted({r["batch"] for r in rows if r["name"] == name}, reverse=True):
        f, i, h = med(name, b, "precision", "fp32"), med(name, b, "precision", "int8"), med(name, b, "precision", "bf16")
        t, q = med(name, b, "mode", "fp32_cl"), med(name, b, "mode", "fx_int8")
        mode = "FX"
        if any(r.get("mode") == "dynamic_int8" and r["name"] == name for r in rows):
            q, mode = med(name, b, "mode", "dynamic_int8"), "dynamic"  # FX could not trace it (ViT): PyTorch's
            # dynamic quantization of the Linear layers
        print(f"| {name} | {b} | {f[0]:.1f} ({f[1]:.1f}-{f[2]:.1f}) | {h[0]:.1f} | {i[0]:.1f} ({i[1]:.1f}-{i[2]:.1f}) | "
              f"{i[0]/f[0]:.2f}x | {t[0]:.1f} | {q[0]:.1f} ({mode}) | {i[0]/q[0]:.2f}x |")
for p in sorted(glob.glob(sys.argv[2] + "/profile-*.txt")):
    t = open(p).read()
    pk = re.search(r"^peak .*", t, re.M); tot = re.search(r"^total .*", t, re.M); ch = re.search(r"^int8 .*", t, re.M)
    print(p.split("profile-")[1][:-4], "|", pk.group(0) if pk else "", "|", tot.group(0) if tot else "", "|", ch.group(0)[:160] if ch else "")
PYEOF
echo "raw results: $res"
