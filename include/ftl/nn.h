/* ftl public API: ONNX backbones (import, CPU execution with oneDNN, feature extraction).
 *
 * A model is loaded once (parsed, checked, pruned to the feature tensor, optimised, compiled for
 * a batch size and precision) and then turns batches of dataset images into feature rows:
 *
 *     ftl_model_options o;  ftl_model_options_init(&o);  o.precision = FTL_NN_BF16;
 *     ftl_model *m;         FTL_TRY(ftl_model_load("xception.onnx", &o, &m));
 *     ftl_nn_preprocess pp; ftl_nn_preprocess_init(&pp, FTL_NN_SCALE_TF);
 *     float *f = malloc(count * ftl_model_get_info(m)->feature_dim * sizeof *f);
 *     FTL_TRY(ftl_model_extract_features(m, &pp, images, count, 299, f));
 *     ftl_model_free(m);
 */
#ifndef FTL_NN_H
#define FTL_NN_H

#include "ftl/base.h"
#include "ftl/device.h"
#include <stdbool.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ftl_model ftl_model;

typedef enum ftl_nn_precision {
    FTL_NN_FP32 = 0,
    FTL_NN_BF16,  /* bf16 activations and weights, fp32 accumulation; needs AVX512-BF16 or AMX to be fast */
    FTL_NN_TF32,  /* GPU only: fp32 tensors, products on TF32 tensor cores (10-bit mantissas) */
    FTL_NN_INT8,  /* CPU only: convolutions on u8/s8 data with calibrated scales (ftl_nn_calibrate), the
                     rest fp32; fast with AVX512-VNNI (or AVX-VNNI / AMX) */
} ftl_nn_precision;

typedef struct ftl_nn_int8_scales ftl_nn_int8_scales;

/* How fp32 convolutions are computed. AUTO: 3x3 stride-1 convolutions (group 1, no dilation) with
 * >= 64 input and output channels in multiples of 16 use oneDNN's Winograd kernels (F(4x4, 3x3): 4x
 * fewer multiplies; ResNet-50 +10-13% at batch 16) where they pay: unless the transformed weights
 * exceed 12x the activations of one run, so the choice depends on the micro-batch and image size,
 * and on CPUs without AVX-512 none is used. They differ from direct convolution by ~1e-6 relative,
 * and rows can then differ between batch sizes by as much. DIRECT: direct everywhere (rows
 * bit-identical for any batching). bf16 is always direct. */
typedef enum ftl_nn_conv_algorithm {
    FTL_NN_CONV_AUTO = 0,
    FTL_NN_CONV_DIRECT,
} ftl_nn_conv_algorithm;

/* The most images one forward pass may take (ftl_model_options.batch). */
#define FTL_MODEL_MAX_BATCH 4096

typedef struct ftl_model_options {
    const char *features_from;  /* tensor to extract; NULL or "": the graph's first output. The graph
                                   is pruned to what this tensor needs (e.g. drop a classifier). */
    ftl_nn_precision precision; /* default FTL_NN_FP32 */
    ftl_nn_conv_algorithm conv_algorithm; /* default FTL_NN_CONV_AUTO */
    int threads;                /* 0 (default): every core this process may use */
    int batch;                  /* the most images per forward pass; default 16 */
    int micro_batch;            /* 0 (default): auto, per layer: each layer runs the largest power of
                                   two <= batch images whose input + output activations fit in a third
                                   of the L3 cache (FTL_NN_CACHE_BYTES overrides the L3 size), at least
                                   2, never more than a later layer (ResNet-50 at batch 16: 2 images in
                                   the stem and layer1, 16 in layer4). > 0: that many images through
                                   every layer. See docs/nn.md. */
    const ftl_tensor_override *overrides; /* n_overrides initializers replaced before the graph is
                                   optimised (fine-tuned weights); each must name a float
                                   initializer of the same size */
    int n_overrides;
    ftl_device_kind device;     /* default FTL_DEVICE_AUTO: a usable GPU, else the CPU (see ftl/device.h) */
    int device_index;           /* CUDA: the GPU; -1 (default): the launcher's local rank */
    bool deterministic;         /* CUDA: only algorithms that give the same bits every run */
    const struct ftl_fine_tune_cut *bottom_of; /* not NULL: the model is the frozen bottom of this cut
                                   (after features_from) and its features are the boundary tensors,
                                   back to back per image (the rows ftl_finetune_forward_rows takes) */
    const struct ftl_fine_tune_cut *top_of; /* not NULL: the model is the frozen top of this cut: it
                                   reads a bottom model's rows (ftl_model_run, input_floats each) and
                                   gives features_from, as the full backbone does up to float
                                   reassociation (its identity differs, so caches keep them apart) */
    const ftl_nn_int8_scales *int8_scales; /* precision FTL_NN_INT8: the calibration (required); its
                                   hash is part of the model's identity */
    const char *expected_sha256; /* not NULL: the file's sha256 (with its external data) must be this;
                                   another is refused (FTL_E_INVALID_ARG) before the graph is searched
                                   for features_from or overrides, so the message names the real cause */
    const char *expected_sha256_of; /* the model file that records expected_sha256 (for that message) */
} ftl_model_options;

