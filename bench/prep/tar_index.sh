#!/usr/bin/env bash
# The tar index on a 10k-member WebDataset shard (5000 samples of KEY.jpg + KEY.cls, GNU and pax
# formats), beside GNU tar's and Python tarfile's listings of the same shard as peers (both seek
# over the data too). usage: bench/prep/tar_index.sh [extra tar_index_bench options]
set -eu
cd "$(dirname "$0")/../.."
make -s -j2 build/bench/prep/tar_index_bench
out=build/bench-tmp/tar
for format in gnu pax; do
    build/bench/prep/tar_index_bench --format "$format" --out "$out" "$@"
    shard=$(ls "$out"/shard-"$format"-*.tar | head -1)
    /usr/bin/python3 - "$shard" <<'PYEOF'
import statistics, subprocess, sys, tarfile, time
shard = sys.argv[1]
def timed(fn, runs=5):
    fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    return statistics.median(ts)
gnu = timed(lambda: subprocess.run(["tar", "-tf", shard], check=True, stdout=subprocess.DEVNULL))
py = timed(lambda: tarfile.open(shard).getmembers())
print("peers: GNU tar -tf %.2f ms (the process included); Python tarfile getmembers %.2f ms" % (1e3 * gnu, 1e3 * py))
PYEOF
done
