/* `--precision auto` and the bf16 speed warning: decided from the CPU's measured bf16 and fp32
 * rates, since whether bf16 pays differs by CPU (AMD Zen 4/5: twice fp32; Intel Xeons with
 * AVX512-BF16: half; older CPUs: emulated). */
#include "ftl/profile.h"
#include "util/error.h"
#include "util/log.h"

#include <pthread.h>
#include <stdio.h>

/* bf16 must beat fp32 by this factor: below it, the conversions around bf16 layers eat the gain. */
static const double BF16_MIN_ADVANTAGE = 1.2;

static bool cpu_device(ftl_device_kind device) {
    if (device == FTL_DEVICE_CPU) return true;
    if (device == FTL_DEVICE_CUDA) return false;
    ftl_device d;
    return ftl_device_select(FTL_DEVICE_AUTO, -1, &d) != FTL_OK || d.kind == FTL_DEVICE_CPU;
}

ftl_status ftl_nn_precision_auto(ftl_device_kind device, int threads, ftl_nn_precision *precision, char *why,
                                 size_t why_size) {
    *precision = FTL_NN_FP32;
    if (!cpu_device(device)) {
        if (why) snprintf(why, why_size, "fp32 (on the GPU auto keeps fp32; ask for tf32 or bf16 by name)");
        return FTL_OK;
    }
    ftl_cpu_peak pk;
    FTL_TRY(ftl_cpu_peak_measure(threads, &pk));
    if (pk.bf16_gflops > BF16_MIN_ADVANTAGE * pk.fp32_gflops && ftl_nn_cpu_bf16_available()) *precision = FTL_NN_BF16;
    if (why) {
        if (pk.bf16_gflops <= 0)
            snprintf(why, why_size, "fp32 (this CPU has no native bf16; fp32 %.0f GFLOP/s on %d threads)", pk.fp32_gflops,
                     pk.threads);
        else
            snprintf(why, why_size, "%s (measured on %d threads: bf16 %.0f GFLOP/s, fp32 %.0f)",
                     ftl_nn_precision_name(*precision), pk.threads, pk.bf16_gflops, pk.fp32_gflops);
    }
    return FTL_OK;
}

ftl_status ftl_nn_precision_auto_agreed(const ftl_collectives *c, ftl_device_kind device, int threads,
                                        ftl_nn_precision *precision, char *why, size_t why_size) {
    FTL_TRY(ftl_nn_precision_auto(device, threads, precision, why, why_size));
    if (!ftl_dist_active(c)) return FTL_OK;
    int64_t fp32_votes = *precision == FTL_NN_FP32;
    FTL_TRY(ftl_dist_allreduce_i64(c, &fp32_votes, 1));
    if (fp32_votes > 0 && *precision != FTL_NN_FP32) {
        *precision = FTL_NN_FP32;
        if (why) snprintf(why, why_size, "fp32 (%lld of %d ranks run faster in fp32)", (long long)fp32_votes, ftl_dist_size(c));
    }
    return FTL_OK;
}

static pthread_once_t warn_once = PTHREAD_ONCE_INIT;
static int warn_threads;

static void warn_slow_bf16(void) {
    ftl_cpu_peak pk;
    if (ftl_cpu_peak_measure(warn_threads, &pk) != FTL_OK || pk.bf16_gflops <= 0) return; /* no bf16: model.c warns */
    if (pk.bf16_gflops < pk.fp32_gflops)
        ftl_log_warn("--precision bf16 is slower than fp32 on this CPU: its bf16 dot products run at %.0f GFLOP/s and its "
                     "fp32 FMAs at %.0f (%d threads); fp32 (or --precision auto) is faster here",
                     pk.bf16_gflops, pk.fp32_gflops, pk.threads);
}

void ftl_nn_precision_warn_if_slow(ftl_nn_precision precision, ftl_device_kind device, int threads) {
    if (precision != FTL_NN_BF16 || !cpu_device(device)) return;
    warn_threads = threads;
    pthread_once(&warn_once, warn_slow_bf16);
}
