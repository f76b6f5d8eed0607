/* Calibration statistics of one tensor: its range and, for the percentile method, the threshold of |x|
 * at a fraction of its values, as the smallest edge of a 2048-bin histogram over [0, absmax] below
 * which that fraction lies.
 *
 * Done in one pass: the largest |x| values are kept exactly (as many as the percentile can reach for the
 * most values the tensor will show, compacted by quickselect when their buffer fills), and the bin edge is read off the order statistic
 * the histogram's walk stops at, so the threshold equals the two-pass histogram's bit for bit. The
 * two-pass way (range, then histogram) stays for a tensor whose size is not known ahead. */
#ifndef FTL_NN_CALIBRATION_STATS_H
#define FTL_NN_CALIBRATION_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { NN_CALIBRATION_HIST_BINS = 2048 };

typedef struct nn_calibration_stats {
    double absmax;
    float min;
    uint64_t count;           /* values seen */
    uint64_t not_a_number;    /* NaNs seen (calibration refuses them) */
    float *tail;              /* exactly the tail_len largest |x| seen, in no order (room for 2 x tail_cap) */
    uint64_t tail_len, tail_cap; /* cap: how many the percentile can reach */
    float tail_floor;         /* when the buffer fills, the largest tail_cap stay: every |x| left out is <= this */
    uint64_t *hist;           /* the two-pass way's pass 2: NN_CALIBRATION_HIST_BINS counts */
} nn_calibration_stats;

/* One pass for the `fraction` percentile of at most max_values values (0: the minmax method, or the
 * two-pass way): keeps the tail that needs. */
void nn_calibration_stats_init(nn_calibration_stats *s, uint64_t max_values, double fraction);
void nn_calibration_stats_free(nn_calibration_stats *s);
/* Adds n values (the range, and the tail when one is kept), on up to `threads` threads. */
void nn_calibration_stats_add(nn_calibration_stats *s, const float *x, size_t n, int threads);
/* The two-pass way's pass 2, after the range is complete: histograms |x| over [0, absmax]. */
void nn_calibration_stats_add_histogram(nn_calibration_stats *s, const float *x, size_t n);
/* The threshold T of |x|: the maximum for fraction >= 1, else the histogram's bin edge (from the tail
 * or the histogram). NAN when neither can tell (more values came than the tail was sized for and no
 * histogram was made). */
double nn_calibration_threshold(const nn_calibration_stats *s, double fraction);

#endif
