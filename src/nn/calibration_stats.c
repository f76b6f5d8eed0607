/* Calibration statistics in one pass (see calibration_stats.h). The scan runs on the plan's threads right
 * after the step that computed the values, while they are in cache; it was one thread and two passes
 * (range, then a histogram in doubles), 10x the int8 pass it serves. */
#include "nn/calibration_stats.h"
#include "util/alloc.h"
#include "util/line_shares.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX512_SCAN 1
#endif

/* How many of the largest values the percentile walk can reach among `total` values: the walk stops
 * at the k-th smallest, k = ceil(fraction * total), which is the (total - k + 1)-th largest. */
static uint64_t top_rank(uint64_t total, double fraction) {
    double need = fraction * (double)total;
    uint64_t k = need <= 0 ? 1 : (uint64_t)ceil(need);
    return k > total ? 1 : total - k + 1;
}

void nn_calibration_stats_init(nn_calibration_stats *s, uint64_t max_values, double fraction) {
    memset(s, 0, sizeof *s);
    s->min = INFINITY;
    if (max_values > 0 && fraction > 0 && fraction < 1) {
        s->tail_cap = top_rank(max_values, fraction);
        s->tail = ftl_xmalloc((size_t)(2 * s->tail_cap) * sizeof *s->tail);
        s->tail_floor = -1; /* below every |x|: all of them enter until the buffer first fills */
    }
}

void nn_calibration_stats_free(nn_calibration_stats *s) {
    free(s->tail);
    free(s->hist);
    s->tail = NULL;
    s->hist = NULL;
}

/* Moves the `keep` largest of v[0..n) to its front (in any order), quickselect with Hoare's partition. */
static void select_largest(float *v, size_t n, size_t keep) {
    size_t lo = 0, hi = n; /* the boundary lies in [lo, hi) */
    while (hi - lo > 1) {
        float a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi - 1];
        float pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b)); /* median of 3 */
        size_t i = lo, j = hi - 1;
        for (;;) { /* [lo, i) >= pivot, (j, hi) <= pivot */
            while (v[i] > pivot) i++;
            while (v[j] < pivot) j--;
            if (i >= j) break;
            float t = v[i];
            v[i] = v[j];
            v[j] = t;
            i++;
            j--;
        }
        size_t split = j + 1; /* [lo, split) >= pivot >= [split, hi) */
        if (split == lo || split == hi) split = lo + (hi - lo) / 2; /* cannot happen with Hoare's scheme; guard */
        if (keep < split) hi = split;
        else if (keep > split) lo = split;
        else return;
    }
}

/* Keeps the tail_cap largest values when the buffer is full: the rest are at most the new floor. */
static void tail_compact(nn_calibration_stats *s) {
    select_largest(s->tail, (size_t)s->tail_len, (size_t)s->tail_cap);
    s->tail_len = s->tail_cap;
    float floor = s->tail[0];
    for (uint64_t i = 1; i < s->tail_len; i++)
        if (s->tail[i] < floor) floor = s->tail[i];
    s->tail_floor = floor;
}

static void tail_append(nn_calibration_stats *s, const float *a, size_t n) {
    while (n) {
        size_t room = (size_t)(2 * s->tail_cap - s->tail_len), take = n < room ? n : room;
        memcpy(s->tail + s->tail_len, a, take * sizeof *a);
        s->tail_len += take;
        a += take;
        n -= take;
        if (s->tail_len == 2 * s->tail_cap) tail_compact(s);
    }
}

/* What one thread found in its share: range, NaNs, and the |x| above the threshold it started from. */
typedef struct scan_result {
    float absmax, min;
    uint64_t not_a_number;
    float *above;
    size_t n_above, cap_above;
} scan_result;

static void keep_above(scan_result *r, size_t more) {
    if (r->n_above + more <= r->cap_above) return;
    r->cap_above = (r->n_above + more) * 2;
    r->above = ftl_xrealloc(r->above, r->cap_above * sizeof *r->above);
}

static void scan_scalar(const float *x, size_t n, float threshold, scan_result *r) {
    float mx = r->absmax, mn = r->min;
    for (size_t i = 0; i < n; i++) {
        float v = x[i], a = fabsf(v);
        if (v != v) {
            r->not_a_number++;
            continue;
        }
        if (a > mx) mx = a;
        if (v < mn) mn = v;
        if (a > threshold) {
            keep_above(r, 1);
            r->above[r->n_above++] = a;
        }
    }
    r->absmax = mx;
    r->min = mn;
}

