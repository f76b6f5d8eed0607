#!/usr/bin/env bash
# ftl prep core (bench_image.c) against the Pillow recipe (pillow_recipe.py) on the same JPEGs,
# interleaved round by round (the machine is shared: medians of ROUNDS rounds, ratio of medians).
#   bench/image/run.sh [DATA_DIR]      env: BUILD (build), ROUNDS (7), THREADS ("1 2"), SIZE (299)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SHARED=${SHARED:-$(cd .. && pwd)/shared}
DATA=${1:-$SHARED/data/hymenoptera}
ROUNDS=${ROUNDS:-7}
THREADS=${THREADS:-1 2}
SIZE=${SIZE:-299}
PY=/usr/bin/python3
make -s -j2 "$BUILD/libftl.a"
cc -O2 -g -std=c17 -Wall -Wextra -Werror -Iinclude -Isrc -D_GNU_SOURCE -pthread \
   -o "$BUILD/bench_image" bench/image/bench_image.c "$BUILD/libftl.a" -lturbojpeg -lpng -lz -lm -lpthread
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$BUILD/bench_image" "$DATA" --size "$SIZE" --split >>"$out"
$PY bench/image/pillow_recipe.py "$DATA" --size "$SIZE" --split >>"$out"
for r in $(seq "$ROUNDS"); do
    for t in $THREADS; do
        "$BUILD/bench_image" "$DATA" --size "$SIZE" --passes 1 --threads "$t" >>"$out"
        "$BUILD/bench_image" "$DATA" --size "$SIZE" --passes 1 --threads "$t" --dct | sed 's/ftl_prep/ftl_prep_dct/' >>"$out"
        $PY bench/image/pillow_recipe.py "$DATA" --size "$SIZE" --passes 1 --procs "$t" >>"$out"
    done
done
$PY - "$out" <<'PYEOF'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for r in recs:
    if r["bench"].endswith("split"):
        print(json.dumps(r))
def table(key, label):
    rates = {}
    for r in recs:
        if not r["bench"].endswith("split"):
            rates.setdefault((r["bench"], r["threads"]), []).append(r[key])
    print(f"-- {label}")
    for (b, t), v in sorted(rates.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"{b:14s} threads={t}: median {statistics.median(v):7.1f}  (min {min(v):.1f}, max {max(v):.1f}, n={len(v)})")
    # Rounds run ftl and Pillow back to back, so per-round ratios cancel slow drifts of the machine.
    for t in sorted({k[1] for k in rates}):
        p = rates[("pillow_prep", t)]
        for b in ("ftl_prep", "ftl_prep_dct"):
            if (b, t) in rates:
                per_round = [f / q for f, q in zip(rates[(b, t)], p)]
                print(f"ratio {b}/pillow at {t} thread(s): {statistics.median(rates[(b, t)]) / statistics.median(p):.2f}x "
                      f"(ratio of medians), {statistics.median(per_round):.2f}x (median of per-round ratios, "
                      f"range {min(per_round):.2f}-{max(per_round):.2f})")
table("images_per_s", "images per wall-clock second")
table("images_per_cpu_s", "images per CPU second (per core; robust to other load on the machine)")
PYEOF
