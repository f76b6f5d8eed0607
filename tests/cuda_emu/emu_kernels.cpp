/* ftl's CUDA kernels (src/nn/cuda/kernels.cu and head_kernels.cu, the very source) compiled for the
 * host and run by the emulated device: one block of two warps, its 64 threads coroutines on the
 * calling thread (two warps, so the kernels' split of rows between a block's warps is exercised).
 * A thread runs until its next __shfl_xor_sync (or its end) and yields; once every thread has
 * posted its value for that shuffle, each reads its partner's, which is in its own warp (the
 * masks are below 32). The kernels loop grid-stride, so one block covers every element whatever
 * grid the plan asked for, and their shuffles are reached by all lanes of a warp alike (the loops
 * around them do not depend on the lane). */
#include <functional>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#define __global__
#define __device__
static inline int min(int a, int b) { return a < b ? a : b; }
struct emu_uint3 {
    unsigned x, y, z;
};
static emu_uint3 threadIdx;
static const emu_uint3 blockIdx = {0, 0, 0}, blockDim = {64, 1, 1}, gridDim = {1, 1, 1};

enum { LANES = 64, LANE_STACK = 256 << 10 }; /* threads of the block */
static ucontext_t scheduler, lane_ctx[LANES];
static double slots[2][LANES]; /* float, int and double values all fit a double exactly */
static unsigned shuffles[LANES];

template <typename T> static T __shfl_xor_sync(unsigned, T v, int mask) {
    unsigned lane = threadIdx.x, phase = shuffles[lane]++ & 1;
    slots[phase][lane] = (double)v;
    swapcontext(&lane_ctx[lane], &scheduler); /* the other lanes post theirs */
    return (T)slots[phase][lane ^ (unsigned)mask];
}
/* A yield like a shuffle: the warp's lanes all reach it before any goes on. */
static void __syncwarp(unsigned = 0xffffffffu) { (void)__shfl_xor_sync(0u, 0.0f, 0); }
/* Round-to-nearest arithmetic that is never fused (the host compiler contracts nothing in ISO mode). */
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

#include "nn/cuda/kernels.cu"
#include "nn/cuda/head_kernels.cu"

static std::function<void()> job;
static bool lane_done[LANES];
static char *stacks[LANES];

static void lane_main(void) {
    unsigned lane = threadIdx.x;
    job();
    lane_done[lane] = true; /* uc_link returns to the scheduler */
}

template <typename Args> static void run_warp(void (*kernel)(Args), void **params) {
    Args a;
    memcpy(&a, params[0], sizeof a);
    job = [&] { kernel(a); };
    for (unsigned l = 0; l < LANES; l++) {
        if (!stacks[l]) stacks[l] = static_cast<char *>(malloc(LANE_STACK));
        getcontext(&lane_ctx[l]);
        lane_ctx[l].uc_stack.ss_sp = stacks[l];
        lane_ctx[l].uc_stack.ss_size = LANE_STACK;
        lane_ctx[l].uc_link = &scheduler;
        makecontext(&lane_ctx[l], lane_main, 0);
        lane_done[l] = false;
        shuffles[l] = 0;
    }
    for (bool running = true; running;) {
        running = false;
        for (unsigned l = 0; l < LANES; l++) {
            if (lane_done[l]) continue;
            threadIdx = {l, 0, 0};
            swapcontext(&scheduler, &lane_ctx[l]);
            running = running || !lane_done[l];
        }
    }
}

/* 0 when the kernel exists (and ran), -1 for an unknown name. */
extern "C" int emu_kernel_launch(const char *name, void **params) {
    if (!strcmp(name, "ftl_ew")) run_warp(ftl_ew, params);
    else if (!strcmp(name, "ftl_reduce")) run_warp(ftl_reduce, params);
    else if (!strcmp(name, "ftl_pool")) run_warp(ftl_pool, params);
    else if (!strcmp(name, "ftl_softmax")) run_warp(ftl_softmax, params);
    else if (!strcmp(name, "ftl_layernorm")) run_warp(ftl_layernorm, params);
    else if (!strcmp(name, "ftl_preprocess")) run_warp(ftl_preprocess, params);
    else if (!strcmp(name, "ftl_fill")) run_warp(ftl_fill, params);
    else if (!strcmp(name, "ftl_head_dropout")) run_warp(ftl_head_dropout, params);
    else if (!strcmp(name, "ftl_head_softmax_ce")) run_warp(ftl_head_softmax_ce, params);
    else if (!strcmp(name, "ftl_head_bias_grad")) run_warp(ftl_head_bias_grad, params);
    else if (!strcmp(name, "ftl_head_optimizer")) run_warp(ftl_head_optimizer, params);
    else return -1;
    return 0;
}

extern "C" size_t emu_kernel_args_size(const char *name) {
    if (!strcmp(name, "ftl_ew")) return sizeof(ka_ew_args);
    if (!strcmp(name, "ftl_reduce")) return sizeof(ka_reduce_args);
    if (!strcmp(name, "ftl_pool")) return sizeof(ka_pool_args);
    if (!strcmp(name, "ftl_softmax") || !strcmp(name, "ftl_layernorm")) return sizeof(ka_rows_args);
    if (!strcmp(name, "ftl_preprocess")) return sizeof(ka_preprocess_args);
    if (!strcmp(name, "ftl_head_dropout")) return sizeof(ka_dropout_args);
    if (!strcmp(name, "ftl_head_softmax_ce")) return sizeof(ka_ce_args);
    if (!strcmp(name, "ftl_head_bias_grad")) return sizeof(ka_bias_grad_args);
    if (!strcmp(name, "ftl_head_optimizer")) return sizeof(ka_optimizer_args);
    return sizeof(ka_fill_args);
}

extern "C" int emu_kernel_known(const char *name) {
    const char *names[] = {"ftl_ew", "ftl_reduce", "ftl_pool", "ftl_softmax", "ftl_layernorm", "ftl_preprocess", "ftl_fill",
                           "ftl_head_dropout", "ftl_head_softmax_ce", "ftl_head_bias_grad", "ftl_head_optimizer"};
    for (const char *n : names)
        if (!strcmp(n, name)) return 1;
    return 0;
}