void ftl_model_options_init(ftl_model_options *o);
/* "fp32" / "bf16" / "tf32" / "int8". */
ftl_status ftl_nn_precision_parse(const char *text, ftl_nn_precision *precision);
const char *ftl_nn_precision_name(ftl_nn_precision precision);
/* Whether --precision bf16 can run on this CPU: oneDNN 2.6 has bf16 kernels from AVX-512 on
 * (native with AVX512-BF16 or AMX, emulated on plain AVX-512), none for AVX2. */
bool ftl_nn_cpu_bf16_available(void);
/* Whether this CPU has int8 dot-product instructions oneDNN uses (AVX512-VNNI, AVX-VNNI or AMX).
 * Without them int8 (--precision int8, QDQ models) is refused: oneDNN's kernels there saturate. */
bool ftl_nn_cpu_int8_fast(void);
/* "auto" / "direct". */
ftl_status ftl_nn_conv_algorithm_parse(const char *text, ftl_nn_conv_algorithm *algorithm);
const char *ftl_nn_conv_algorithm_name(ftl_nn_conv_algorithm algorithm);

/* ---- input preprocessing: dataset bytes (uint8 RGB, H x W x 3, S x S) -> model input ---- */

typedef enum ftl_nn_scale {
    FTL_NN_SCALE_TF = 0,  /* x = q/127.5 - 1 (Keras Xception/MobileNet preprocess_input; the article) */
    FTL_NN_SCALE_TORCH,   /* x = (q/255 - ImageNet mean) / ImageNet std (torchvision) */
    FTL_NN_SCALE_CUSTOM,  /* x = (q/255 - mean[c]) / std[c] with the given mean/std */
} ftl_nn_scale;

typedef enum ftl_nn_resize {
    FTL_NN_RESIZE_BILINEAR = 0, /* Pillow's Image.resize(BILINEAR): triangle filter, antialiased when shrinking */
} ftl_nn_resize;

typedef struct ftl_nn_preprocess {
    ftl_nn_scale scale;
    float mean[3], std[3];     /* RGB, in 0..1 units: x = (q/255 - mean[c]) / std[c] (set by init) */
    ftl_nn_resize resize;      /* applied when the image size differs from the model's input size */
} ftl_nn_preprocess;

ftl_status ftl_nn_preprocess_init(ftl_nn_preprocess *p, ftl_nn_scale scale);
/* For command lines: scale "tf" | "torch" (NULL keeps p's); mean / std "r,g,b" or one value
 * for all channels, in 0..1 units like torchvision's Normalize (NULL keeps); giving either makes
 * the scale custom. Errors name the bad value. */
ftl_status ftl_nn_preprocess_parse(ftl_nn_preprocess *p, const char *scale, const char *mean, const char *std);
const char *ftl_nn_scale_name(ftl_nn_scale scale);
/* A JSON object recording the whole input transformation for `m` fed image_size x image_size
 * images (scale, mean, std, formula, layout, channel order, resize filter or "none"), to be
 * stored with the features so a later run can check it. Caller frees. */