#ifdef HAVE_AVX512_SCAN
/* The same with 16 lanes: max/min ignore NaN lanes as the scalar compares do (they return the second
 * operand, the running value, when either is NaN), and values above the threshold are compress-stored. */
__attribute__((target("avx512f"))) static void scan_avx512(const float *x, size_t n, float threshold, scan_result *r) {
    __m512 mx = _mm512_set1_ps(r->absmax), mn = _mm512_set1_ps(r->min), thr = _mm512_set1_ps(threshold);
    uint64_t nan = 0;
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 live = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(live, x + i), a = _mm512_abs_ps(v);
        nan += (uint64_t)__builtin_popcount(_mm512_mask_cmp_ps_mask(live, v, v, _CMP_UNORD_Q));
        mx = _mm512_mask_max_ps(mx, live, a, mx);
        mn = _mm512_mask_min_ps(mn, live, v, mn);
        __mmask16 big = _mm512_mask_cmp_ps_mask(live, a, thr, _CMP_GT_OQ);
        if (big) {
            keep_above(r, 16);
            _mm512_mask_compressstoreu_ps(r->above + r->n_above, big, a);
            r->n_above += (size_t)__builtin_popcount(big);
        }
    }
    r->absmax = _mm512_reduce_max_ps(mx);
    r->min = _mm512_reduce_min_ps(mn);
    r->not_a_number += nan;
}
#endif

static void scan(const float *x, size_t n, float threshold, scan_result *r) {
#ifdef HAVE_AVX512_SCAN
    if (__builtin_cpu_supports("avx512f")) {
        scan_avx512(x, n, threshold, r);
        return;
    }
#endif
    scan_scalar(x, n, threshold, r);
}

/* A floor for a tensor's first values, from a strided sample: about twice tail_cap of the n values are
 * at least it. The stride is a prime that channel counts rarely hold, so the sample does not keep to a
 * few channels. Without it every value above the first buffer's weak floor entered the tail, and the
 * first batch cost 8x the rest. false when the sample is too small to tell. */
static bool sampled_floor(const float *x, size_t n, uint64_t cap, float *floor) {
    static const size_t strides[] = {61, 41, 17, 13, 11, 1};
    size_t stride = 1;
    for (size_t i = 0; i < sizeof strides / sizeof *strides; i++)
        if (strides[i] * 32 <= cap) { /* the sample's 2 * cap / stride largest: at least 64 */
            stride = strides[i];
            break;
        }
    float *sample = ftl_xmalloc((n / stride + 1) * sizeof *sample);
    size_t m = 0;
    for (size_t i = 0; i < n; i += stride) {
        float a = fabsf(x[i]);
        if (a == a) sample[m++] = a;
    }
    double k = ceil(2.0 * (double)cap * (double)m / (double)n);
    bool ok = k >= 32 && k < (double)m;
    if (ok) {
        select_largest(sample, m, (size_t)k);
        float f = sample[0];
        for (size_t i = 1; i < (size_t)k; i++)
            if (sample[i] < f) f = sample[i];
        *floor = f;
    }
    free(sample);
    return ok;
}

/* Scans x on `team` threads (shares of whole 64-byte lines), each part keeping |x| > threshold. */
static void scan_shared(const float *x, size_t n, float threshold, int team, const nn_calibration_stats *s,
                        scan_result *part) {
    for (int t = 0; t < team; t++) part[t] = (scan_result){.absmax = (float)s->absmax, .min = s->min};
    if (team == 1) {
        scan(x, n, threshold, &part[0]);
        return;
    }
#pragma omp parallel num_threads(team)
    {
        int t = omp_get_thread_num();
        size_t begin, end;
        ftl_line_share(n, t, omp_get_num_threads(), &begin, &end);
        if (begin < end) scan(x + begin, end - begin, threshold, &part[t]);
    }
}

static void merge_parts(nn_calibration_stats *s, scan_result *part, int team) {
    for (int t = 0; t < team; t++) {
        if (part[t].absmax > s->absmax) s->absmax = part[t].absmax;
        if (part[t].min < s->min) s->min = part[t].min;
        s->not_a_number += part[t].not_a_number;
        if (s->tail_cap) tail_append(s, part[t].above, part[t].n_above);
        free(part[t].above);
    }
}

