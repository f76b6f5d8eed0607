#!/usr/bin/env bash
# int8 calibration's cost per image against the int8 feature pass it serves (issue: calibration that
# pays for itself, target <= 4x): the shared ImageNet MobileNetV2 (tf scaling) and torchvision's
# ResNet-50 (random weights, torch scaling) on the shared photos at 224 (train + val, cycled to the
# count), percentile calibration without the cache, then the int8 and fp32 passes of the same images
# (bench/backbone/calibration_cost.c). With --before BUILD_DIR (a build of an older tree with its
# libftl.a) both builds run, alternating which goes first each round, and their scales' hashes are
# compared: the same images must give byte-identical scales.
# usage: bench/backbone/calibration.sh [--before BUILD_DIR] [--rounds R] [--counts 244,512] [--models mobilenet_v2,resnet50]
#        [--threads N]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${SHARED:=$(cd .. && pwd)/shared}"
: "${BUILD:=$PWD/build}"
before= rounds=3 counts=244,512 models=mobilenet_v2,resnet50 threads=$(nproc)
while [ $# -gt 0 ]; do
    case $1 in
    --before) before=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --counts) counts=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
grep -qwE 'avx512_vnni|avx_vnni|amx_int8' /proc/cpuinfo || { echo "skipped: this CPU has no int8 dot products (VNNI or AMX); ftl refuses int8 on it" >&2; exit 0; }
out=$BUILD/bench/calibration-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
PY=/usr/bin/python3
make -s -j2 all >/dev/null
link() { # $1 build dir, $2 binary
    cc -O2 -std=c17 -D_GNU_SOURCE -Iinclude bench/backbone/calibration_cost.c "$1/libftl.a" -lturbojpeg -lpng -lprotobuf-c \
        -ldnnl -lgomp -lzstd -lsnappy -lz -lm -lpthread -L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi -ldl -o "$2"
}
link "$BUILD" "$out/after"
builds=after
if [ -n "$before" ]; then link "$before" "$out/before"; builds="before after"; fi
$PY -W ignore bench/backbone/export_models.py "$BUILD/bench" "$SHARED" >&2
max=$(tr , '\n' <<<"$counts" | sort -n | tail -1)
$PY - "$SHARED/data/hymenoptera" "$out/images.rgb" "$max" <<'PYEOF'
import os, sys
from PIL import Image
root, dst, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.lower().endswith((".jpg", ".jpeg", ".png")))
with open(dst, "wb") as out:
    for i in range(count):
        out.write(Image.open(files[i % len(files)]).convert("RGB").resize((224, 224), Image.BILINEAR).tobytes())
PYEOF
lscpu | grep -E "Model name|^CPU\(s\)" | tr -s ' ' >"$out/env.txt"
res=$out/results.jsonl
: >"$res"
for r in $(seq 1 "$rounds"); do
    order=$builds
    [ $((r % 2)) -eq 0 ] && order=$(tr ' ' '\n' <<<"$builds" | tac | tr '\n' ' ')
    for model in ${models//,/ }; do
        path=$BUILD/bench/$model.onnx scale=torch
        [ $model = mobilenet_v2 ] && path=$SHARED/models/mobilenet_v2_1.0_224_features.onnx scale=tf
        for count in ${counts//,/ }; do
            for b in $order; do
                OMP_NUM_THREADS=$threads "$out/$b" "$path" "$out/images.rgb" --size 224 --count "$count" --scale $scale \
                    --threads "$threads" --batch 32 |
                    sed "s/^{/{\"model\":\"$model\",\"build\":\"$b\",\"round\":$r,/" >>"$res"
            done
        done
    done
done
$PY - "$res" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| model | images | build | calibration ms/image | int8 pass ms/image | fp32 pass ms/image | calibration / int8 pass |")
print("|---|---|---|---|---|---|---|")
key = lambda r: (r["model"], r["count"], r["build"])
for k in dict.fromkeys(map(key, rows)):
    rs = [r for r in rows if key(r) == k]
    def cell(f, scale=1e3):
        xs = [f(r) * scale for r in rs]
        return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"
    print(f"| {k[0]} | {k[1]} | {k[2]} | {cell(lambda r: r['calibration_s_per_image'])} | {cell(lambda r: r['int8_s_per_image'])} | "
          f"{cell(lambda r: r['fp32_s_per_image'])} | {cell(lambda r: r['calibration_over_int8'], 1)}x |")
hashes = {}
for r in rows: hashes.setdefault((r["model"], r["count"]), set()).add(r["scales_hash"])
for k, h in hashes.items():
    print(f"scales {k[0]} {k[1]} images: " + ("identical in every run and build" if len(h) == 1 else f"DIFFER: {sorted(h)}"))
sys.exit(0 if all(len(h) == 1 for h in hashes.values()) else 1)
PYEOF
