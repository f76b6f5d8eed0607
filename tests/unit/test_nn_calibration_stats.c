/* The one-pass calibration statistics against the two-pass histogram they replace, written here from
 * its definition: absmax in pass 1, then 2048 bins over [0, absmax] in pass 2, the threshold the edge
 * of the first bin whose running count reaches the fraction. Bit-equal thresholds on spread values,
 * ties, zeros, one value, values fed in uneven pieces and on several threads, sized exactly or with room. */
#include "test.h"
#include "nn/calibration_stats.h"
#include "util/rng.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static double two_pass_threshold(const float *x, size_t n, double fraction) {
    double absmax = 0;
    for (size_t i = 0; i < n; i++)
        if (fabsf(x[i]) > absmax) absmax = fabsf(x[i]);
    if (fraction >= 1.0 || !(absmax > 0)) return absmax;
    uint64_t *hist = calloc(2048, sizeof *hist);
    for (size_t i = 0; i < n; i++) {
        double b = fabs((double)x[i]) * (2048 / absmax);
        hist[b >= 2047 ? 2047 : (int)b]++;
    }
    double need = fraction * (double)n, seen = 0, t = absmax;
    for (int b = 0; b < 2048; b++) {
        seen += (double)hist[b];
        if (seen >= need) {
            t = absmax * (b + 1) / 2048;
            break;
        }
    }
    free(hist);
    return t;
}

/* Feeds x in pieces of pseudo-random sizes (up to `piece`) and compares with the two-pass value. */
static void check_one_pass(const char *what, const float *x, size_t n, double fraction, uint64_t sized_for, size_t piece,
                           int threads) {
    nn_calibration_stats s;
    nn_calibration_stats_init(&s, sized_for, fraction);
    uint64_t r = n * 31 + piece;
    for (size_t done = 0; done < n;) {
        size_t k = 1 + (size_t)(ftl_splitmix64(&r) % piece);
        if (k > n - done) k = n - done;
        nn_calibration_stats_add(&s, x + done, k, threads);
        done += k;
    }
    double want = two_pass_threshold(x, n, fraction), got = nn_calibration_threshold(&s, fraction);
    if (got != want)
        ftl_test_fail(__FILE__, __LINE__, "%s (n %zu, fraction %g, sized for %llu, pieces <= %zu, %d threads): threshold %.9g, "
                      "two passes %.9g", what, n, fraction, (unsigned long long)sized_for, piece, threads, got, want);
    float mn = INFINITY;
    for (size_t i = 0; i < n; i++) mn = x[i] < mn ? x[i] : mn;
    CHECK(s.min == mn);
    CHECK(s.count == n);
    nn_calibration_stats_free(&s);
}

TEST(nn_calibration_one_pass_equals_two_pass_histogram) {
    enum { N = 300000 };
    float *x = malloc(N * sizeof *x);
    uint64_t r = 42;
    const char *kinds[] = {"spread", "heavy tail", "ties", "mostly zero", "non-negative"};
    for (int kind = 0; kind < 5; kind++) {
        for (size_t i = 0; i < N; i++) {
            double u = (double)(ftl_splitmix64(&r) >> 11) / 9007199254740992.0, v = u * 2 - 1;
            x[i] = kind == 0   ? (float)(v * 3)
                   : kind == 1 ? (float)(v / (1e-3 + (1 - fabs(v)) * (1 - fabs(v))))
                   : kind == 2 ? (float)((int)(v * 7)) * 0.25f
                   : kind == 3 ? (u < 0.99995 ? 0.0f : (float)v)
                               : (float)(u * u * 6);
        }
        for (double fraction = 0.5; fraction < 1; fraction = fraction < 0.99 ? 0.99 : fraction < 0.9999 ? 0.9999 : 1) {
            check_one_pass(kinds[kind], x, N, fraction, N, 5000, 1);
            check_one_pass(kinds[kind], x, N, fraction, 3 * N + 17, 200000, 2); /* room to spare, team scans */
            check_one_pass(kinds[kind], x, 1000, fraction, 1000, 7, 1);
        }
        check_one_pass(kinds[kind], x, N, 1.0, N, 5000, 2); /* minmax: the largest |x| */
    }
    float one = -2.5f, zeros[100] = {0};
    check_one_pass("one value", &one, 1, 0.9999, 1, 1, 1);
    check_one_pass("all zero", zeros, 100, 0.9999, 100, 13, 1);
    free(x);
}

