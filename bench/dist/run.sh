#!/usr/bin/env bash
# Strong scaling of what costs under mpirun, on this machine: allreduce of the head's gradient
# and of an Xception-sized buffer (np 2 and 4, shared memory), then `ftl prep` and `ftl embed`
# images/s at np 1 and np 2 with one thread per rank (ranks bound to cores) on hymenoptera x 4
# (1588 photos), and a whole `ftl train` np 1 x 2 threads vs np 2 x 1 thread; 3 runs each, medians.
# usage: bench/dist/run.sh [BUILD] [SHARED]
set -u
BUILD=${1:-build}
SHARED=$(cd "${2:-../shared}" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
out=$BUILD/bench-dist
rm -rf "$out"; mkdir -p "$out"
[ "${SKIP_ALLREDUCE:-0}" = 1 ] || for n in 2 4; do mpirun --oversubscribe -np $n "$BUILD/bench/dist/allreduce_bench" 10; done
MODEL="$SHARED/models/mobilenet_v1_1.0_224_embedding.onnx"
"$BUILD/ftl" prep "$SHARED/data/hymenoptera" "$out/ds" --size 224 --quiet 2>/dev/null
# A 4x larger set for prep and embed (each photo copied 4 times under another name: prep reads a
# file that links lead to once), so that what
# does not split (start-up, loading the backbone) is a small share, as on a real data set.
for split in train val; do
    for c in ants bees; do
        mkdir -p "$out/big/$c"
        for f in "$SHARED/data/hymenoptera/$split/$c"/*; do
            for k in 1 2 3 4; do cp --reflink=auto "$f" "$out/big/$c/$k-$(basename "$f")"; done
        done
    done
done
"$BUILD/ftl" prep "$out/big" "$out/bigds" --size 224 --val-fraction 0 --quiet 2>/dev/null
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for n in 1 2; do
    for what in prep embed; do
        for r in 1 2 3; do
            rm -rf "$out/p$n" "$out/e$n.parquet"
            s=$(date +%s.%N)
            if [ $what = prep ]; then
                mpirun --bind-to core -np $n "$BUILD/ftl" prep "$out/big" "$out/p$n" --size 224 --val-fraction 0 --threads 1 2>/dev/null
            else
                mpirun --bind-to core -np $n "$BUILD/ftl" embed "$out/bigds/train.parquet" --backbone "$MODEL" "$out/e$n.parquet" --threads 1 2>/dev/null
            fi >"$out/last.out"
            e=$(date +%s.%N)
            echo "$e - $s" | bc
            # the command's own images/s (without the launcher's start and stop)
            grep -o '[0-9.]* images/s' "$out/last.out" | head -1 | cut -d' ' -f1 >>"$out/$what-np$n.rate"
        done | median >"$out/$what-np$n.s"
        echo "$what np $n: median $(cat "$out/$what-np$n.s") s (whole mpirun command); in-command median $(median <"$out/$what-np$n.rate") images/s"
    done
done
# A whole `ftl train` (feature cache built from scratch each run, then 10 epochs): np 1 x 2 threads
# vs np 2 x 1 thread on the same 2 cores.
for cfg in "1 2" "2 1"; do
    set -- $cfg
    for r in 1 2 3; do
        rm -rf "$out/tc" "$out/t.ftl"
        s=$(date +%s.%N)
        bind=core; [ "$1" = 1 ] && bind=none  # one rank may use both cores
        mpirun --bind-to $bind -np $1 "$BUILD/ftl" train "$out/ds/train.parquet" --val "$out/ds/val.parquet" \
            --backbone "$MODEL" --batch $((32 / $1)) --epochs 10 --threads $2 --cache-dir "$out/tc" --out "$out/t.ftl" --quiet \
            >/dev/null 2>&1
        e=$(date +%s.%N)
        echo "$e - $s" | bc
    done | median >"$out/train-np$1.s"
    echo "train np $1 x $2 threads: median $(cat "$out/train-np$1.s") s"
done
for what in prep embed; do
    echo "$what np2/np1 in-command images/s: $(echo "scale=3; $(median <"$out/$what-np2.rate") / $(median <"$out/$what-np1.rate")" | bc)x"
done
for what in prep embed train; do
    echo "$what np2/np1 speedup: $(echo "scale=3; $(cat "$out/$what-np1.s") / $(cat "$out/$what-np2.s")" | bc)x"
done
