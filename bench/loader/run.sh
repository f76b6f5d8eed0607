#!/usr/bin/env bash
# bench/loader: throughput of the streaming loader (rows/s, MB/s of image bytes, consumer wait)
# with 1 and 2 reader threads, codec none and snappy, from the source file (OS page cache warm,
# and cold when run as root: caches dropped), and through the local-disk cache (cold: first
# epoch fills it; warm: later epochs hit it). The dataset is hymenoptera's train photos copied
# 12 times (2,928 images of 299x299, ~785 MB; copies, as prep refuses one folder under two
# classes). Usage: bench/loader/run.sh   (env SHARED, BUILD)
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${SHARED:=$(cd .. && pwd)/shared}" "${BUILD:=$PWD/build}"
make -s "$BUILD/bench/loader/bench_loader" >/dev/null
B="$BUILD/bench/loader/bench_loader"
w="$BUILD/bench-loader"
mkdir -p "$w/src"
for i in $(seq -w 1 12); do
    for c in ants bees; do
        dst="$w/src/${c:0:1}$i"
        [ -d "$dst" ] && [ ! -L "$dst" ] || { rm -f "$dst"; cp -r --reflink=auto "$SHARED/data/hymenoptera/train/$c" "$dst"; chmod -R u+w "$dst"; }
    done
done
for codec in none snappy; do
    [ -f "$w/ds_$codec/train.parquet" ] ||
        "$BUILD/ftl" prep "$w/src" "$w/ds_$codec" --val-fraction 0 --codec "$codec" --quiet --overwrite 2>/dev/null
done
drop_caches() { sync; [ "$(id -u)" = 0 ] && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }
echo "codec   threads  source                 rows/s     MB/s   wait%  cache hits/misses"
for codec in none snappy; do
    for t in 1 2; do
        f="$w/ds_$codec/train.parquet"
        drop_caches
        cold=$("$B" "$f" --threads "$t" --epochs 1 | tail -1)
        warm=$("$B" "$f" --threads "$t" --epochs 3 | tail -1)
        rm -rf "$w/cache"
        drop_caches
        filled=$("$B" "$f" --threads "$t" --epochs 3 --cache-dir "$w/cache")
        for row in "disk (caches dropped)|$cold" "page cache|$warm" "disk cache, 1st epoch|$(sed -n 1p <<<"$filled")" \
                   "disk cache, 3rd epoch|$(sed -n 3p <<<"$filled")"; do
            /usr/bin/python3 -c "import json,sys; n,r=sys.argv[1].split('|',1); r=json.loads(r); print(f\"{sys.argv[2]:7} {sys.argv[3]:>7}  {n:22} {r['rows_per_s']:8.0f} {r['MB_per_s']:8.0f} {100*r['wait_fraction']:6.1f}  {r['cache_hits']}/{r['cache_misses']}\")" "$row" "$codec" "$t"
        done
    done
done
