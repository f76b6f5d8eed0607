#!/usr/bin/env bash
# The CUDA backend without a GPU. (1) The errors a user sees where CUDA cannot run: no driver, the
# toolkit's stub driver, no cuDNN, no GPU, a GPU older than the build, a build without CUDA, tf32 on
# the CPU. (2) The GPU code path on the emulated device (tests/cuda_emu: the real plan, views,
# memory reuse and ftl's own kernel source run on the CPU, reference cuDNN convolution and cuBLAS
# GEMM): every per-op case vs ONNX Runtime, one model per torchvision family vs PyTorch, the shared
# models' uint8 input scaled on the device vs the CPU backend, `ftl embed/train/eval --device cuda`
# end to end, the device in metadata and cache keys, out-of-memory errors. What only a real GPU
# can show (cuDNN's and cuBLAS's own results, TF32, speed, NCCL) is tests/gpu/run.sh's.
source "$(dirname "$0")/lib.sh"
d=$(scratch cuda)
DUCK="node $(dirname "$0")/../tools/duckdb_query.mjs"
MODEL="$SHARED/models/mobilenet_v1_0.25_128.onnx"
EMU="$BUILD/cuda-emu/libftl_cuda_emu.so"

"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --size 128 --quiet 2>/dev/null || fail cuda_prep "prep failed"

# ---- without CUDA ----
expect_error cuda_nocuda_build 1 'built without CUDA' "$BUILD/ftl_nocuda" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/x.parquet" --device cuda --quiet
expect_error cuda_bad_device_name 2 "--device 'tpu': expected cpu, cuda or auto" "$FTL" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/x.parquet" --device tpu
expect_error cuda_tf32_on_cpu 2 'tf32: TensorFloat-32 is a GPU tensor-core mode.*use fp32 or bf16' "$FTL_SAN" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/x.parquet" --device cpu --precision tf32 --quiet
[ ! -e "$d/x.parquet" ] && pass cuda_failed_runs_write_nothing || fail cuda_failed_runs_write_nothing "x.parquet written"

if [ ! -e "$EMU" ]; then
    skip cuda_backend "this build has no CUDA backend (nvcc was not found when it was built)"
    finish
fi

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    skip cuda_no_driver_errors "this machine has an NVIDIA driver and GPU (tests/gpu/run.sh tests it)"
else
    expect_error cuda_no_driver 1 '--device cuda: no NVIDIA driver: libcuda.so.1 could not be loaded' "$FTL_SAN" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/x.parquet" --device cuda --quiet
    # auto falls back to the CPU and says where the features came from
    if "$FTL" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/cpu.parquet" --quiet 2>"$d/auto.err" &&
        $DUCK "SELECT decode(value) AS v FROM parquet_kv_metadata('$d/cpu.parquet') WHERE decode(key) = 'ftl.device'" | grep -q '"v":"cpu: '; then
        pass cuda_auto_falls_back_to_cpu
    else
        fail cuda_auto_falls_back_to_cpu "$(cat "$d/auto.err")"
    fi
