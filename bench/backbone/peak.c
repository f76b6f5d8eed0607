/* Peak arithmetic throughput of this CPU: AVX-512 fp32 FMA (vfmadd231ps zmm) and AVX512-BF16 dot
 * products (vdpbf16ps zmm, 64 FLOP each), 24 independent chains so the FMA latency is hidden.
 * Measured on one thread (best of 5) and multiplied by THREADS: on this shared VM a 2-thread run
 * loses whatever other tenants take (seen: 469 vs 536 GFLOP/s), one thread usually finds a free
 * core. Also prints the direct THREADS-thread measurement. The '% of peak' columns of the backbone
 * benchmark divide by the scaled numbers.
 * build: cc -O2 -mavx512f -mavx512bf16 -pthread peak.c -o peak;  run: ./peak THREADS */
#include <immintrin.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { CHAINS = 24 };
static long iters = 20000000;
static volatile float sink;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *fma_loop(void *arg) {
    (void)arg;
    __m512 acc[CHAINS], a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < iters; it++)
#pragma GCC unroll 24
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    __m512 s = acc[0];
    for (int i = 1; i < CHAINS; i++) s = _mm512_add_ps(s, acc[i]);
    sink = _mm512_reduce_add_ps(s);
    return NULL;
}

static void *bf16_loop(void *arg) {
    (void)arg;
    __m512 acc[CHAINS];
    __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3380); /* 1.0, ~6e-8 */
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < iters; it++)
#pragma GCC unroll 24
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    __m512 s = acc[0];
    for (int i = 1; i < CHAINS; i++) s = _mm512_add_ps(s, acc[i]);
    sink = _mm512_reduce_add_ps(s);
    return NULL;
}

static double run(void *(*fn)(void *), int threads, double flop_per_instr) {
    double best = 0;
    for (int r = 0; r < 5; r++) {
        pthread_t t[256];
        double t0 = now();
        for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, fn, NULL);
        for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
        double gf = (double)threads * iters * CHAINS * flop_per_instr / (now() - t0) * 1e-9;
        if (gf > best) best = gf;
    }
    return best;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (threads < 1 || threads > 256) return 2;
    if (argc > 2) iters = atol(argv[2]);
    /* CPUs without AVX512-BF16 (e.g. Intel before Cooper Lake) report 0 for the bf16 peak */
    bool has_bf16 = __builtin_cpu_supports("avx512bf16");
    double f1 = run(fma_loop, 1, 32.0), b1 = has_bf16 ? run(bf16_loop, 1, 64.0) : 0;
    double f = run(fma_loop, threads, 32.0), b = has_bf16 ? run(bf16_loop, threads, 64.0) : 0;
    printf("{\"threads\":%d,\"fp32_fma_gflops\":%.1f,\"bf16_dp_gflops\":%.1f,\"one_thread_fp32\":%.1f,"
           "\"one_thread_bf16\":%.1f,\"measured_fp32\":%.1f,\"measured_bf16\":%.1f}\n",
           threads, f1 * threads, b1 * threads, f1, b1, f, b);
    return 0;
}
