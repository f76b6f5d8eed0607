#!/usr/bin/env bash
# Features before and after a change that must not change them (issue 49: src/nn moved into layers and
# split): the hymenoptera val photos embedded with the six benchmark backbones of
# bench/backbone/efficiency.sh by two builds of ftl, the feature files compared byte for byte, and the
# embed rate of each build at batch 16, paired round by round (before and after alternate which runs
# first, so the shared machine's drift hits both alike). fp32 always; bf16 only where this CPU has
# oneDNN's bf16 kernels (AVX-512) and int8 only where it has int8 dot products (VNNI or AMX): elsewhere
# ftl refuses them or runs an emulation nobody uses, and the script says it skipped them.
# The "before" build: `git worktree add --detach DIR BASE && make -C DIR build/ftl`.
# usage: bench/nn/features_identical.sh --before BUILD_DIR [--after BUILD_DIR] [--rounds R]
#        [--threads N] [--models LIST] [--precisions fp32,bf16,int8] [--out DIR]
# Prints one JSON line per model, precision and round, then a summary line per model and precision;
# exits 1 when any pair of feature files differs.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${SHARED:=$(cd .. && pwd)/shared}"
: "${BUILD:=$PWD/build}"
models=vit_b_16,swin_t,convnext_tiny,mobilenet_v2,xception,resnet50 rounds=3 threads=$(nproc) before= after=$BUILD out= only=fp32,bf16,int8
while [ $# -gt 0 ]; do
    case $1 in
    --before) before=$2; shift 2 ;;
    --after) after=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --precisions) only=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[ -x "$before/ftl" ] && [ -x "$after/ftl" ] || { echo "usage: $0 --before BUILD_DIR [--after BUILD_DIR] (each with ftl built)" >&2; exit 2; }
out=${out:-$BUILD/bench-features-identical}
mkdir -p "$out" "$BUILD/bench" "$BUILD/bench-transformers"
PY=/usr/bin/python3

# the backbones, exported as efficiency.sh exports them (kept when already there)
$PY -W ignore bench/backbone/export_models.py "$BUILD/bench" "$SHARED" >&2
$PY -W ignore bench/transformers/torch_peer.py "$BUILD/bench-transformers" --models vit_b_16,swin_t,convnext_tiny \
    --export-only >&2
model_path() {
    case $1 in
    xception) echo "$SHARED/models/xception_random.onnx" ;;
    vit_b_16 | swin_t | convnext_tiny) echo "$BUILD/bench-transformers/$1.onnx" ;;
    *) echo "$BUILD/bench/$1.onnx" ;;
    esac
}
# Xception is the Keras one (tf scaling), the others torchvision's
input_scale() { [ "$1" = xception ] && echo tf || echo torch; }

# one dataset for both builds: the val split of the shared photos, prepped at 299 like the article's
if [ ! -s "$out/data/val.parquet" ]; then
    rm -rf "$out/data"
    "$after/ftl" prep "$SHARED/data/hymenoptera" "$out/data" --size 299 --quiet
fi

flags=$(grep -m1 '^flags' /proc/cpuinfo)
precisions=fp32
if grep -qw avx512f <<<"$flags"; then precisions="$precisions bf16"; else
    echo "bf16 skipped: this CPU has no AVX-512 (oneDNN has no bf16 kernels below it)" >&2; fi
if grep -qwE 'avx512_vnni|avx_vnni|amx_int8' <<<"$flags"; then precisions="$precisions int8"; else
    echo "int8 skipped: this CPU has no int8 dot products (VNNI or AMX); ftl refuses int8 on it" >&2; fi
precisions=$(for p in $precisions; do [[ ",$only," == *",$p,"* ]] && echo "$p"; done | tr '\n' ' ')

embed() {  # embed SIDE BUILD_DIR MODEL PRECISION: prints the images/s of the embed line
    local side=$1 dir=$2 m=$3 p=$4 line
    line=$("$dir/ftl" embed "$out/data/val.parquet" --backbone "$(model_path "$m")" "$out/$side-$m-$p.parquet" \
        --overwrite --batch 16 --threads "$threads" --precision "$p" --input-scale "$(input_scale "$m")" 2>&1 |
        grep '^embed: [0-9]* images ->')  # the summary, not the progress lines
    sed -E 's/.*\(([0-9.]+) images\/s\).*/\1/' <<<"$line"
}

res="$out/results.jsonl"
: >"$res"
differ=0
for r in $(seq 1 "$rounds"); do
    for m in ${models//,/ }; do
        for p in $precisions; do
            if [ $((r % 2)) = 1 ]; then
                rb=$(embed before "$before" "$m" "$p"); ra=$(embed after "$after" "$m" "$p")
            else
                ra=$(embed after "$after" "$m" "$p"); rb=$(embed before "$before" "$m" "$p")
            fi
            same=true
            cmp -s "$out/before-$m-$p.parquet" "$out/after-$m-$p.parquet" || { same=false; differ=1; }
            echo "{\"round\":$r,\"model\":\"$m\",\"precision\":\"$p\",\"batch\":16,\"threads\":$threads,\"identical\":$same,\"before_images_per_s\":$rb,\"after_images_per_s\":$ra}" |
                tee -a "$res"
        done
    done
done
$PY - "$res" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for key in dict.fromkeys((r["model"], r["precision"]) for r in rows):
    rs = [r for r in rows if (r["model"], r["precision"]) == key]
    b = statistics.median(r["before_images_per_s"] for r in rs)
    a = statistics.median(r["after_images_per_s"] for r in rs)
    ratio = statistics.median(r["after_images_per_s"] / r["before_images_per_s"] for r in rs)
    print(f"{key[0]:14s} {key[1]:5s} identical={all(r['identical'] for r in rs)!s:5s} "
          f"before {b:7.1f} img/s  after {a:7.1f} img/s  after/before (median of pairs) {ratio:.3f}  rounds {len(rs)}")
EOF
exit $differ