/* A tensor's first values enter the tail only above a floor read off a strided sample (stride 61, 41,
 * 17, 13, 11 or 1): exact whatever the sample shows, a clipped activation's many ties at its bound,
 * large values hidden between the sample's points (too many enter), or only on them (too few enter:
 * the slow way), NaNs in the sample, values in order. */
TEST(nn_calibration_sampled_floor_keeps_the_threshold_exact) {
    enum { N = 1 << 20 };
    float *x = malloc(N * sizeof *x);
    uint64_t r = 7;
    const char *kinds[] = {"clipped at 6 (ReLU6)", "large values off the sample's points", "NaN on the sample's points",
                           "sorted ascending", "large values on the sample's points"};
    for (int kind = 0; kind < 5; kind++) {
        for (size_t i = 0; i < N; i++) {
            double u = (double)(ftl_splitmix64(&r) >> 11) / 9007199254740992.0;
            bool on_sample = i % 61 == 0 || i % 41 == 0 || i % 17 == 0 || i % 13 == 0 || i % 11 == 0;
            x[i] = kind == 0   ? fminf((float)(u * 9), 6.0f)
                   : kind == 1 ? (float)(on_sample ? u : 10 + u)
                   : kind == 2 ? (i % 61 == 0 ? NAN : (float)(u * 4 - 2))
                   : kind == 3 ? (float)i / N
                               : (float)(on_sample ? 10 + u : u); /* the floor lets too few in: the slow way */
        }
        for (int fraction_k = 0; fraction_k < 2; fraction_k++) {
            double fraction = fraction_k ? 0.9999 : 0.99;
            if (kind == 2) { /* NaNs are counted, not ranked: compare with the values left */
                nn_calibration_stats s;
                nn_calibration_stats_init(&s, N, fraction);
                nn_calibration_stats_add(&s, x, N, 2);
                float *clean = malloc(N * sizeof *clean);
                size_t m = 0;
                for (size_t i = 0; i < N; i++)
                    if (x[i] == x[i]) clean[m++] = x[i];
                CHECK(s.not_a_number == N - m);
                CHECK(!isnan(nn_calibration_threshold(&s, fraction))); /* the tail still answers */
                nn_calibration_stats t;
                nn_calibration_stats_init(&t, m, fraction);
                nn_calibration_stats_add(&t, clean, m, 2);
                CHECK(t.tail_floor >= 0); /* the sampled floor was taken */
                CHECK(nn_calibration_threshold(&t, fraction) == two_pass_threshold(clean, m, fraction));
                nn_calibration_stats_free(&s);
                nn_calibration_stats_free(&t);
                free(clean);
                continue;
            }
            nn_calibration_stats s; /* one piece: the sampled floor */
            nn_calibration_stats_init(&s, N, fraction);
            nn_calibration_stats_add(&s, x, N, 2);
            double want = two_pass_threshold(x, N, fraction), got = nn_calibration_threshold(&s, fraction);
            if (got != want)
                ftl_test_fail(__FILE__, __LINE__, "%s (fraction %g, one piece): threshold %.9g, two passes %.9g",
                              kinds[kind], fraction, got, want);
            nn_calibration_stats_free(&s);
            check_one_pass(kinds[kind], x, N, fraction, 8 * N, N / 3, 1); /* room to spare, three pieces */
        }
    }
    free(x);
}

TEST(nn_calibration_more_values_than_sized_for_falls_back_to_histogram) {
    enum { N = 50000 };
    float *x = malloc(N * sizeof *x);
    uint64_t r = 9;
    for (size_t i = 0; i < N; i++) x[i] = (float)((double)(ftl_splitmix64(&r) >> 40) / 16777216.0);
    nn_calibration_stats s;
    nn_calibration_stats_init(&s, N / 10, 0.9999); /* sized for a tenth of what comes */
    nn_calibration_stats_add(&s, x, N, 2);
    CHECK(isnan(nn_calibration_threshold(&s, 0.9999))); /* the tail cannot tell ... */
    nn_calibration_stats_add_histogram(&s, x, N);       /* ... the second pass can */
    CHECK(nn_calibration_threshold(&s, 0.9999) == two_pass_threshold(x, N, 0.9999));
    nn_calibration_stats_free(&s);
    x[N / 2] = NAN;
    nn_calibration_stats_init(&s, N, 0.9999);
    nn_calibration_stats_add(&s, x, N, 1);
    CHECK(s.not_a_number == 1);
    nn_calibration_stats_free(&s);
    free(x);
}
