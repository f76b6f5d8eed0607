#!/usr/bin/env bash
# The CLI's own texts: `ftl --version` names every backend of the build (CUDA built or not, MPI
# linked or not, a GPU found or not), and every command's --help lists each option once, as it is
# typed, and the parser accepts it as printed.
source "$(dirname "$0")/lib.sh"
d=$(scratch cli)

# ---- --version: one line per backend
v=$("$FTL" --version)
grep -q -E '^CPU: oneDNN [0-9]+\.[0-9]+\.[0-9]+ \((avx|sse|avx2|avx512)[a-z0-9_]* on this CPU: .+\)$' <<<"$v" &&
    pass version_names_the_cpu_backend || fail version_names_the_cpu_backend "$v"
if "$FTL" --version | grep -q '^GPU: CUDA'; then
    grep -q -E '^GPU: CUDA backend built for sm_75, .*sm_90 and PTX for newer GPUs; driver and libraries loaded at run time: not found: no NVIDIA driver' <<<"$(env FTL_CUDA_DRIVER_LIBRARY=libcuda_missing.so.1 "$FTL" --version)" &&
        pass version_cuda_built_no_driver || fail version_cuda_built_no_driver "$(env FTL_CUDA_DRIVER_LIBRARY=libcuda_missing.so.1 "$FTL" --version)"
    EMU="$BUILD/cuda-emu/libftl_cuda_emu.so"
    if [ -e "$EMU" ]; then
        out=$(env FTL_CUDA_DRIVER_LIBRARY="$EMU" FTL_CUDNN_LIBRARY="$EMU" FTL_CUBLAS_LIBRARY="$EMU" FTL_NVML_LIBRARY="$EMU" FTL_NCCL_LIBRARY="$EMU" "$FTL" --version)
        grep -q -E '^GPU: CUDA backend built for .*: found: ftl emulated GPU \(sm_[0-9]+\), CUDA driver [0-9.]+, cuDNN [0-9.]+, cuBLAS [0-9.]+' <<<"$out" &&
            pass version_cuda_built_gpu_found || fail version_cuda_built_gpu_found "$out"
    else
        skip version_cuda_built_gpu_found "the emulated GPU library is not built ($EMU)"
    fi
else
    skip version_cuda_built_no_driver "this ftl was built without CUDA"
    skip version_cuda_built_gpu_found "this ftl was built without CUDA"
fi
if [ -x "$BUILD/ftl_nocuda" ]; then
    grep -q '^GPU: none: built without CUDA' <<<"$("$BUILD/ftl_nocuda" --version)" && pass version_without_cuda ||
        fail version_without_cuda "$("$BUILD/ftl_nocuda" --version)"
else
    skip version_without_cuda "no CUDA-less build here (build/ftl_nocuda is made when nvcc is found)"
fi
if "$FTL" --version | grep -q 'Open MPI'; then
    grep -q -E '^data parallelism: Open MPI [0-9]+\.[0-9]+\.[0-9]+ \(mpirun -np N ftl' <<<"$v" && pass version_names_open_mpi ||
        fail version_names_open_mpi "$v"
    grep -q '^data parallelism: none: built without MPI' <<<"$("$BUILD/ftl_stub" --version)" && pass version_without_mpi ||
        fail version_without_mpi "$("$BUILD/ftl_stub" --version 2>&1)"
else
    grep -q '^data parallelism: none: built without MPI' <<<"$v" && pass version_without_mpi || fail version_without_mpi "$v"
    skip version_names_open_mpi "this ftl was built without MPI"
fi

# ---- every command's --help: each option once, accepted as printed
commands=$("$FTL" --help | awk '/^commands:/{on=1; next} on && /^  [a-z]/{print $1} on && /^$/{on=0}')
[ "$(wc -w <<<"$commands")" -ge 8 ] && pass help_lists_the_commands || fail help_lists_the_commands "$commands"
for c in $commands; do
    "$FTL" "$c" --help >"$d/$c.help" 2>&1 || { fail "help_$c" "ftl $c --help exited $?"; continue; }
    # option lines: "  -o REPORT.html   text" or "  --name VALUE   text"
    opts=$(awk '/^options:/{on=1; next} on && /^  -/{print $1}' "$d/$c.help")
    dups=$(sort <<<"$opts" | uniq -d | tr '\n' ' ')
    [ -n "$opts" ] && [ -z "$dups" ] && pass "help_${c}_lists_each_option_once" || fail "help_${c}_lists_each_option_once" "duplicates: '$dups'"
    bad=""
    while read -r opt value _; do
        case "$value" in ""|[a-z]*) args=("$opt") ;; *) args=("$opt" 1) ;; esac  # a word in capitals names a value
        # no positional arguments: the parser stops at "missing arguments" after reading the option
        err=$("$FTL" "$c" "${args[@]}" 2>&1 >/dev/null)
        grep -q "unknown option" <<<"$err" && bad="$bad $opt"
    done < <(awk '/^options:/{on=1; next} on && /^  -/{print $1, $2}' "$d/$c.help")
    [ -z "$bad" ] && pass "help_${c}_options_accepted_as_printed" || fail "help_${c}_options_accepted_as_printed" "refused:$bad"
done
# the defaults the help states are the ones in force (the options whose default a user relies on)
grep -q -- "--momentum M .*default 0," "$d/train.help" && pass help_train_momentum_default || fail help_train_momentum_default "$(grep -- --momentum "$d/train.help")"
grep -q -E '^  -o REPORT.html' "$d/report.help" && ! grep -q -- '--o ' "$d/report.help" && pass help_report_short_option ||
    fail help_report_short_option "$(grep -E -- '-o|--out' "$d/report.help")"
finish