fi
NVCC_DIR=$(dirname "$(readlink -f "$(command -v nvcc 2>/dev/null || echo /nonexistent/bin/nvcc)")")
STUB=$(ls "$NVCC_DIR"/../lib*/stubs/libcuda.so "$NVCC_DIR"/../targets/*/lib/stubs/libcuda.so 2>/dev/null | head -1)
if [ -n "$STUB" ]; then
    expect_error cuda_stub_driver 1 "no NVIDIA driver: .*libcuda.so is the CUDA toolkit's stub library" env FTL_CUDA_DRIVER_LIBRARY="$STUB" "$FTL_SAN" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/x.parquet" --device cuda --quiet
    expect_error cuda_no_cudnn 1 'no cuDNN 9: libcudnn_missing.so.9 could not be loaded.*LD_LIBRARY_PATH' env FTL_CUDA_DRIVER_LIBRARY="$STUB" FTL_CUDNN_LIBRARY=libcudnn_missing.so.9 "$FTL_SAN" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/x.parquet" --device cuda --quiet
else
    skip cuda_stub_driver "the CUDA toolkit's stub libcuda.so was not found next to nvcc"
fi

# ---- the emulated GPU ----
export FTL_CUDA_DRIVER_LIBRARY="$EMU" FTL_CUDNN_LIBRARY="$EMU" FTL_CUBLAS_LIBRARY="$EMU" FTL_NVML_LIBRARY="$EMU" FTL_NCCL_LIBRARY="$EMU"
expect_error cuda_no_gpu 1 '--device cuda: no GPU: the NVIDIA driver sees no CUDA device' env FTL_EMU_DEVICES=0 "$FTL_SAN" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/x.parquet" --device cuda --quiet
expect_error cuda_old_gpu 1 'GPU 0 \(ftl emulated GPU\) has compute capability 6.1; this build has code for sm_75' env FTL_EMU_SM=61 "$FTL_SAN" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/x.parquet" --device cuda --quiet
expect_error cuda_out_of_memory 1 'GPU out of memory at batch 64: .* try --batch [0-9]+' env FTL_EMU_GPU_MEMORY=20000000 "$FTL_SAN" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/x.parquet" --device cuda --batch 64 --quiet
[ ! -e "$d/x.parquet" ] && pass cuda_failed_gpu_runs_write_nothing || fail cuda_failed_gpu_runs_write_nothing "x.parquet written"

CHECK="$BUILD/tools/ftl_cuda_check"
"$CHECK" ops "$BUILD/ref/nn/ops" || true
# The families whose emulation is quick (the reference convolution is a plain loop) cover every op
# kind between them; FTL_TEST_CUDA_FAMILIES=all runs the other eight too (about 6 more minutes here).
QUICK=" alexnet convnext densenet efficientnet_v2 mnasnet mobilenet_v2 mobilenet_v3 regnet shufflenet_v2 squeezenet vit "
ls "$BUILD"/ref/nn/families/*.in.npy >/dev/null 2>&1 || fail cuda_families "no family references: run tests/ref/gen_nn.sh"
for fam in "$BUILD"/ref/nn/families/*.in.npy; do
    [ -e "$fam" ] || continue
    name=$(basename "$fam" .in.npy)
    case "$QUICK" in
    *" $name "*) echo "${fam%.in.npy}" ;;
    *) [ "${FTL_TEST_CUDA_FAMILIES:-}" = all ] && echo "${fam%.in.npy}" ||
        skip "cuda family-$name" "emulated only with FTL_TEST_CUDA_FAMILIES=all (slow here); its ops are in the quick families" >&2 ;;
    esac
done 2>&1 >"$d/families.txt" | cat
xargs -P 2 -n 1 "$CHECK" family <"$d/families.txt" || true
"$CHECK" model "$SHARED/models/mobilenet_v1_0.25_128.onnx" 5 128 || true
"$CHECK" model "$SHARED/models/mobilenet_v2_1.0_224_features.onnx" 3 224 || true
# FTL_CUDA_GRAPHS=1 on a driver that refuses to capture: the steps run one by one, same numbers
FTL_CUDA_GRAPHS=1 FTL_EMU_NO_GRAPHS=1 "$CHECK" model "$SHARED/models/mobilenet_v1_0.25_128.onnx" 5 128 || true
# a cuDNN with no NHWC algorithm for a convolution: it runs NCHW instead, same numbers
FTL_EMU_NO_NHWC=1 "$CHECK" ops "$BUILD/ref/nn/ops" || true
FTL_EMU_NO_NHWC=1 "$CHECK" model "$SHARED/models/mobilenet_v1_0.25_128.onnx" 5 128 || true

# The CLI on the emulated GPU: the same features as the CPU, the device recorded, its own cache key.
"$FTL" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/cpu.parquet" --device cpu --quiet --overwrite 2>/dev/null
if "$FTL_SAN" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/gpu.parquet" --device cuda --batch 32 >"$d/gpu.out" 2>"$d/gpu.err"; then
    pass cuda_emulated_embed_runs
else
    fail cuda_emulated_embed_runs "$(tail -5 "$d/gpu.err")"
fi
# NVML's figures (the emulated GPU reports 42% busy) in the summary
grep -q 'GPU 42% busy, [0-9.]* GiB in use' "$d/gpu.out" && pass cuda_embed_reports_gpu_use || fail cuda_embed_reports_gpu_use "$(cat "$d/gpu.out")"
# 153 rows at batch 32: four full batches pipelined (each copied while the one before computed), the last run at once
grep -q '4 of 5 batches copied to it while the one before computed' "$d/gpu.out" && pass cuda_embed_pipelines_batches ||
    fail cuda_embed_pipelines_batches "$(cat "$d/gpu.out")"
# same_features NAME A.parquet B.parquet: all 153 rows' features equal within 1e-4 of the largest
same_features() {
    local name=$1 a=$2 b=$3
    $DUCK "SELECT file_row_number AS i, hex(features) AS f FROM read_parquet('$a', file_row_number=true) ORDER BY i" >"$a.json"
    $DUCK "SELECT file_row_number AS i, hex(features) AS f FROM read_parquet('$b', file_row_number=true) ORDER BY i" >"$b.json"
    $PY - "$a.json" "$b.json" <<'PYEOF' && pass "$name" || fail "$name" "see log"
import json, sys
import numpy as np
a = [np.frombuffer(bytes.fromhex(r["f"]), "<f4") for r in json.load(open(sys.argv[1]))]
b = [np.frombuffer(bytes.fromhex(r["f"]), "<f4") for r in json.load(open(sys.argv[2]))]
assert len(a) == len(b) == 153, (len(a), len(b))
diff = max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))
scale = max(float(np.max(np.abs(x))) for x in a)
print(f"153 rows: max |gpu - cpu| {diff:.3g} (features up to {scale:.3g})")
assert diff <= 1e-4 * max(1.0, scale)
PYEOF
}
same_features cuda_emulated_embed_equals_cpu "$d/cpu.parquet" "$d/gpu.parquet"
# CUDA Graphs: 153 rows at batch 16 = 9 runs of the full-batch plan: the first plain, the second captured
# and launched, the other seven replayed (8 launches), the tail plan plain; the same features
FTL_CUDA_GRAPHS=1 FTL_EMU_TRACE=1 "$FTL" embed "$d/ds/val.parquet" --backbone "$MODEL" "$d/graphs.parquet" --device cuda \
    --batch 16 --quiet 2>"$d/graphs.err"
grep -q 'emulated GPU: 8 graph launches' "$d/graphs.err" && pass cuda_graphs_replayed || fail cuda_graphs_replayed "$(tail -3 "$d/graphs.err")"
same_features cuda_graphs_equal_cpu "$d/cpu.parquet" "$d/graphs.parquet"
$DUCK "SELECT decode(value) AS v FROM parquet_kv_metadata('$d/gpu.parquet') WHERE decode(key) = 'ftl.device'" | grep -q '"v":"cuda:0 ftl emulated GPU (sm_90' &&
    pass cuda_emulated_device_recorded || fail cuda_emulated_device_recorded "$($DUCK "SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata('$d/gpu.parquet')")"

# train + eval on the GPU, then on the CPU with the same cache folder: GPU features are not reused
TRAIN=(train "$d/ds/train.parquet" --val "$d/ds/val.parquet" --backbone "$MODEL" --epochs 2 --batch 16 --cache-dir "$d/cache" --quiet)
if "$FTL" "${TRAIN[@]}" --device cuda --out "$d/gpu.ftl" --log "$d/gpu.jsonl" --timeline "$d/gpu.trace.json" \
    --checkpoint "$d/gck/c-{epoch}.ckpt" >"$d/train_gpu.out" 2>&1 &&
    "$FTL" "${TRAIN[@]}" --device cpu --out "$d/cpu.ftl" --log "$d/cpu.jsonl" >"$d/train_cpu.out" 2>&1; then
    pass cuda_emulated_train_runs
else
    fail cuda_emulated_train_runs "$(tail -5 "$d/train_gpu.out" "$d/train_cpu.out")"
fi
# per epoch: GPU busy % and memory next to the data wait (line and log); none on the CPU
[ "$(grep -c 'Epoch [12]/2 .* - gpu: 42% busy, [0-9.]* GiB, data wait [0-9]*%' "$d/train_gpu.out")" -eq 2 ] &&
    [ "$(grep -c '"record":"epoch".*"gpu_util_percent":42[,.]' "$d/gpu.jsonl")" -eq 2 ] &&
    ! grep -q 'gpu:' "$d/train_cpu.out" && grep -q '"gpu_util_percent":null' "$d/cpu.jsonl" &&
    pass cuda_epoch_reports_gpu_use || fail cuda_epoch_reports_gpu_use "$(grep -h Epoch "$d/train_gpu.out" "$d/train_cpu.out"; head -c 600 "$d/gpu.jsonl")"
$PY - "$d/gpu.trace.json" <<'PYEOF' && pass cuda_timeline_has_gpu_counters || fail cuda_timeline_has_gpu_counters "see log"
import json, sys
events = json.load(open(sys.argv[1]))
busy = [e for e in events if e.get("ph") == "C" and e["name"] == "GPU busy %"]
print(len(events), "events,", len(busy), "GPU busy samples:", [e["args"]["value"] for e in busy])
assert len(busy) == 2 and all(e["args"]["value"] == 42 for e in busy)
PYEOF
# ---- the head on the GPU: cuBLAS GEMMs, ftl's kernels, NCCL between ranks
mkdir -p "$d/nccl_tmp"
TMPDIR="$d/nccl_tmp" "$CHECK" head || true
grep -q "^Head on cuda:0 ftl emulated GPU: cuBLAS GEMMs and ftl's kernels; one rank" "$d/train_gpu.out" &&
    grep -q '"head_device":"cuda:0 ftl emulated GPU: cuBLAS' "$d/gpu.jsonl" && grep -q '"head_device":"cpu"' "$d/cpu.jsonl" &&
    ! grep -q '^Head on' "$d/train_cpu.out" && pass cuda_train_head_on_the_gpu ||
    fail cuda_train_head_on_the_gpu "$(head -2 "$d/train_gpu.out"; grep -o '"head_device":"[^"]*"' "$d/gpu.jsonl" "$d/cpu.jsonl")"
$PY "$(dirname "$0")/../ref/read_safetensors.py" "$d/gpu.ftl" >"$d/gpu.ftl.json" 2>/dev/null
$PY "$(dirname "$0")/../ref/read_safetensors.py" "$d/cpu.ftl" >"$d/cpu.ftl.json" 2>/dev/null
same_head() {  # NAME A B TOLERANCE: the epochs' metrics and the head's weights of two runs
    $PY - "$d/$2" "$d/$3" "$4" <<'PYEOF' && pass "$1" || fail "$1" "see log"
import json, sys
a, b, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
epochs = lambda f: [r for r in map(json.loads, open(f)) if r.get("record") == "epoch"]
la, lb = epochs(a + ".jsonl"), epochs(b + ".jsonl")
assert len(la) == len(lb) == 2, (len(la), len(lb))
for x, y in zip(la, lb):
    for k in ("loss", "acc", "val_loss", "val_acc"):
        assert abs(x[k] - y[k]) <= tol * max(1, abs(x[k])), (k, x["epoch"], x[k], y[k])
ma, mb = json.load(open(a + ".ftl.json")), json.load(open(b + ".ftl.json"))
for t in ("head.kernel", "head.bias"):
    va, vb = [float(v) for v in ma["tensors"][t]["values"]], [float(v) for v in mb["tensors"][t]["values"]]
    worst = max(abs(p - q) for p, q in zip(va, vb)) / max(abs(q) for q in vb)
    print(t, "largest difference relative to the largest weight:", worst)
    assert len(va) == len(vb) and worst <= tol, (t, worst)
PYEOF
}
# the GPU run's features equal the CPU's up to fp32 rounding, so its head ends where the CPU's does
same_head cuda_train_gpu_head_equals_cpu_head gpu cpu 1e-4
# flip TTA's validation with the head on the GPU: scored by the CPU head on the weights the engine
# stored back after the epoch's steps, so its metrics (and the head) equal the CPU run's
# (a cache folder of their own: the cache-key check below counts the files of the runs above)
TTA_TRAIN=(train "$d/ds/train.parquet" --val "$d/ds/val.parquet" --backbone "$MODEL" --epochs 2 --batch 16 --tta flip
           --cache-dir "$d/cache_tta" --quiet)
if "$FTL" "${TTA_TRAIN[@]}" --device cuda --out "$d/gpu_tta.ftl" --log "$d/gpu_tta.jsonl" >"$d/tta_gpu.out" 2>&1 &&
    "$FTL" "${TTA_TRAIN[@]}" --device cpu --out "$d/cpu_tta.ftl" --log "$d/cpu_tta.jsonl" >"$d/tta_cpu.out" 2>&1 &&
    $PY "$(dirname "$0")/../ref/read_safetensors.py" "$d/gpu_tta.ftl" >"$d/gpu_tta.ftl.json" 2>/dev/null &&
    $PY "$(dirname "$0")/../ref/read_safetensors.py" "$d/cpu_tta.ftl" >"$d/cpu_tta.ftl.json" 2>/dev/null; then
    same_head cuda_train_gpu_head_tta_validation_equals_cpu gpu_tta cpu_tta 1e-4
else
    fail cuda_train_gpu_head_tta_validation_equals_cpu "$(tail -3 "$d/tta_gpu.out" "$d/tta_cpu.out")"
fi
# a resume on the GPU from epoch 1's checkpoint: the weights and optimizer state went back to the
# host after each epoch and come back to the GPU, so the model is the uninterrupted run's, byte for byte
"$FTL" "${TRAIN[@]}" --device cuda --resume "$d/gck/c-1.ckpt" --out "$d/gpu_resumed.ftl" >"$d/resume.out" 2>&1 &&
    cmp -s "$d/gpu.ftl" "$d/gpu_resumed.ftl" && pass cuda_train_gpu_resume_byte_identical ||
    fail cuda_train_gpu_resume_byte_identical "$(tail -3 "$d/resume.out")"
if command -v mpirun >/dev/null 2>&1; then
    # two ranks, one emulated GPU each (the local rank picks it), gradients summed by the emulated
    # NCCL (which refuses two ranks on one GPU, as NCCL does): the one-GPU run's model
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    MPI=(mpirun --oversubscribe --bind-to none -x FTL_CUDA_DRIVER_LIBRARY -x FTL_CUDNN_LIBRARY -x FTL_CUBLAS_LIBRARY
        -x FTL_NVML_LIBRARY -x FTL_NCCL_LIBRARY -x FTL_EMU_DEVICES -x TMPDIR)
    mkdir -p "$d/nccl_tmp"
    NP2=(train "$d/ds/train.parquet" --val "$d/ds/val.parquet" --backbone "$MODEL" --epochs 2 --batch 8 --cache-dir "$d/cache"
        --threads 1 --device cuda --quiet)
    if FTL_EMU_DEVICES=2 TMPDIR="$d/nccl_tmp" "${MPI[@]}" -np 2 "$FTL" "${NP2[@]}" --out "$d/np2.ftl" --log "$d/np2.jsonl" \
        >"$d/np2.out" 2>"$d/np2.err"; then
        pass cuda_nccl_two_ranks_run
    else
        fail cuda_nccl_two_ranks_run "$(grep -v '^\[[^r]' "$d/np2.err" | tail -4)"
    fi
    grep -q "^Head on cuda:0 ftl emulated GPU: cuBLAS GEMMs and ftl's kernels; NCCL 2\.[0-9.]*$" "$d/np2.out" &&
        [ -z "$(ls "$d/nccl_tmp")" ] && pass cuda_nccl_head_named_and_cleaned_up ||
        fail cuda_nccl_head_named_and_cleaned_up "$(head -1 "$d/np2.out"); left: $(ls "$d/nccl_tmp")"
    $PY "$(dirname "$0")/../ref/read_safetensors.py" "$d/np2.ftl" >"$d/np2.ftl.json" 2>/dev/null
    same_head cuda_nccl_two_ranks_equal_one_gpu np2 gpu 1e-5
    # without NCCL: a warning, and the gradients go over MPI through host memory, same model
    FTL_EMU_DEVICES=2 FTL_NCCL_LIBRARY=libnccl_missing.so.2 "${MPI[@]}" -np 2 "$FTL" "${NP2[@]}" --out "$d/np2h.ftl" \
        --log "$d/np2h.jsonl" >"$d/np2h.out" 2>"$d/np2h.err"
    grep -q 'no NCCL: libnccl_missing.so.2 could not be loaded.*; the gradients are summed over MPI through host memory instead' "$d/np2h.err" &&
        grep -q "^Head on cuda:0 ftl emulated GPU: cuBLAS GEMMs and ftl's kernels; MPI through host memory (no NCCL)$" "$d/np2h.out" &&
        pass cuda_no_nccl_falls_back_to_mpi || fail cuda_no_nccl_falls_back_to_mpi "$(grep -v '^\[[^r]' "$d/np2h.err" | tail -3; head -1 "$d/np2h.out")"
    $PY "$(dirname "$0")/../ref/read_safetensors.py" "$d/np2h.ftl" >"$d/np2h.ftl.json" 2>/dev/null
    same_head cuda_no_nccl_two_ranks_equal_one_gpu np2h gpu 1e-5
    # two ranks sharing one GPU (the backbone allows it; NCCL does not): every rank agrees to sum over
    # MPI through host memory instead, with a warning saying why; the same model
    FTL_EMU_DEVICES=1 TMPDIR="$d/nccl_tmp" "${MPI[@]}" -np 2 "$FTL" "${NP2[@]}" --out "$d/np2b.ftl" --log "$d/np2b.jsonl" \
        >"$d/np2b.out" 2>"$d/np2b.err"
    rc=$?
    [ "$rc" -eq 0 ] && grep -q 'rank [01]\] ftl: warning: 2 ranks on this host share 1 GPU, and NCCL needs a GPU of its own for each rank.*summed over MPI through host memory instead' "$d/np2b.err" &&
        grep -q "; MPI through host memory (no NCCL)$" "$d/np2b.out" && [ -z "$(ls "$d/nccl_tmp")" ] &&
        pass cuda_shared_gpu_falls_back_to_mpi || fail cuda_shared_gpu_falls_back_to_mpi "rc $rc: $(grep -v '^\[[^r]' "$d/np2b.err" | head -3)"
    $PY "$(dirname "$0")/../ref/read_safetensors.py" "$d/np2b.ftl" >"$d/np2b.ftl.json" 2>/dev/null
    same_head cuda_shared_gpu_two_ranks_equal_one_gpu np2b gpu 1e-5
    # --device auto where only rank 0 has a GPU: rank 1 runs its backbone on the CPU, and the two
    # heads must sum their gradients one way, so both train on the CPU (saying so); the model is
    # the one-GPU run's within the backbones' rounding
    NPA=(train "$d/ds/train.parquet" --val "$d/ds/val.parquet" --backbone "$MODEL" --epochs 2 --batch 8 --cache-dir "$d/cache_auto"
        --threads 1 --device auto --quiet)
    FTL_EMU_DEVICES=1 TMPDIR="$d/nccl_tmp" timeout 300 "${MPI[@]}" -np 1 "$FTL" "${NPA[@]}" --out "$d/npm.ftl" --log "$d/npm.jsonl" \
        : -np 1 env FTL_EMU_DEVICES=0 "$FTL" "${NPA[@]}" --out "$d/npm.ftl" --log "$d/npm.jsonl" >"$d/npm.out" 2>"$d/npm.err"
    rc=$?
    [ "$rc" -eq 0 ] && grep -q 'warning: 1 of 2 ranks run the backbone on a GPU, the others on the CPU: every rank trains its head on the CPU' "$d/npm.err" &&
        ! grep -q '^Head on' "$d/npm.out" && pass cuda_mixed_ranks_train_heads_on_cpu ||
        fail cuda_mixed_ranks_train_heads_on_cpu "rc $rc: $(grep -v '^\[[^r]' "$d/npm.err" | head -3)"
    $PY "$(dirname "$0")/../ref/read_safetensors.py" "$d/npm.ftl" >"$d/npm.ftl.json" 2>/dev/null
    same_head cuda_mixed_ranks_equal_one_gpu npm gpu 1e-4
    # a GPU whose allreduce never finishes (a peer's GPU hung): each rank's stall watch gives up after
    # --stall-timeout, aborts NCCL and fails naming it; nothing is written, nothing hangs
    FTL_EMU_DEVICES=2 FTL_EMU_NCCL_STUCK=1 TMPDIR="$d/nccl_tmp" timeout 120 "${MPI[@]}" -x FTL_EMU_NCCL_STUCK -np 2 "$FTL" "${NP2[@]}" \
        --stall-timeout 2 --out "$d/stuck.ftl" >"$d/stuck.out" 2>"$d/stuck.err"
    rc=$?
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ ! -e "$d/stuck.ftl" ] &&
        grep -q 'rank [01]: epoch 1, batch 1: the NCCL gradient allreduce over 2 ranks did not finish within the stall timeout (2 s)' "$d/stuck.err" &&
        pass cuda_nccl_stall_fails_not_hangs || fail cuda_nccl_stall_fails_not_hangs "rc $rc: $(grep -v '^\[[^r]' "$d/stuck.err" | head -3)"
else
    for t in mixed_ranks_train_heads_on_cpu mixed_ranks_equal_one_gpu nccl_stall_fails_not_hangs nccl_two_ranks_run nccl_head_named_and_cleaned_up nccl_two_ranks_equal_one_gpu shared_gpu_falls_back_to_mpi shared_gpu_two_ranks_equal_one_gpu no_nccl_falls_back_to_mpi no_nccl_two_ranks_equal_one_gpu; do
        skip "cuda_$t" "mpirun (openmpi-bin) is not installed"
    done
fi
# The algorithm choice: the emulated cuDNN times a DEFAULT_MATH row fastest (TF32 on a real GPU: fp32 must
# pass it by, tf32 may take it), then a non-deterministic one (fp32's choice), then a deterministic one
# (--deterministic's)
det=$("$FTL" inspect "$MODEL" --plan --device cuda --deterministic 2>&1 | grep -c 'cudnn conv.* algo 1,')
fast=$("$FTL" inspect "$MODEL" --plan --device cuda 2>&1 | grep -c 'cudnn conv.* algo 4,')
tf32=$("$FTL" inspect "$MODEL" --plan --device cuda --precision tf32 2>&1 | grep -c 'cudnn conv.* algo 0,')
[ "$det" -gt 0 ] && [ "$fast" -eq "$det" ] && [ "$tf32" -eq "$det" ] && pass cuda_algorithm_choice ||
    fail cuda_algorithm_choice "$det deterministic, $fast fastest fp32, $tf32 tf32 convs"
n_keys=$(ls "$d/cache" 2>/dev/null | sed -n 's/.*-\([0-9a-f]\{16\}\)\.rows-.*/\1/p' | sort -u | wc -l)
[ "$n_keys" -eq 4 ] && pass cuda_cache_key_has_the_device || fail cuda_cache_key_has_the_device "$n_keys distinct keys in $(ls "$d/cache" | tr '\n' ' ') (want train+val for each device)"
"$FTL" inspect "$d/gpu.ftl" >"$d/gpu_model.txt" 2>&1
grep -q 'features computed on: cuda:0 ftl emulated GPU' "$d/gpu_model.txt" && pass cuda_model_records_device || fail cuda_model_records_device "$(grep -i device "$d/gpu_model.txt")"
ev_gpu=$("$FTL" eval "$d/gpu.ftl" "$d/ds/val.parquet" --device cuda 2>&1 | grep -o 'top-1: [0-9.]*' | head -1)
ev_cpu=$("$FTL" eval "$d/gpu.ftl" "$d/ds/val.parquet" --device cpu 2>&1 | grep -o 'top-1: [0-9.]*' | head -1)
[ -n "$ev_gpu" ] && [ "$ev_gpu" = "$ev_cpu" ] && pass cuda_emulated_eval_equals_cpu || fail cuda_emulated_eval_equals_cpu "gpu '$ev_gpu' vs cpu '$ev_cpu'"

# ---- the fine-tune recipe with the bottom and the frozen top on the device: the bottom runs once per
# split, and eval of the tuned model reads val's boundary rows and gives the run's val metrics
"$FTL" train "$d/ds/train.parquet" --val "$d/ds/val.parquet" --backbone "$MODEL" --epochs 2 --fine-tune-last 2 \
    --fine-tune-epochs 1 --fine-tune-lr 1e-4 --device cuda --cache-dir "$d/ftcache" --out "$d/ft.ftl" --log "$d/ft.jsonl" \
    >"$d/ft.out" 2>"$d/ft.err" &&
    "$FTL" eval "$d/ft.ftl" "$d/ds/val.parquet" --device cuda --cache-dir "$d/ftcache" --json "$d/ft_eval.json" --quiet \
        >/dev/null 2>"$d/ft_eval.err" &&
    [ "$(grep -c 'feature cache: computing' "$d/ft.err")" -eq 2 ] && grep -q "by the frozen top (last 2)" "$d/ft.err" &&
    grep -q 'eval: reusing the boundary rows of the cut (last 2)' "$d/ft_eval.err" &&
    $PY - "$d/ft.jsonl" "$d/ft_eval.json" <<'PYEOF' && pass cuda_fine_tune_recipe_one_bottom_pass || fail cuda_fine_tune_recipe_one_bottom_pass "$(tail -3 "$d/ft.err"; cat "$d/ft_eval.err")"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
best = max((r for r in recs if r["record"] == "epoch"), key=lambda r: r["val_acc"])
e = json.load(open(sys.argv[2]))
print("run best val_acc", best["val_acc"], "eval top1", e["top1"])
assert round(e["top1"] * 153) == round(best["val_acc"] * 153), (e, best)
PYEOF
finish
