#!/usr/bin/env bash
# PyTorch references for the head, optimizers and safetensors (tests/unit/test_train_*.c), and the
# fine-tuning plan's gradients (train_backward.py -> backward/, tests/unit/test_nn_train_plan.c).
# Writes $BUILD/ref/train/; skipped when the stamp (this script, the Python script, torch's
# version) is unchanged. Prints `ok NAME` / `FAIL NAME: why`.
set -u
cd "$(dirname "$0")/../.."
: "${BUILD:?}" "${PY:=/usr/bin/python3}"
out="$BUILD/ref/train"
torch_version=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null) || {
    echo "FAIL train_ref: $PY cannot import torch (Debian python3-torch is required)"
    exit 1
}
stamp=$(cat tests/ref/gen_train.sh tests/ref/train_ref.py tests/ref/train_backward.py | sha256sum | cut -c1-16)-$torch_version
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ]; then
    echo "ok train_ref (up to date)"
    exit 0
fi
rm -rf "$out"
mkdir -p "$out"
if "$PY" tests/ref/train_ref.py "$out" >"$out/log.txt" 2>&1 &&
    "$PY" tests/ref/train_backward.py "$out/backward" >>"$out/log.txt" 2>&1; then
    echo "$stamp" >"$out/stamp"
    echo "ok train_ref"
else
    echo "FAIL train_ref: $(tail -3 "$out/log.txt")"
    exit 1
fi
