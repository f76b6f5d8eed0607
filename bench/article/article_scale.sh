#!/usr/bin/env bash
# The article's full run at its scale ("How (Not) To Scale Deep Learning in 6 Easy Steps": Caltech-256,
# 30,607 images in 257 classes, Keras Xception at 299, frozen, a Dropout + Dense head), timed part by
# part on this machine's CPU, beside the article's figures for the same job (K80s: 96 min on one GPU,
# 12.6 min on 8 GPUs in one machine, 17 min on 8 machines; ../shared/DESIGN.md).
#
# The data: Caltech-256 is not here, so bench/article/make_images.py builds folders of its shape
# (001.c001 ... 256.c256, 257.clutter; 30,607 files by default) from the shared hymenoptera photos,
# each file a copy under its own name: time only, the accuracy means nothing (and the shared Xception
# has random weights). Copies, not links: ftl prep reads each real file (device + inode) once and
# refuses one reached under two classes. Kept in BUILD/bench-article/images-NxK and reused; at full
# scale that is about 3.5 GB of copies and 8.2 GB of Parquet (30,607 x 299 x 299 x 3 bytes).
#
# The steps, each timed:
#  1. ftl prep once: the article's scale_image at --size (thumbnail + white padding), its split
#     randomSplit([0.9, 0.1], seed=42) = --val-fraction 0.1 --seed 42 --no-stratify (a per-image
#     draw; ftl's default is stratified). ftl's own row groups (8 MiB) and codec (none), not the
#     article's 1 MiB snappy ones: docs/BENCHMARKS.md measured them faster.
#  2. per precision, ftl train with the article's head recipe, from a fresh feature cache:
#     --batch 16 --lr 0.004 (Nadam, step 3 of the article), --dropout 0.5, --epochs 30
#     --early-stopping monitor=val_acc,patience=3,min_delta=0.001 (step 2; ftl always restores the
#     best epoch, as restore_best_weights=True). ftl has no preset for it: its defaults already are
#     the article's optimizer (nadam, Keras semantics), batch 16, shuffle buffer 400, seed 42, input
#     scaling (tf: x/127.5 - 1) and restore-best, but not lr 0.004 (default 0.001, the article's
#     before step 3), dropout 0.5 (default 0) or early stopping (default none); all are passed here.
#     The parts read off ftl's log lines: int8 calibration ("int8: calibrated ... in X s"), the
#     feature pass over train and over val ("feature cache: N train images in X s"), the head (the
#     --log's epoch records: time_s, validation included); "other" is the rest of the wall time
#     (loading and compiling the backbone, the label checks, writing the model).
#  3. per precision, ftl eval on val, as a user runs it after training: it reuses val's cached
#     features (--eval-from-images: through the backbone again, from an empty cache).
# Prints the table (each part per precision, prep + train + eval end to end, the article's figures
# and article / ftl), the CPU model and the peaks of ftl inspect --profile, and the feature pass's
# hardware bound: the backbone's operations per image (from the same profile) x the images over each
# precision's peak, with the measured pass as a share of it (a target below the bound is out of reach on
# this CPU at any efficiency); writes
# BUILD/bench-article/results-NxK.json. Everything it writes is under BUILD.
# bf16 is skipped where the CPU lacks AVX-512 (ftl refuses it), int8 where it has no int8 dot products
# (VNNI or AMX; ftl refuses it): the script says so.
#
# usage: bench/article/article_scale.sh [--images N] [--classes K] [--precisions fp32,bf16,int8]
#        [--threads N] [--model PATH] [--size S] [--eval-from-images]
# (from anywhere; defaults: 30607 images, 257 classes, all three precisions, nproc threads, the shared
#  xception_random.onnx, 299; a small check: --images 600 --classes 7 --precisions int8)
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${SHARED:=$(cd .. && pwd)/shared}"
: "${BUILD:=$PWD/build}"
images=30607 classes=257 precisions=fp32,bf16,int8 threads=$(nproc) model= size=299 eval_from_images=0
while [ $# -gt 0 ]; do
    case $1 in
    --images) images=$2; shift 2 ;;
    --classes) classes=$2; shift 2 ;;
    --precisions) precisions=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --eval-from-images) eval_from_images=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
model=${model:-$SHARED/models/xception_random.onnx}
for v in "$images" "$classes" "$threads" "$size"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "--images, --classes, --threads and --size take positive integers, not '$v'" >&2; exit 2; }
done
[ "$classes" -ge 2 ] && [ "$images" -ge "$((classes * 10))" ] ||
    { echo "--images must be at least 10 per class (a 10% val split needs images in it): $images for $classes classes" >&2; exit 2; }