char *ftl_nn_preprocess_json(const ftl_nn_preprocess *p, const ftl_model *m, int image_size);

/* ---- int8 calibration (post-training static quantization) ---- */

typedef enum ftl_nn_calibration_method {
    FTL_NN_CALIBRATION_PERCENTILE = 0, /* threshold: |x| at the 99.99th percentile (outliers clipped) */
    FTL_NN_CALIBRATION_MINMAX,         /* threshold: the largest |x| seen */
} ftl_nn_calibration_method;

ftl_status ftl_nn_calibration_method_parse(const char *text, ftl_nn_calibration_method *method);
const char *ftl_nn_calibration_method_name(ftl_nn_calibration_method method);

/* Runs the fp32 model `path` (with `o`'s features_from, cut, threads and batch; its precision is
 * ignored) over `count` dataset images (uint8 RGB, image_size x image_size, back to back) and gives
 * the int8 scales of every tensor an int8 convolution reads: symmetric, per tensor, u8 where all
 * values seen were >= 0. Deterministic for the same images. images_hwc NULL: `count` synthetic
 * images (seeded noise) at the model's input size, for plans and speed, not accuracy. */
ftl_status ftl_nn_calibrate(const char *path, const ftl_model_options *o, const ftl_nn_preprocess *pp,
                            const uint8_t *images_hwc, int count, int image_size, ftl_nn_calibration_method method,
                            ftl_nn_int8_scales **scales);
/* The same, kept in cache_dir (NULL: no cache) under a key of the model's identity, feature tensor,
 * preprocessing, method and the images' bytes: a later call with the same inputs reads it back
 * (*reused_from, when not NULL, gets the file then, to free; else NULL). A cached file that does not
 * parse or match is ignored and replaced; one that cannot be written is warned about. */
ftl_status ftl_nn_calibrate_cached(const char *path, const ftl_model_options *o, const ftl_nn_preprocess *pp,
                                   const uint8_t *images_hwc, int count, int image_size, ftl_nn_calibration_method method,
                                   const char *cache_dir, ftl_nn_int8_scales **scales, char **reused_from);
void ftl_nn_int8_scales_free(ftl_nn_int8_scales *s);
/* {"method": ..., "rows": N, "hash": ..., "tensors": [[name, scale, unsigned], ...]}: what model
 * files, feature files and checkpoints record. Caller frees. */
char *ftl_nn_int8_scales_json(const ftl_nn_int8_scales *s);
/* Parses ftl_nn_int8_scales_json's text; a malformed table, or a scale that is not positive and
 * finite, is an error naming it (`where`: the file, for the message). */
ftl_status ftl_nn_int8_scales_from_json(const char *json, const char *where, ftl_nn_int8_scales **s);
/* The hex SHA-256 of the method, rows and every (name, scale, unsigned): the calibration's identity. */
const char *ftl_nn_int8_scales_hash(const ftl_nn_int8_scales *s);
const char *ftl_nn_int8_scales_method(const ftl_nn_int8_scales *s);
int ftl_nn_int8_scales_rows(const ftl_nn_int8_scales *s);
int ftl_nn_int8_scales_count(const ftl_nn_int8_scales *s);

/* ---- models ---- */

/* A model is not thread-safe (its plans own their buffers): use one per thread. */
ftl_status ftl_model_load(const char *path, const ftl_model_options *options, ftl_model **model);
void ftl_model_free(ftl_model *model);

