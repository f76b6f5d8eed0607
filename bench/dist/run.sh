#!/usr/bin/env bash
# Strong scaling of what costs under mpirun, on this machine: allreduce of the head's gradient
# and of an Xception-sized buffer (np 2 and 4, shared memory), then `ftl prep` and `ftl embed`
# images/s at np 1 and np 2 with one thread per rank (ranks bound to cores), 3 runs each, medians.
# usage: bench/dist/run.sh [BUILD] [SHARED]
set -u
BUILD=${1:-build}
SHARED=${2:-../shared}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
out=$BUILD/bench-dist
rm -rf "$out"; mkdir -p "$out"
[ "${SKIP_ALLREDUCE:-0}" = 1 ] || for n in 2 4; do mpirun --oversubscribe -np $n "$BUILD/bench/dist/allreduce_bench" 10; done
MODEL="$SHARED/models/mobilenet_v1_1.0_224_embedding.onnx"
"$BUILD/ftl" prep "$SHARED/data/hymenoptera" "$out/ds" --size 224 --quiet 2>/dev/null
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for n in 1 2; do
    for what in prep embed; do
        for r in 1 2 3; do
            rm -rf "$out/p$n" "$out/e$n.parquet"
            s=$(date +%s.%N)
            if [ $what = prep ]; then
                mpirun --bind-to core -np $n "$BUILD/ftl" prep "$SHARED/data/hymenoptera" "$out/p$n" --size 224 --threads 1 --quiet 2>/dev/null
            else
                mpirun --bind-to core -np $n "$BUILD/ftl" embed "$out/ds/train.parquet" --backbone "$MODEL" "$out/e$n.parquet" --threads 1 --quiet 2>/dev/null
            fi
            e=$(date +%s.%N)
            echo "$e - $s" | bc
        done | median >"$out/$what-np$n.s"
        echo "$what np $n: median $(cat "$out/$what-np$n.s") s"
    done
done
for what in prep embed; do
    echo "$what np2/np1 speedup: $(echo "scale=3; $(cat "$out/$what-np1.s") / $(cat "$out/$what-np2.s")" | bc)x"
done