[ -f "$model" ] || { echo "no model at $model (--model PATH, or SHARED=DIR holding models/xception_random.onnx)" >&2; exit 2; }
photos=$SHARED/data/hymenoptera
[ -d "$photos" ] || { echo "no photos at $photos (SHARED=DIR holding data/hymenoptera)" >&2; exit 2; }
PY=/usr/bin/python3
FTL=$BUILD/ftl
if [ ! -x "$FTL" ]; then
    echo "$FTL is missing: building it (make -j2 BUILD=$BUILD $FTL)" >&2
    make -j2 BUILD="$BUILD" "$FTL" >&2 || { echo "could not build $FTL: run make in the repository root and look at the error above" >&2; exit 1; }
fi

# the precisions asked for that this CPU runs; the others skipped, saying why
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
run_precisions= skipped=
for p in ${precisions//,/ }; do
    case $p in
    fp32) run_precisions+=" fp32" ;;
    bf16)
        if grep -qw avx512f <<<"$flags"; then
            run_precisions+=" bf16"
            grep -qwE 'avx512_bf16|amx_bf16' <<<"$flags" ||
                echo "note: this CPU has no bf16 dot products (AVX512_BF16 or AMX): oneDNN emulates bf16, slower than fp32" >&2
        else
            echo "bf16 skipped: this CPU has no AVX-512 (oneDNN has no bf16 kernels below it; ftl refuses bf16)" >&2
            skipped+=" bf16"
        fi ;;
    int8)
        if grep -qwE 'avx512_vnni|avx_vnni|amx_int8' <<<"$flags"; then run_precisions+=" int8"; else
            echo "int8 skipped: this CPU has no int8 dot products (VNNI or AMX); ftl refuses int8 on it" >&2
            skipped+=" int8"
        fi ;;
    *) echo "--precisions takes fp32, bf16 and int8, not '$p'" >&2; exit 2 ;;
    esac
done

work=$BUILD/bench-article
tag=${images}x${classes}
run=$work/run-$tag
mkdir -p "$run"
results=$work/results-$tag.json
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
echo "CPU: ${cpu:-unknown}, $(nproc) cores; $threads threads; $images images in $classes classes at $size; backbone $(basename "$model")"

# the machine's peaks, as ftl's profiler measures them (int8 where the CPU runs it, else fp32)
peak_precision=fp32
if grep -qwE 'avx512_vnni|avx_vnni|amx_int8' <<<"$flags"; then peak_precision=int8; fi
if "$FTL" inspect "$model" --profile --precision "$peak_precision" --batch 32 --threads "$threads" --top 1 \
    >"$run/profile.txt" 2>&1; then
    grep -m1 '^peak' "$run/profile.txt" || echo "peak: (no peak line in ftl inspect --profile's output)"
else
    echo "peak: ftl inspect --profile failed (see $run/profile.txt)"
fi

# timed NAME CMD...: runs CMD, its stdout and stderr in $run/NAME.out and .err, its wall seconds in
# $run/NAME.wall, /usr/bin/time -v's report (peak RSS) in $run/NAME.timev; a failure ends the script
timed() {
    local name=$1 t0 t1 rc=0
    shift
    rm -f "$run/$name.timev"
    t0=$(date +%s.%N)
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -v -o "$run/$name.timev" "$@" >"$run/$name.out" 2>"$run/$name.err" || rc=$?
    else
        "$@" >"$run/$name.out" 2>"$run/$name.err" || rc=$?
    fi
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }' >"$run/$name.wall"
    if [ "$rc" != 0 ]; then
        echo "$name failed (exit $rc): $*" >&2
        tr '\r' '\n' <"$run/$name.err" | tail -20 >&2
        exit 1
    fi
}

# 1. the image folders (reused when complete), then ftl prep
"$PY" bench/article/make_images.py "$photos" "$work/images-$tag" "$images" "$classes"
data=$work/data-$tag-$size
echo "prep: $images images -> $data"
timed prep "$FTL" prep "$work/images-$tag" "$data" --size "$size" --val-fraction 0.1 --seed 42 --no-stratify \
    --threads "$threads" --overwrite
grep -m1 '^prep:' "$run/prep.out" "$run/prep.err" -h || true

# 2-3. per precision: train from a fresh feature cache, then eval on val
recipe=(--batch 16 --lr 0.004 --optimizer nadam --dropout 0.5 --epochs 30
        --early-stopping monitor=val_acc,patience=3,min_delta=0.001)
