/* ftl public API: `ftl embed`, a dataset of images -> a dataset of feature vectors (the feature
 * cache). Every image goes once through the frozen backbone; the output keeps the source's row
 * order, labels and paths, and records what produced it (backbone sha256, feature tensor,
 * preprocessing, precision, source dataset fingerprint) so a stale cache is never reused. */
#ifndef FTL_EMBED_H
#define FTL_EMBED_H

#include "ftl/base.h"
#include "ftl/nn.h"
#include "ftl/dist.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct ftl_embed_options {
    const char *const *sources;    /* dataset files or folders (ftl prep output, Spark parts, ...) */
    int source_count;
    const char *backbone_path;     /* ONNX model */
    const char *output_path;       /* features .parquet */
    const char *features_from;     /* NULL: the graph output */
    const ftl_tensor_override *overrides; /* fine-tuned initializers (ftl/nn.h ftl_model_options) */
    int n_overrides;
    const ftl_fine_tune_cut *bottom_of; /* the frozen bottom's boundary tensors instead (ftl_model_options) */
    bool flip;                     /* mirror every image left-right first (the other orientation of --augment flip) */
    ftl_nn_precision precision;
    /* precision int8: the calibration to use (NULL: ftl_embed_run calibrates, ftl_embed_calibrate) */
    const ftl_nn_int8_scales *int8_scales;
    int calibration_rows;          /* images calibration runs on; default 512 (all when fewer) */
    const char *calibration_path;  /* another dataset to calibrate on; NULL: the sources */
    ftl_nn_calibration_method calibration_method; /* default percentile 99.99 */
    const char *calibration_cache_dir; /* keeps calibrations for the next run with the same inputs (NULL: none) */
    ftl_device_kind device;        /* default auto: a usable GPU, else the CPU (ftl/device.h) */
    bool deterministic;            /* GPU: deterministic algorithms only */
    ftl_nn_conv_algorithm conv_algorithm; /* default auto (Winograd where it pays; see ftl/nn.h) */
    ftl_nn_preprocess preprocess;  /* defaults to tf scaling (x/127.5 - 1) */
    int image_size;                /* 0: from the dataset metadata */
    const char *image_column;      /* default "image" */
    const char *label_column;      /* default "label" */
    int label_offset;              /* added to every label (-1 for 1-based labels); recorded, part of the cache key */
    const char *source_fingerprint; /* ftl_dataset_fingerprint of sources when the caller has it (it reads every byte) */
    int batch;                     /* images per forward pass; default 32 */
    int threads;                   /* backbone threads; 0 = all cores */
    int loader_threads;            /* background readers; 0 = the loader's default (1, or a core each to decode
                                      a dataset that keeps encoded images) */
    bool overwrite;
    bool show_progress;
    int shard, num_shards;         /* embed only this shard's rows (data parallelism) */
    int64_t row_begin, row_end;    /* row_end > 0: embed only global rows [row_begin, row_end) */
    const ftl_collectives *collectives; /* ftl embed under mpirun: each rank embeds its shard and rank 0
                                          writes OUT (NULL: one process) */
} ftl_embed_options;

void ftl_embed_options_init(ftl_embed_options *options);

/* The int8 calibration of o's backbone (its features_from, cut and threads): o->calibration_rows
 * images of o->calibration_path (or the sources) in 8 windows at seeded places spread over the
 * rows, run through the fp32 model. Under o->collectives rank 0 computes it and broadcasts it, so
 * every rank count gets the same scales. A set with fewer rows than a batch, or of another image
 * size than the sources, is an error naming it. */
ftl_status ftl_embed_calibrate(const ftl_embed_options *o, ftl_nn_int8_scales **scales);

typedef struct ftl_embed_summary {
    int64_t rows;
    int64_t feature_dim;
    double seconds;            /* whole run */
    double compute_seconds;    /* inside the backbone */
    double wait_seconds;       /* waiting for the loader */
    double gpu_util_percent, gpu_memory_bytes; /* on a GPU: its mean busy % and most memory in use (NVML); else NaN */
    int64_t batches, pipelined_batches; /* forward passes; those started while the previous one computed (GPU) */
    bool paths_are_text;       /* the path column was written as a STRING (ftl_loader_paths_are_text) */
    char backbone_sha256[65];
    char dataset_fingerprint[65];
} ftl_embed_summary;

ftl_status ftl_embed_run(const ftl_embed_options *options, ftl_embed_summary *summary);

/* A fingerprint of a dataset's content (sha256 over each file's size, Parquet footer and CRC-32
 * of all its bytes): any change to the data changes it; a byte-identical rewrite (same prep,
 * same seed) or a renamed copy keeps it. */
/* Features of images in memory: count images of height x width x 3 uint8 RGB, back to back, into
 * count x feature_dim floats, in the model's batches (checking ftl_interrupt between them). An image
 * that is not square is first padded to a square of its longer side, centered on white, as ftl prep
 * pads its thumbnails; then resized to the model's input like a dataset's images. */
ftl_status ftl_embed_images(ftl_model *model, const ftl_nn_preprocess *pp, const uint8_t *images_hwc, int64_t count,
                            int height, int width, float *features);
/* Features of image files (JPEG, PNG): each decoded and made size x size by ftl prep's recipe
 * (thumbnail, pad), as in a dataset prepped at that size. An unreadable file is an error naming it. */
ftl_status ftl_embed_files(ftl_model *model, const ftl_nn_preprocess *pp, const char *const *paths, int64_t count,
                           int size, float *features);
/* Features and labels of every row of an image dataset (ftl prep's Parquet), in file order; the
 * caller frees *features and *labels. */
ftl_status ftl_embed_dataset(ftl_model *model, const ftl_nn_preprocess *pp, const char *path, float **features,
                             int32_t **labels, int64_t *rows);

ftl_status ftl_dataset_fingerprint(const char *const *sources, int source_count, char hex[65]);

#endif
