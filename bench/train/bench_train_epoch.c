/* Times head-training epochs over cached features: N x D random features, C classes, Dropout +
 * Dense + softmax, nadam, validation on a tenth of N each epoch (the article's split). Also the
 * first and last epochs' times: the same work each epoch, so their ratio stays near 1 unless
 * something (denormal floats) slows later epochs down.
 * usage: bench_train_epoch N D C BATCH [EPOCHS] [THREADS] [DROPOUT]
 * Prints one JSON line: median epoch seconds and its split (data, head, validation). */
#include "ftl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s N D C BATCH [EPOCHS] [THREADS] [DROPOUT]\n", argv[0]);
        return 2;
    }
    int64_t n = atoll(argv[1]), d = atoll(argv[2]), c = atoll(argv[3]), b = atoll(argv[4]);
    int epochs = argc > 5 ? atoi(argv[5]) : 5, threads = argc > 6 ? atoi(argv[6]) : 0;
    double dropout = argc > 7 ? atof(argv[7]) : 0.5;
    int64_t nval = n / 10;
    ftl_train_set_threads(threads);
    float *x = malloc((size_t)(n + nval) * (size_t)d * sizeof(float));
    int32_t *y = malloc((size_t)(n + nval) * sizeof(int32_t));
    uint64_t s = 88172645463325252ull;
    for (int64_t i = 0; i < (n + nval) * d; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = (float)((s >> 40) * (1.0 / 16777216.0)) * 2.0f; /* ReLU-pooled features are >= 0 */
    }
    for (int64_t i = 0; i < n + nval; i++) y[i] = (int32_t)(i % c);
    ftl_memory_source tm, vm;
    ftl_memory_source_init(&tm, x, y, n, d, true, 42);
    ftl_memory_source_init(&vm, x + n * d, y + n, nval, d, false, 0);
    ftl_batch_source train = ftl_memory_source_as_batch_source(&tm), val = ftl_memory_source_as_batch_source(&vm);
    ftl_fit_config cfg = ftl_fit_config_default();
    cfg.batch_size = b;
    cfg.epochs = epochs;
    cfg.dropout = dropout;
    cfg.optimizer.lr = 0.004;
    ftl_trainer *t;
    ftl_fit_result r;
    if (ftl_trainer_init(&t, &cfg, d, c) != FTL_OK || ftl_trainer_fit(t, &train, &val, &r) != FTL_OK) {
        fprintf(stderr, "error: %s\n", ftl_last_error());
        return 1;
    }
    const ftl_epoch_log *h;
    size_t k = ftl_trainer_history(t, &h);
    double sec[64], head[64], data[64], valid[64];
    double first = k ? h[0].seconds : 0, last = k ? h[k - 1].seconds : 0;
    for (size_t i = 0; i < k && i < 64; i++) sec[i] = h[i].seconds, head[i] = h[i].head_s, data[i] = h[i].data_wait_s,
                                               valid[i] = h[i].validation_s;
    qsort(sec, k, sizeof *sec, cmp), qsort(head, k, sizeof *head, cmp), qsort(data, k, sizeof *data, cmp),
        qsort(valid, k, sizeof *valid, cmp);
    printf("{\"tool\":\"ftl\",\"n\":%lld,\"d\":%lld,\"classes\":%lld,\"batch\":%lld,\"threads\":%d,\"epochs\":%zu,"
           "\"epoch_s\":%.4f,\"head_s\":%.4f,\"data_s\":%.4f,\"val_s\":%.4f,\"min_epoch_s\":%.4f,\"first_epoch_s\":%.4f,"
           "\"last_epoch_s\":%.4f,\"last_over_first\":%.2f}\n",
           (long long)n, (long long)d, (long long)c, (long long)b, ftl_train_threads(), k, sec[k / 2], head[k / 2],
           data[k / 2], valid[k / 2], sec[0], first, last, first > 0 ? last / first : 0);
    ftl_trainer_free(t);
    ftl_memory_source_free(&tm);
    ftl_memory_source_free(&vm);
    free(x), free(y);
    return 0;
}