for p in $run_precisions; do
    d=$run/$p
    rm -rf "$d"
    mkdir -p "$d"
    echo "train $p: ${recipe[*]}"
    timed "train-$p" "$FTL" train "$data/train.parquet" --val "$data/val.parquet" --backbone "$model" --out "$d/model.ftl" \
        "${recipe[@]}" --precision "$p" --threads "$threads" --log "$d/run.jsonl"
    grep -h '^train:' "$run/train-$p.out" || true
    eval_cache=()
    if [ "$eval_from_images" = 1 ]; then mkdir -p "$d/empty-cache"; eval_cache=(--cache-dir "$d/empty-cache"); fi
    timed "eval-$p" "$FTL" eval "$d/model.ftl" "$data/val.parquet" "${eval_cache[@]}" --threads "$threads" \
        --json "$d/eval.json" --overwrite
    grep -h '^eval: [0-9]' "$run/eval-$p.out" || true
done

# the table and the JSON
"$PY" - "$run" "$results" "$images" "$classes" "$size" "$threads" "$(basename "$model")" "${cpu:-unknown}" \
    "$run_precisions" "$skipped" "$eval_from_images" <<'PYEOF'
import json, os, re, sys
run, results, n, k, size, threads, model, cpu, precisions, skipped, eval_images = sys.argv[1:12]
precisions, skipped = precisions.split(), skipped.split()
ARTICLE = [("1 K80 GPU", 96.0), ("8 K80 GPUs, one machine", 12.6), ("8 machines (K80s)", 17.0)]
ARTICLE_IMAGES = 30607


def text(name):
    out = []
    for ext in (".out", ".err"):
        try:
            out.append(open(os.path.join(run, name + ext), errors="replace").read().replace("\r", "\n"))
        except OSError:
            pass
    return "\n".join(out)


def wall(name):
    return float(open(os.path.join(run, name + ".wall")).read())


def rss_mib(name):
    try:
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(os.path.join(run, name + ".timev")).read())
        return round(int(m.group(1)) / 1024.0, 1) if m else None
    except OSError:
        return None


def num(pattern, s, default=None):
    m = re.search(pattern, s, re.M)
    return float(m.group(1)) if m else default


def total(pattern, s):  # every such line (one per cache part)
    return sum(float(x) for x in re.findall(pattern, s, re.M))


log = text("prep")
prep = {"wall_s": wall("prep"), "peak_rss_mib": rss_mib("prep"),
        "train_images": int(num(r"^prep: \d+ images \((\d+) train", log, 0)),
        "val_images": int(num(r"^prep: \d+ images \(\d+ train, (\d+) val", log, 0)),
        "in_command_s": num(r"^prep: \d+ images .* in ([0-9.]+) s", log),
        "skipped_files": int(num(r"skipped (\d+) files", log, 0))}
profile = open(os.path.join(run, "profile.txt"), errors="replace").read()
peak = next((l.strip() for l in profile.splitlines() if l.startswith("peak")), None)
# the hardware's bound on the feature pass: the backbone's operations per image (the profile ran a batch of
# 32) over each precision's peak as the profiler measured it, beside the measured pass
ops_per_image = num(r"^total .* ([0-9.]+) GFLOP per run", profile)
ops_per_image = ops_per_image / 32 if ops_per_image else None
peaks = {p: num(rf"\b{p} ([0-9.]+) G(?:FL)?OP/s", peak or "") for p in ("fp32", "bf16", "int8")}
runs = []
for p in precisions:
    log = text(f"train-{p}")
    epochs = [json.loads(l) for l in open(os.path.join(run, p, "run.jsonl")) if '"record":"epoch"' in l]
    r = {"precision": p, "train_s": wall(f"train-{p}"), "train_peak_rss_mib": rss_mib(f"train-{p}"),
         "calibration_s": num(r"^int8: calibrated .* in ([0-9.]+) s", log, 0.0),
         "features_train_s": total(r"^feature cache: \d+ train images in ([0-9.]+) s", log),
         "features_val_s": total(r"^feature cache: \d+ val images in ([0-9.]+) s", log),
         "features_train_images_per_s": num(r"^feature cache: \d+ train images in [0-9.]+ s \(([0-9.]+) images/s", log),
         "head_s": sum(e["time_s"] for e in epochs), "epochs": len(epochs),
         "best_epoch": int(num(r"best epoch (\d+)", log, 0)), "stopped_early": "stopped early" in log}
    r["other_s"] = max(0.0, r["train_s"] - r["calibration_s"] - r["features_train_s"] - r["features_val_s"] - r["head_s"])
    ev = json.load(open(os.path.join(run, p, "eval.json")))
    elog = text(f"eval-{p}")
    r.update(eval_s=wall(f"eval-{p}"), eval_peak_rss_mib=rss_mib(f"eval-{p}"), eval_reused_cache="only the head runs" in elog,
             val_acc=ev.get("top1"), val_top5=ev.get("top5"))
    r["end_to_end_s"] = prep["wall_s"] + r["train_s"] + r["eval_s"]
    images = prep["train_images"] + prep["val_images"]
    r["features_at_peak_s"] = (images * ops_per_image / peaks[p]) if ops_per_image and peaks.get(p) else None
    feature_s = r["features_train_s"] + r["features_val_s"]
    r["features_share_of_peak"] = r["features_at_peak_s"] / feature_s if r["features_at_peak_s"] and feature_s else None
    r["article_over_ftl"] = {name: round(minutes * 60 / r["end_to_end_s"], 2) for name, minutes in ARTICLE}
    runs.append(r)

