#!/usr/bin/env bash
# `import ftl` (python/): the package built by `make python`, its tests under pytest against the CLI
# (the same job run by `ftl prep/train/embed/eval/export`) and independent references
# (tests/python/test_ftl.py). This script makes the CLI's side; DuckDB reads the Parquet files.
source "$(dirname "$0")/lib.sh"
d=$(scratch python)
TESTS="$(cd "$(dirname "$0")/../python" && pwd)/test_ftl.py"
TOOLS="$(cd "$(dirname "$0")/../tools" && pwd)"
if ! "$PY" -c 'import pytest' 2>/dev/null; then
    skip python_package "pytest is not installed (scripts/install_deps.sh test installs python3-pytest)"
    finish
fi
if ! ls "$BUILD"/python/ftl/_ftl*.so >/dev/null 2>&1; then
    fail python_package_built "no $BUILD/python/ftl/_ftl*.so: make python"
    finish
fi
MODEL="$SHARED/models/mobilenet_v1_0.25_128.onnx"  # small and fast
SRC="$SHARED/data/hymenoptera"
# The options the Python test passes as keywords: dropout, early stopping, sgd with momentum.
TRAIN_FLAGS=(--epochs 4 --batch 8 --optimizer sgd --lr 0.01 --momentum 0.9 --dropout 0.25
    --early-stopping monitor=val_loss,patience=2)
"$FTL" prep "$SRC" "$d/ds" --size 128 --quiet 2>/dev/null || fail python_prep "ftl prep failed"
"$FTL" train "$d/ds/train.parquet" --val "$d/ds/val.parquet" --backbone "$MODEL" "${TRAIN_FLAGS[@]}" \
    --out "$d/cli/model.ftl" --log "$d/cli/run.jsonl" --quiet >/dev/null 2>&1 || fail python_train "ftl train failed"
"$FTL" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/val-features.parquet" --quiet >/dev/null 2>&1 ||
    fail python_embed "ftl embed failed"
"$FTL" eval "$d/cli/model.ftl" "$d/ds/val.parquet" --json "$d/eval.json" --quiet >/dev/null 2>&1 ||
    fail python_eval "ftl eval failed"
"$FTL" export "$d/cli/model.ftl" "$d/cli.onnx" --quiet >/dev/null 2>&1 || fail python_export "ftl export failed"
# DuckDB's reading of the val images and of ftl embed's features (absent: those tests skip)
if [ -d "$INTEROP_NODE_DIR/node_modules" ]; then
    node "$TOOLS/dataset_images_npy.mjs" "$d/ds/val.parquet" "$d/val-images.npy" >"$d/val-rows.json" 2>"$d/duckdb.err" &&
        node "$TOOLS/dataset_images_npy.mjs" "$d/val-features.parquet" "$d/val-features.npy" features >/dev/null \
            2>>"$d/duckdb.err" || fail python_duckdb "$(tail -3 "$d/duckdb.err")"
fi
out=$(cd "$d" && FTL="$FTL" FTL_PY_MODEL="$d/cli/model.ftl" FTL_PY_BACKBONE="$MODEL" FTL_PY_SCRATCH="$d" \
    FTL_PY_SOURCE="$SRC" FTL_PY_TRAIN_FLAGS="${TRAIN_FLAGS[*]}" PYTHONPATH="$BUILD/python" \
    "$PY" -m pytest -q -p no:cacheprovider "$TESTS" -rA 2>&1)
echo "$out"
# one line per pytest test, as this runner counts them
while read -r status name reason; do
    case "$status" in
    PASSED) pass "python_${name##*::}" ;;
    FAILED | ERROR) fail "python_${name##*::}" "see the pytest output in the log" ;;
    SKIPPED) # "SKIPPED [1] .../test_ftl.py:LINE: reason"
        loc=$(grep -oE 'test_ftl.py:[0-9]+' <<<"$reason")
        skip "python_${loc:-skipped}" "${reason#*: }" ;;
    esac
done < <(grep -E '^(PASSED|FAILED|ERROR|SKIPPED) ' <<<"$out" | sed -E 's/ - (.*)/ \1/')
grep -q -E '^(PASSED|FAILED|ERROR) ' <<<"$out" || fail python_tests_ran "$(tail -5 <<<"$out")"

# mpirun -np 2 python3: the same call runs data-parallel, giving `mpirun -np 2 ftl train`'s model, byte for byte
if ! "$FTL" --version | grep -q 'Open MPI'; then
    skip python_mpirun_np2_equals_the_cli "this ftl was built without MPI"
else
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    MPI=(mpirun --oversubscribe --bind-to none -np 2)
    "${MPI[@]}" "$FTL" train "$d/ds/train.parquet" --val "$d/ds/val.parquet" --backbone "$MODEL" --epochs 3 --batch 16 \
        --cache-dir "$d/mpi-cli-cache" --out "$d/mpi-cli.ftl" --quiet >/dev/null 2>"$d/mpi-cli.err"
    "${MPI[@]}" env PYTHONPATH="$BUILD/python" "$PY" -c '
import sys, ftl
h = ftl.train(sys.argv[1], val=sys.argv[2], backbone=sys.argv[3], out=sys.argv[4], epochs=3, batch=16,
              cache_dir=sys.argv[5], verbose=0)
print("rank %d of %d: %d epochs" % (ftl.rank, ftl.world_size, len(h.epochs)))
' "$d/ds/train.parquet" "$d/ds/val.parquet" "$MODEL" "$d/mpi-py.ftl" "$d/mpi-py-cache" >"$d/mpi-py.out" 2>"$d/mpi-py.err"
    if cmp -s "$d/mpi-cli.ftl" "$d/mpi-py.ftl" && grep -q "rank 1 of 2: 3 epochs" "$d/mpi-py.out"; then
        pass python_mpirun_np2_equals_the_cli
    else
        fail python_mpirun_np2_equals_the_cli "$(cat "$d/mpi-py.out"; tail -3 "$d/mpi-py.err" "$d/mpi-cli.err")"
    fi
fi
finish
