/* ftl public API: where a backbone's time goes (`ftl inspect MODEL.onnx --profile`), the CPU's
 * measured arithmetic peak, and the model's own ceiling (each convolution and matmul run alone).
 *
 *     ftl_model *m;          FTL_TRY(ftl_model_load("vit_b_16.onnx", &o, &m));
 *     ftl_profile_options po; ftl_profile_options_init(&po); po.ceiling = true;
 *     ftl_profile *p;        FTL_TRY(ftl_model_profile(m, &po, &p));
 *     ftl_profile_print(p, stdout, false);
 *     ftl_profile_free(p);
 */
#ifndef FTL_PROFILE_H
#define FTL_PROFILE_H

#include "ftl/base.h"
#include "ftl/dist.h"
#include "ftl/nn.h"
#include <stdbool.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the CPU's peak ---- */

typedef struct ftl_cpu_peak {
    int threads;
    /* GFLOP/s of one thread's best run times threads (a shared VM's other tenants make a direct
     * multi-thread reading noisy; the direct one is given too). */
    double fp32_gflops;       /* AVX-512 (or AVX2) FMA: 2 FLOP per lane */
    double bf16_gflops;       /* AVX512-BF16 dot products (vdpbf16ps: 2 products + adds per fp32 lane); 0: none */
    double int8_gops;         /* AVX512-VNNI u8 x s8 dot products (vpdpbusd: 4 MACs per int32 lane); 0: none */
    double fp32_measured;     /* fp32 on all `threads` at once */
    const char *isa_fp32;     /* "avx512f" / "avx2" / "none" */
} ftl_cpu_peak;

/* Measures (a few hundred milliseconds, once per process and thread count; later calls return the
 * cached figures). threads <= 0: every core this process may use. */
ftl_status ftl_cpu_peak_measure(int threads, ftl_cpu_peak *peak);

/* ---- --precision auto ---- */

/* The precision `auto` means on this CPU: bf16 when its measured bf16 rate is above the fp32 rate
 * (AVX512-BF16 at full width, e.g. AMD Zen 4/5), else fp32 (no bf16, or bf16 at half the fp32 rate
 * as on Intel Xeons with AVX512-BF16). On a GPU device: fp32. `why` (may be NULL) gets one line
 * naming the figures. */
ftl_status ftl_nn_precision_auto(ftl_device_kind device, int threads, ftl_nn_precision *precision, char *why,
                                 size_t why_size);
/* The same, agreed by every rank of `collectives` (NULL: one process): bf16 only when every rank's
 * CPU prefers it, so all ranks compute (and key) the same features. */
ftl_status ftl_nn_precision_auto_agreed(const ftl_collectives *collectives, ftl_device_kind device, int threads,
                                        ftl_nn_precision *precision, char *why, size_t why_size);
/* Warns once per process when `precision` is bf16 on a CPU whose bf16 rate is below its fp32 rate
 * (naming both), so the user knows fp32 is faster here. */
void ftl_nn_precision_warn_if_slow(ftl_nn_precision precision, ftl_device_kind device, int threads);

/* ---- the profile of a loaded model ---- */

typedef struct ftl_profile_options {
    int reps;                 /* timed runs (median taken); default 5 */
    double min_seconds;       /* ... and the runs at least this long in all (ceiling passes not counted); default 1.0 */
    bool ceiling;             /* also run every convolution and matmul alone (layouts it prefers) */
    int top;                  /* slowest steps printed; default 15 */
} ftl_profile_options;

void ftl_profile_options_init(ftl_profile_options *o);

typedef struct ftl_profile_step {
    int index;                /* step in the plan */
    const char *label;        /* what the step computes (node name, or "reorder of tensor T for node N") */
    const char *node;         /* graph node it belongs to ("" for the plan's own copies) */
    const char *kind;         /* the node's op type ("Conv", "MatMul", ...), or "Reorder", "Fill" */
    const char *impl;         /* oneDNN's implementation string, or "ftl" for ftl's own loops */
    const char *precision;    /* "fp32" / "bf16": the data type its main input runs in */
    bool reference;           /* oneDNN's reference (scalar, slow) kernel */
    int executions;           /* per batch (micro-batch chunks) */
    double seconds;           /* per batch (median over the runs) */
    double flops;             /* per batch: 2 x the multiply-adds the graph counts for its node */
    double alone_seconds;     /* ceiling: the same work run alone, best time (0: not measured) */
    int nodes;                /* graph nodes whose work it does: 1, or 2 for a fused pair (a depthwise and its 1x1) */
} ftl_profile_step;

typedef struct ftl_profile_kind {
    const char *kind;
    int steps;
    double seconds, flops;
    double alone_seconds, alone_flops; /* ceiling: steps of this kind timed alone */
} ftl_profile_kind;

typedef struct ftl_profile {
    const char *model, *backend;
    int batch;                /* the model's batch */
    int plan_batch;           /* images in the profiled plan run (the batch, or the micro-batch the plan
                                 runs at a time when layers could not be sized one by one) */
    int threads, micro_batch_min, micro_batch;
    ftl_nn_precision precision;
    ftl_cpu_peak peak;
    double peak_gflops;       /* the peak of the plan's precision */
    double total_seconds;     /* one batch, plain run (median) */
    double best_seconds;      /* one batch, the best plain run: what the ceiling (best times) compares with */
    double steps_seconds;     /* sum of the steps' medians (timed one by one) */
    double timed_run_seconds; /* median over the timed runs of each run's step sum: what the steps cover
                                 of a run (a sum of medians leaves out every step's own spikes) */
    double flops;             /* per batch: 2 x the graph's multiply-adds */
    int runs;
    ftl_profile_step *steps;
    int n_steps;
    ftl_profile_kind *kinds;  /* by time, largest first */
    int n_kinds;
    /* ceiling: convolutions and matmuls alone */
    bool has_ceiling;
    double ceiling_flops, ceiling_seconds; /* their FLOPs and summed best times (timed in passes between the
                                              model's runs, so both see the same machine) */
    int reference_steps;      /* steps that ran a reference kernel */
    int top;
} ftl_profile;

/* Runs the model's compiled plan (its batch, precision, threads) on synthetic input, each step
 * timed, plus plain runs for the total. CPU backend only (a clear error elsewhere). */
ftl_status ftl_model_profile(ftl_model *model, const ftl_profile_options *options, ftl_profile **profile);
/* Text: totals, per kind, the slowest steps (reference kernels flagged); or one JSON document. */
void ftl_profile_print(const ftl_profile *profile, FILE *out, bool json);
void ftl_profile_free(ftl_profile *profile);

#ifdef __cplusplus
}
#endif
#endif
