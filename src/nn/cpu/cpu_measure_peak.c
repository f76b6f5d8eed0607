/* The CPU's arithmetic peak, measured: independent chains of FMAs (fp32), bf16 dot products and
 * VNNI int8 dot products, long enough to hide their latency, on one thread and then on all. The
 * profiler divides by these figures and `--precision auto` compares the bf16 and fp32 rates, so
 * they come from this CPU, not from a table of models. */
#include "ftl/profile.h"
#include "util/error.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { CHAINS = 24, MAX_THREADS = 256 };

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile float sink_f;
static volatile int sink_i;

__attribute__((target("avx512f"))) static void fma512_loop(long iters) {
    __m512 acc[CHAINS], a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < iters; it++)
#pragma GCC unroll 24
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    __m512 s = acc[0];
    for (int i = 1; i < CHAINS; i++) s = _mm512_add_ps(s, acc[i]);
    sink_f = _mm512_reduce_add_ps(s);
}

/* AVX2 has 16 ymm registers: 24 accumulators spilled to the stack and the loop measured the stores
 * (half of Zen 3's rate, models at 155% of that "peak"). 12 chains, each step in asm as VNNI's. */
#define FMA256_STEP(r) __asm__ volatile("vfmadd231ps %1, %2, %0" : "+x"(r) : "x"(a), "x"(b))
__attribute__((target("avx2,fma"))) static void fma256_loop(long iters) {
    __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    __m256 c0 = _mm256_set1_ps(0), c1 = _mm256_set1_ps(1), c2 = _mm256_set1_ps(2), c3 = _mm256_set1_ps(3),
           c4 = _mm256_set1_ps(4), c5 = _mm256_set1_ps(5), c6 = _mm256_set1_ps(6), c7 = _mm256_set1_ps(7),
           c8 = _mm256_set1_ps(8), c9 = _mm256_set1_ps(9), c10 = _mm256_set1_ps(10), c11 = _mm256_set1_ps(11);
    for (long it = 0; it < 2 * iters; it++) { /* 2 x 12 = CHAINS products per iteration, as the other loops */
        FMA256_STEP(c0); FMA256_STEP(c1); FMA256_STEP(c2); FMA256_STEP(c3); FMA256_STEP(c4); FMA256_STEP(c5);
        FMA256_STEP(c6); FMA256_STEP(c7); FMA256_STEP(c8); FMA256_STEP(c9); FMA256_STEP(c10); FMA256_STEP(c11);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                             _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
    float out[8];
    _mm256_storeu_ps(out, s);
    sink_f = out[0];
}

__attribute__((target("avx512f,avx512bf16"))) static void bf16_loop(long iters) {
    __m512 acc[CHAINS];
    __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3380); /* 1.0, ~6e-8 */
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < iters; it++)
#pragma GCC unroll 24
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    __m512 s = acc[0];
    for (int i = 1; i < CHAINS; i++) s = _mm512_add_ps(s, acc[i]);
    sink_f = _mm512_reduce_add_ps(s);
}

/* Each dot product in asm: with the intrinsic over an array GCC 12 stores every accumulator to the
 * stack each iteration, and the loop measured the stores (~1.6x the fp32 rate instead of ~4x). */
#define VNNI_STEP(r) __asm__ volatile("vpdpbusd %1, %1, %0" : "+v"(r) : "v"(a))
__attribute__((target("avx512f,avx512vnni"))) static void vnni_loop(long iters) {
    __m512i a = _mm512_set1_epi8(1);
    __m512i c0 = _mm512_set1_epi32(0), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0, c9 = c0,
            c10 = c0, c11 = c0;
    for (long it = 0; it < 2 * iters; it++) { /* 2 x 12 = CHAINS products per iteration, as the other loops */
        VNNI_STEP(c0); VNNI_STEP(c1); VNNI_STEP(c2); VNNI_STEP(c3); VNNI_STEP(c4); VNNI_STEP(c5);
        VNNI_STEP(c6); VNNI_STEP(c7); VNNI_STEP(c8); VNNI_STEP(c9); VNNI_STEP(c10); VNNI_STEP(c11);
    }
    /* xor, not a sum: the accumulators may have wrapped, and a C int sum of them would overflow */
    __m512i s = _mm512_xor_si512(_mm512_xor_si512(_mm512_xor_si512(c0, c1), _mm512_xor_si512(c2, c3)),
                                 _mm512_xor_si512(_mm512_xor_si512(c4, c5), _mm512_xor_si512(c6, c7)));
    s = _mm512_xor_si512(s, _mm512_xor_si512(_mm512_xor_si512(c8, c9), _mm512_xor_si512(c10, c11)));
    sink_i = _mm_cvtsi128_si32(_mm512_castsi512_si128(s));
}