typedef struct ftl_model_info {
    const char *path;
    const char *sha256;        /* hex of the model file followed by its external-data files */
    const char *identity;      /* what produced the features: sha256 when nothing is overridden, else
                                  the hex SHA-256 of sha256 and every override (name, size, values) */
    const char *input_name;
    const char *feature_name;  /* the tensor the features come from */
    int channels, height, width; /* the image the model takes */
    bool channels_last;        /* input is [N, H, W, C] (else [N, C, H, W]) */
    long long feature_dim;     /* floats per image */
    long long input_floats;    /* floats per input example (what ftl_model_run reads per row): channels x
                                  height x width for an image, the non-batch dims' product for others */
    long long params;          /* float weights used (incl. BatchNormalization statistics) */
    long long macs_per_image;  /* multiply-adds of Conv/Gemm/MatMul per image */
    ftl_nn_precision precision;
    ftl_nn_conv_algorithm conv_algorithm;
    int int8_convs;            /* precision int8: convolutions the main plan runs in int8 (the rest fp32) */
    int winograd_convs;        /* convolutions the main plan runs with Winograd kernels (a partial last
                                  batch's plan may use fewer) */
    int threads, batch, micro_batch; /* micro_batch: images per plan run (the largest per-layer one) */
    int micro_batch_min;       /* the smallest per-layer micro-batch (== micro_batch when uniform) */
    int fixed_batch;           /* > 0: the file's fixed batch is baked into its graph, so every pass runs
                                  exactly this many images (a partial batch is padded) */
    const char *backend;       /* e.g. "cpu (oneDNN 2.6.3, avx512_core_bf16)" */
    ftl_device_kind device_kind; /* where it runs: FTL_DEVICE_CPU or FTL_DEVICE_CUDA */
    const char *device;        /* ftl_device.description of it */
} ftl_model_info;

const ftl_model_info *ftl_model_get_info(const ftl_model *model);
/* ftl_model_info.identity of a backbone with file checksum sha256 (hex) and these overrides. */
void ftl_model_identity_of(const char *sha256, const ftl_tensor_override *overrides, int n_overrides, char out[65]);

/* Turns `count` images (image_size x image_size x 3 uint8 RGB, row-major, back to back) into
 * count x feature_dim floats, in batches of the model's batch size (the last may be partial;
 * rows do not depend on how images are batched). Resizes when image_size differs from the
 * model's input (pp->resize). */
ftl_status ftl_model_extract_features(ftl_model *model, const ftl_nn_preprocess *pp, const uint8_t *images_hwc,
                                      int count, int image_size, float *features);
/* Pipelined extraction (a GPU copies the next batch while it computes this one): starts exactly the
 * model's batch of images at its input size without waiting for the features, which
 * ftl_model_collect_features later writes (oldest started first). At most two batches are started
 * and not collected. *started is false (and nothing happened) where the model cannot (the CPU
 * backend, another count or size, two in flight): use ftl_model_extract_features then, which needs
 * every started batch collected first. */
ftl_status ftl_model_start_features(ftl_model *model, const ftl_nn_preprocess *pp, const uint8_t *images_hwc, int count,
                                    int image_size, bool *started);
ftl_status ftl_model_collect_features(ftl_model *model, float *features);
/* Runs already-preprocessed float32 input: count x info.input_floats floats (the input's per-example
 * shape, in its layout). */
ftl_status ftl_model_run(ftl_model *model, const float *input, int count, float *features);
/* Prints the compiled plan (one line per primitive: implementation, layouts) for tuning. */
void ftl_model_print_plan(const ftl_model *model, FILE *out);

/* `ftl inspect MODEL.onnx`: inputs, outputs, op counts, parameters, MACs per image, and what
 * the optimiser fuses. options may be NULL (features_from selects the feature tensor). */
ftl_status ftl_model_describe(const char *path, const ftl_model_options *options, FILE *out);
/* One line per computed tensor (name, shape, producing node): the names --features-from takes. */
ftl_status ftl_model_list_tensors(const char *path, FILE *out);

/* Where fine-tuning cuts a backbone: the last `last_convs` Conv nodes in execution order and every
 * node on a path from them to the feature tensor, or (last_convs 0) every node that depends on
 * tensor `from_tensor`. */
typedef struct ftl_fine_tune_cut {
    int last_convs;
    const char *from_tensor;
} ftl_fine_tune_cut;

