#!/usr/bin/env bash
# Installs what ftl needs on Debian 12, idempotently: every package is named here.
#   scripts/install_deps.sh build   libraries and tools to build ftl
#   scripts/install_deps.sh test    + reference implementations used by the tests
#   scripts/install_deps.sh python  + what the Python package builds with (make python)
#   scripts/install_deps.sh fuzz    + clang and its libFuzzer runtime (make fuzz)
# Already-installed packages are detected with dpkg-query, so a second run does nothing.
set -euo pipefail
what=${1:-build}

build_packages=(
  gcc make pkg-config
  libdnnl-dev            # oneDNN: CPU convolutions (fp32, bf16)
  libturbojpeg0-dev      # libjpeg-turbo TurboJPEG API: JPEG decode with DCT-domain scaling
  libpng-dev             # PNG decode
  libprotobuf-c-dev protobuf-c-compiler   # ONNX parsing (code generated from onnx.proto)
  libonnx-dev            # provides onnx.proto, the real schema
  libzstd-dev libsnappy-dev zlib1g-dev    # Parquet codecs
  libopenmpi-dev openmpi-bin              # data-parallel training
  python3 curl ca-certificates            # the demo's data download (when ../shared is absent)
)
python_packages=(
  python3-dev python3-numpy   # the C extension's headers; the arrays it returns
  python3-setuptools          # pip install --no-build-isolation ./python
  python3-venv python3-pip python3-wheel   # ... into a virtual environment
)
test_packages=(
  "${python_packages[@]}"
  python3-pytest              # the Python package's tests
  python3-numpy python3-pil python3-onnx python3-torch python3-torchvision
  libopenblas0-pthread   # BLAS for Debian's PyTorch: without it torch's Linear layers run on the reference BLAS
                         # (~1 GFLOP/s), which made the transformer peer 50x slower than a user's PyTorch
  nodejs                 # runs the pinned Parquet / ONNX Runtime reference tools
  iproute2 util-linux    # ip netns, unshare: two "hosts" on one machine for the MPI tests
  bc                     # bench/dist/run.sh arithmetic
  g++                    # compiles ftl's CUDA kernel source for the CPU: the emulated GPU of the tests
  chromium               # renders ftl report pages in the tests (headless, no network)
)

fuzz_packages=(
  clang-14               # libFuzzer instrumentation
  libclang-rt-14-dev     # libFuzzer, ASan and UBSan runtimes for clang
)

packages=("${build_packages[@]}")
[ "$what" = test ] && packages+=("${test_packages[@]}")
[ "$what" = python ] && packages+=("${python_packages[@]}")
[ "$what" = fuzz ] && packages+=("${fuzz_packages[@]}")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# npm ships inside nodesource's nodejs; Debian's nodejs needs the separate npm package.
if [ "$what" = test ] && ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "install_deps: installing ${missing[*]}" >&2
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