typedef struct peak_job {
    void (*loop)(long);
    long iters;
    pthread_barrier_t *start;
} peak_job;

static void *peak_thread(void *arg) {
    peak_job *j = arg;
    pthread_barrier_wait(j->start);
    j->loop(j->iters);
    return NULL;
}

/* Best of `rounds` runs of `iters` iterations on `threads` threads at once, as operations/s. */
static double timed_rate(void (*loop)(long), long iters, int threads, int rounds, double ops_per_iter) {
    double best = 0;
    for (int r = 0; r < rounds; r++) {
        pthread_t t[MAX_THREADS];
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
        peak_job job = {loop, iters, &start};
        int made = 0;
        for (; made < threads; made++)
            if (pthread_create(&t[made], NULL, peak_thread, &job) != 0) break;
        if (made < threads) { /* could not start them all: release those that did, measure nothing */
            for (int k = made; k < threads; k++) pthread_barrier_wait(&start);
        }
        double t0 = now_seconds();
        pthread_barrier_wait(&start);
        for (int i = 0; i < made; i++) pthread_join(t[i], NULL);
        double dt = now_seconds() - t0;
        pthread_barrier_destroy(&start);
        if (made == threads && dt > 0) {
            double rate = (double)threads * (double)iters * ops_per_iter / dt;
            if (rate > best) best = rate;
        }
    }
    return best;
}

/* Iterations for about `seconds` on one thread (calibrated on a short run). */
static long iterations_for(void (*loop)(long), double seconds) {
    long probe = 20000;
    double t0 = now_seconds();
    loop(probe);
    double dt = now_seconds() - t0;
    long n = dt > 0 ? (long)((double)probe * seconds / dt) : probe * 100;
    return n < probe ? probe : n;
}

/* GFLOP/s (GOP/s) of one thread x threads, and of all threads together. */
static void measure(void (*loop)(long), double ops_per_instr, int threads, double *scaled, double *direct) {
    double ops = ops_per_instr * CHAINS;
    long iters = iterations_for(loop, 0.025);
    double one = timed_rate(loop, iters, 1, 3, ops);
    *scaled = one * threads * 1e-9;
    if (direct) *direct = threads > 1 ? timed_rate(loop, iters, threads, 3, ops) * 1e-9 : one * 1e-9;
}

static pthread_mutex_t peak_lock = PTHREAD_MUTEX_INITIALIZER;
static ftl_cpu_peak cached[8];
static int n_cached;

ftl_status ftl_cpu_peak_measure(int threads, ftl_cpu_peak *peak) {
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    pthread_mutex_lock(&peak_lock);
    for (int i = 0; i < n_cached; i++)
        if (cached[i].threads == threads) {
            *peak = cached[i];
            pthread_mutex_unlock(&peak_lock);
            return FTL_OK;
        }
    ftl_cpu_peak p;
    memset(&p, 0, sizeof p);
    p.threads = threads;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        p.isa_fp32 = "avx512f";
        measure(fma512_loop, 32.0, threads, &p.fp32_gflops, &p.fp32_measured);
        if (__builtin_cpu_supports("avx512bf16")) measure(bf16_loop, 64.0, threads, &p.bf16_gflops, NULL);
        if (__builtin_cpu_supports("avx512vnni")) measure(vnni_loop, 128.0, threads, &p.int8_gops, NULL);
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        p.isa_fp32 = "avx2";
        measure(fma256_loop, 16.0, threads, &p.fp32_gflops, &p.fp32_measured);
    } else {
        p.isa_fp32 = "none";
    }
    if (n_cached < (int)(sizeof cached / sizeof cached[0])) cached[n_cached++] = p;
    pthread_mutex_unlock(&peak_lock);
    *peak = p;
    return FTL_OK;
}