/* `ftl inspect MODEL.onnx --fine-tune-last N` (or --fine-tune-from): the unfrozen nodes, the
 * parameters they train (BatchNormalization: scale and shift; its mean and variance stay fixed)
 * and the boundary tensors that cross the cut, with their floats per image. One line per item,
 * each starting with its kind ("unfrozen", "param", "boundary"), after a summary line. */
ftl_status ftl_model_describe_fine_tune(const char *path, const ftl_model_options *options, const ftl_fine_tune_cut *cut,
                                        FILE *out);
/* ---- fine-tuning: the unfrozen top of a backbone, trained (see docs/nn.md) ---- */

typedef struct ftl_finetune ftl_finetune;

typedef struct ftl_finetune_info {
    int unfrozen_nodes;
    int n_params;                   /* trained tensors */
    long long param_count;          /* trained values, the length of the parameter block */
    int n_boundary;                 /* frozen tensors crossing the cut: the plan's inputs */
    long long boundary_floats;      /* per image, all boundary tensors together */
    long long feature_dim;          /* floats per image out of the plan */
    int bf16_convs;                 /* options->precision bf16: convolutions running in bf16 (fp32 master weights) */
} ftl_finetune_info;

/* Compiles the training plan of `path` (its features tensor from options->features_from, its
 * initializers replaced by options->overrides) cut at `cut`, for batches of exactly `batch` images.
 * options->precision bf16: the convolutions compute in bf16 (inputs and weights rounded each step,
 * fp32 master weights, gradients and everything else); slow on CPUs without AVX512-BF16 or AMX. */
ftl_status ftl_finetune_open(const char *path, const ftl_model_options *options, const ftl_fine_tune_cut *cut, int batch,
                             ftl_finetune **out);
void ftl_finetune_free(ftl_finetune *f);
const ftl_finetune_info *ftl_finetune_get_info(const ftl_finetune *f);
/* Boundary tensor k: its name and floats per image. */
const char *ftl_finetune_boundary_name(const ftl_finetune *f, int k, long long *floats_per_image);
/* Trained tensor k: its ONNX initializer name, values, and offset in the parameter block. */
const char *ftl_finetune_param_name(const ftl_finetune *f, int k, long long *count, long long *offset);
/* boundary[k]: batch images of boundary tensor k; features: batch x feature_dim. */
ftl_status ftl_finetune_forward(ftl_finetune *f, const float *const *boundary, float *features);
/* After a forward: d(loss)/d(features) in; the gradient block (ftl_finetune_grads) out. */
ftl_status ftl_finetune_backward(ftl_finetune *f, const float *dfeatures);
/* The parameter block (an optimiser updates it in place) and the gradient block, param_count each. */
float *ftl_finetune_params(ftl_finetune *f);
const float *ftl_finetune_grads(const ftl_finetune *f);

/* Makes params/grads (param_count floats each, e.g. inside a trainer's one block with the head) the
 * plan's parameter and gradient storage, copying the current values into params. */
ftl_status ftl_finetune_bind(ftl_finetune *f, float *params, float *grads);
int ftl_finetune_batch(const ftl_finetune *f);
/* The training step's profiler: on, every step of the plan is timed from now on (the counts start
 * at zero); print: the time per forward + backward by node and work (convolution forward, backward
 * data and weights, other primitives, layout reorders, host loops), heaviest first. */
void ftl_finetune_set_profiling(ftl_finetune *f, bool on);
void ftl_finetune_print_profile(const ftl_finetune *f, FILE *out);
/* The same passes on n <= batch rows, each holding one image's boundary tensors back to back
 * (boundary_floats floats, in boundary order: what a bottom model cut at the boundary gives). */
ftl_status ftl_finetune_forward_rows(ftl_finetune *f, const float *rows, int n, float *features);
ftl_status ftl_finetune_backward_rows(ftl_finetune *f, const float *dfeatures, int n);

/* True when the file looks like an ONNX model (".onnx" name or a protobuf ModelProto start). */
bool ftl_model_path_is_onnx(const char *path);

#ifdef __cplusplus
}
#endif
#endif