doc = {"bench": "bench/article/article_scale.sh", "cpu": cpu, "cores": os.cpu_count(), "threads": int(threads),
       "peak": peak, "gop_per_image": ops_per_image, "model": model, "images": int(n), "classes": int(k), "size": int(size),
       "recipe": "--batch 16 --lr 0.004 --optimizer nadam --dropout 0.5 --epochs 30 "
                 "--early-stopping monitor=val_acc,patience=3,min_delta=0.001",
       "prep_split": "--val-fraction 0.1 --seed 42 --no-stratify", "eval_from_images": eval_images == "1",
       "skipped_precisions": skipped, "prep": prep, "runs": runs,
       "article": {"images": ARTICLE_IMAGES, "minutes": {name: m for name, m in ARTICLE}}}
tmp = results + ".tmp"
with open(tmp, "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
os.replace(tmp, results)


def sec(x):
    return "-" if x is None else (f"{x:.2f} s" if x < 10 else f"{x:.1f} s" if x < 600 else f"{x / 60:.1f} min")


print()
print(f"{n} images in {k} classes ({prep['train_images']} train, {prep['val_images']} val) at {size}, {model}, "
      f"{threads} threads on {cpu}")
if peak:
    print(peak)
w = 14
print(f"{'part':<34}" + "".join(f"{p:>{w}}" for p in precisions))
rows = [("prep (once)", lambda r: sec(prep["wall_s"])),
        ("train: int8 calibration", lambda r: sec(r["calibration_s"]) if r["precision"] == "int8" else "-"),
        ("train: features, train split", lambda r: sec(r["features_train_s"])),
        ("train: features, val split", lambda r: sec(r["features_val_s"])),
        ("train: head epochs (+ val)", lambda r: sec(r["head_s"])),
        ("train: other (load, checks)", lambda r: sec(r["other_s"])),
        ("train (wall)", lambda r: sec(r["train_s"])),
        ("eval on val (wall)" + ("" if eval_images == "1" else ", cached"), lambda r: sec(r["eval_s"])),
        ("END TO END (prep + train + eval)", lambda r: sec(r["end_to_end_s"])),
        ("features at the full peak (bound)", lambda r: sec(r["features_at_peak_s"])),
        ("features: share of the peak", lambda r: f"{100 * r['features_share_of_peak']:.1f}%" if r["features_share_of_peak"] else "-"),
        ("features, train: images/s", lambda r: f"{r['features_train_images_per_s']:.1f}" if r["features_train_images_per_s"] else "-"),
        ("epochs (best)", lambda r: f"{r['epochs']} ({r['best_epoch']})"),
        ("peak RSS, train", lambda r: f"{r['train_peak_rss_mib']:.0f} MiB" if r["train_peak_rss_mib"] else "-"),
        ("val top-1 (meaningless here)", lambda r: f"{r['val_acc']:.4f}" if r["val_acc"] is not None else "-")]
for label, f in rows:
    print(f"{label:<34}" + "".join(f"{f(r):>{w}}" for r in runs))
print()
print(f"{'the article (K80s, 30,607 images)':<34}{'article':>10}" + "".join(f"{'ftl ' + p:>{w}}{'article/ftl':>13}" for p in precisions))
for name, minutes in ARTICLE:
    print(f"{name:<34}{minutes:>6.1f} min" + "".join(f"{sec(r['end_to_end_s']):>{w}}{r['article_over_ftl'][name]:>12.1f}x" for r in runs))
if int(n) != ARTICLE_IMAGES:
    print(f"note: {n} images, not the article's {ARTICLE_IMAGES}: the ratios compare unequal work (run without --images for the real one)")
if skipped:
    print("skipped on this CPU: " + ", ".join(skipped))
print(f"wrote {results}")
PYEOF