void nn_calibration_stats_add(nn_calibration_stats *s, const float *x, size_t n, int threads) {
    s->count += n;
    int team = ftl_line_shares_team(n, threads);
    scan_result part[FTL_SHARES_MAX_TEAM];
    /* The first values of a large tensor: only those above a sampled floor enter, when at least tail_cap
     * do (everything left out is then below the tail_cap largest); else the way below. */
    float floor;
    if (s->tail_cap && s->tail_floor < 0 && s->tail_len == 0 && n > 2 * s->tail_cap &&
        sampled_floor(x, n, s->tail_cap, &floor)) {
        floor = nextafterf(floor, -1.0f); /* values equal to the sampled one enter too: a clipped activation
                                             (ReLU6) has many at its bound */
        scan_shared(x, n, floor, team, s, part);
        size_t entered = 0;
        for (int t = 0; t < team; t++) entered += part[t].n_above;
        if (entered >= s->tail_cap) {
            s->tail_floor = floor;
            merge_parts(s, part, team);
            return;
        }
        for (int t = 0; t < team; t++) free(part[t].above);
    }
    /* Until the buffer first fills, every value enters: slices of its size, so that the floor rises
     * early and the first chunk is not copied whole. */
    while (s->tail_cap && s->tail_floor < 0 && n) {
        size_t slice = (size_t)(2 * s->tail_cap - s->tail_len);
        if (slice > n) slice = n;
        scan_result r = {.absmax = (float)s->absmax, .min = s->min};
        scan(x, slice, s->tail_floor, &r);
        s->absmax = r.absmax;
        s->min = r.min;
        s->not_a_number += r.not_a_number;
        tail_append(s, r.above, r.n_above);
        free(r.above);
        x += slice;
        n -= slice;
    }
    /* then only values above the tail's floor as the scan starts can enter it */
    scan_shared(x, n, s->tail_cap ? s->tail_floor : INFINITY, team, s, part);
    merge_parts(s, part, team);
}

/* The histogram's bin of |x| over [0, absmax], exactly as the two-pass way computes it. */
static int bin_of(double absmax, float x) {
    double b = fabs((double)x) * (NN_CALIBRATION_HIST_BINS / absmax);
    return b >= NN_CALIBRATION_HIST_BINS - 1 ? NN_CALIBRATION_HIST_BINS - 1 : (int)b;
}

void nn_calibration_stats_add_histogram(nn_calibration_stats *s, const float *x, size_t n) {
    if (!s->hist) s->hist = ftl_xcalloc(NN_CALIBRATION_HIST_BINS, sizeof *s->hist);
    if (!(s->absmax > 0)) {
        s->hist[0] += n;
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (x[i] == x[i]) s->hist[bin_of(s->absmax, x[i])]++;
}

double nn_calibration_threshold(const nn_calibration_stats *s, double fraction) {
    if (fraction >= 1.0 || !(s->absmax > 0)) return s->absmax;
    uint64_t rank = top_rank(s->count, fraction);
    if (s->tail && rank <= s->tail_len) { /* the buffer holds exactly the tail_len largest values seen */
        float *copy = ftl_xmalloc((size_t)s->tail_len * sizeof *copy);
        memcpy(copy, s->tail, (size_t)s->tail_len * sizeof *copy);
        select_largest(copy, (size_t)s->tail_len, (size_t)rank);
        float v = copy[0]; /* the rank-th largest: the least of the `rank` largest */
        for (uint64_t i = 1; i < rank; i++)
            if (copy[i] < v) v = copy[i];
        free(copy);
        return s->absmax * (bin_of(s->absmax, v) + 1) / NN_CALIBRATION_HIST_BINS;
    }
    if (!s->hist) return NAN;
    uint64_t total = 0;
    for (int b = 0; b < NN_CALIBRATION_HIST_BINS; b++) total += s->hist[b];
    double need = fraction * (double)total, seen = 0;
    for (int b = 0; b < NN_CALIBRATION_HIST_BINS; b++) {
        seen += (double)s->hist[b];
        if (seen >= need) return s->absmax * (b + 1) / NN_CALIBRATION_HIST_BINS;
    }
    return s->absmax;
}
