/* ftl public API: training the softmax head on feature vectors, and the model/checkpoint files.
 *
 * Pieces, from the bottom up:
 *   safetensors  reader/writer of the safetensors layout (model files, checkpoints)
 *   ftl_head     Dropout -> Dense(D -> C) -> softmax cross-entropy, forward/backward on batches
 *   optimizer    nadam (Keras), adam, sgd (torch semantics); LR scaling and warmup
 *   early stop   Keras EarlyStopping semantics; the best weights are restored at the end
 *   model file   MODEL.ftl: head tensors + metadata (class names, backbone, args, metrics)
 *   trainer      the fit loop over a batch source, with validation, logs, checkpoints, resume
 *
 * Memory layout (llm.c style): the head's parameters are ONE float block `params` =
 * [kernel D x C row-major | bias C]; gradients and each optimizer slot (m, v) are blocks of the
 * same length and layout. Zeroing, allreduce, broadcast and checkpointing are one call each.
 * The kernel is [D x C] (Keras' Dense layout; torch's Linear.weight is its transpose), so both
 * the forward GEMM (X W) and the weight gradient (X^T dZ) stream contiguous rows of C floats.
 *
 * Determinism: with the same seed, data order and machine type (SIMD path), training is
 * bit-identical for any thread count, and a run resumed from a checkpoint ends with exactly the
 * parameters of an uninterrupted one. */
#ifndef FTL_TRAIN_H
#define FTL_TRAIN_H

#include "ftl/base.h"
#include "ftl/dist.h"
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Threads for the head's GEMMs and optimizer (0 = one per available core, the default). */
void ftl_train_set_threads(int threads);
int ftl_train_threads(void);

/* A string key/value pair (file metadata). */
typedef struct ftl_kv {
    const char *key, *value;
} ftl_kv;

/* ======================================================================== safetensors
 * File: u64 little-endian N, then N bytes of JSON header {"name": {"dtype": "F32", "shape": [..],
 * "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v"}}, then the data section.
 * Offsets are relative to the data section; tensors cover it exactly, without gaps or overlap.
 * ftl's writer adds the metadata entry FTL_SAFETENSORS_META_CRC32C: a JSON object (as a string,
 * as safetensors wants metadata values) of each tensor's name and the CRC32C of its bytes as 8
 * lowercase hex digits, e.g. {"head.kernel":"0a1b2c3d","head.bias":"e3069283"}. */
#define FTL_SAFETENSORS_META_CRC32C "ftl.crc32c"

typedef enum ftl_dtype {
    FTL_DTYPE_F32, FTL_DTYPE_F64, FTL_DTYPE_F16, FTL_DTYPE_BF16,
    FTL_DTYPE_I8, FTL_DTYPE_I16, FTL_DTYPE_I32, FTL_DTYPE_I64,
    FTL_DTYPE_U8, FTL_DTYPE_U16, FTL_DTYPE_U32, FTL_DTYPE_U64,
    FTL_DTYPE_BOOL,
} ftl_dtype;

size_t ftl_dtype_size(ftl_dtype dtype);
const char *ftl_dtype_name(ftl_dtype dtype); /* "F32", ... as in the safetensors header */

enum { FTL_SAFETENSORS_MAX_DIMS = 8 };

typedef struct ftl_safetensors_tensor {
    const char *name;
    ftl_dtype dtype;
    int ndim;
    int64_t shape[FTL_SAFETENSORS_MAX_DIMS];
    uint64_t element_count;
    uint64_t byte_size;
    const uint8_t *data; /* inside the file's buffer; not necessarily aligned: copy out with memcpy */
} ftl_safetensors_tensor;

typedef struct ftl_safetensors ftl_safetensors;

/* Reads and validates the whole file: header length vs file size, JSON, dtypes, shapes vs byte
 * lengths, offsets inside the data section, no overlaps or holes. Errors name the file and the
 * tensor. Never trusts a size from the file before checking it against the file size. */
ftl_status ftl_safetensors_open(const char *path, ftl_safetensors **out);
/* The same from a buffer (copied); `name` is used in error messages. */
ftl_status ftl_safetensors_open_buffer(const void *data, size_t size, const char *name, ftl_safetensors **out);
void ftl_safetensors_close(ftl_safetensors *st);
const char *ftl_safetensors_path(const ftl_safetensors *st);
size_t ftl_safetensors_tensor_count(const ftl_safetensors *st);
const ftl_safetensors_tensor *ftl_safetensors_tensor_at(const ftl_safetensors *st, size_t index);
const ftl_safetensors_tensor *ftl_safetensors_find(const ftl_safetensors *st, const char *name);
/* Metadata value for key, or NULL. */
const char *ftl_safetensors_metadata(const ftl_safetensors *st, const char *key);
size_t ftl_safetensors_metadata_count(const ftl_safetensors *st);
ftl_kv ftl_safetensors_metadata_at(const ftl_safetensors *st, size_t index);
/* Copies tensor `name` into dst after checking it exists and has this dtype and shape
 * (shape entries < 0 match any size; ndim < 0 skips the shape check) and its bytes against its
 * CRC32C (ftl_safetensors_verify); dst_bytes must equal its byte size. Errors: "FILE: tensor NAME:
 * expected F32 [257], found F32 [256]". */
ftl_status ftl_safetensors_read(const ftl_safetensors *st, const char *name, ftl_dtype dtype, int ndim,
                                const int64_t *shape, void *dst, size_t dst_bytes);
/* Whether the file records a CRC32C of each tensor (files ftl wrote before it recorded them, and
 * other writers' files, do not). With the entry, every tensor has a valid CRC (else open failed). */
bool ftl_safetensors_has_checksums(const ftl_safetensors *st);
/* The CRC32C recorded for tensor t (one of this file's); false when the file records none. */
bool ftl_safetensors_checksum(const ftl_safetensors *st, const ftl_safetensors_tensor *t, uint32_t *expected);
/* Checks tensor t's bytes against their recorded CRC32C, once per tensor of an open file (for a
 * caller that reads t->data itself): FTL_E_FORMAT "FILE: tensor NAME is damaged: its N bytes have
 * CRC32C X, the file recorded Y ...". A file without checksums passes, with a note (once per path
 * in a process) that it cannot be verified. */
ftl_status ftl_safetensors_verify(const ftl_safetensors *st, const ftl_safetensors_tensor *t);
/* ftl_safetensors_verify of every tensor (files that are copied or described, not read tensor by tensor). */
ftl_status ftl_safetensors_verify_all(const ftl_safetensors *st);

typedef struct ftl_safetensors_writer ftl_safetensors_writer;

ftl_safetensors_writer *ftl_safetensors_writer_new(void);
void ftl_safetensors_writer_free(ftl_safetensors_writer *w);
/* Adds a tensor; `data` (little-endian, element_count * dtype size bytes) is borrowed until write.
 * Tensors are written in the order added. Duplicate names fail at write time. */
void ftl_safetensors_writer_add(ftl_safetensors_writer *w, const char *name, ftl_dtype dtype, int ndim,
                                const int64_t *shape, const void *data);
/* Sets (or replaces) a metadata entry; both strings are copied. */
void ftl_safetensors_writer_set_metadata(ftl_safetensors_writer *w, const char *key, const char *value);
/* Writes atomically: temporary name, fsync, rename (an interrupted write leaves no partial file). */
ftl_status ftl_safetensors_writer_write(ftl_safetensors_writer *w, const char *path);
/* no_replace: the write never replaces a file that appeared at `path` meanwhile (another run's):
 * FTL_E_EXISTS instead, this file kept beside it under a name the error gives. Default: replace. */
void ftl_safetensors_writer_set_no_replace(ftl_safetensors_writer *w, bool no_replace);

/* ======================================================================== head */

/* Exact sums over examples; add them across batches and ranks (allreduce one double[3]).
 * Counts are integers held exactly in doubles (below 2^53). */
typedef struct ftl_metric_counts {
    double loss_sum; /* sum of per-example cross-entropy (natural log) */
    double correct;  /* examples whose argmax (first maximum) is the label */
    double count;    /* examples */
} ftl_metric_counts;

static inline double ftl_metric_loss(const ftl_metric_counts *m) { return m->count > 0 ? m->loss_sum / m->count : 0.0; }
static inline double ftl_metric_accuracy(const ftl_metric_counts *m) { return m->count > 0 ? m->correct / m->count : 0.0; }

struct ftl_head_workspace;

typedef struct ftl_head {
    int64_t dim;        /* D, features per example */
    int64_t classes;    /* C */
    size_t param_count; /* D*C + C */
    float dropout;      /* drop probability for training batches (inverted dropout), 0 = none */
    float label_smoothing; /* training batches' targets (1 - e) onehot + e / C (PyTorch/Keras semantics); 0 = none */
    float *params;      /* the parameter block: kernel then bias */
    float *kernel;      /* = params, [D x C] row-major */
    float *bias;        /* = params + D*C, [C] */
    float *grads;       /* the gradient block, same layout; written by ftl_head_train_batch */
    float *grad_kernel, *grad_bias;
    bool borrowed_blocks; /* params/grads are part of a trainer's larger block (fine-tuning) */
    struct ftl_head_workspace *ws;
} ftl_head;

/* Allocates a head with zero parameters. Fails on D or C < 1 or sizes that overflow. */
ftl_status ftl_head_init(ftl_head *head, int64_t dim, int64_t classes);
void ftl_head_free(ftl_head *head);
/* Keras/torch default init: kernel ~ U(-a, a), a = sqrt(6 / (D + C)) (Glorot uniform); bias 0.
 * Deterministic for a seed (xoshiro256**). */
void ftl_head_init_glorot(ftl_head *head, uint64_t seed);

/* Which random draws a batch's rows get: dropout masks are keyed by (seed, step, position of the
 * row in the global batch), never by rank or thread, so the same global batch gets the same
 * masks on any number of ranks. positions NULL: row i is at position_base + i. */
typedef struct ftl_row_draws {
    uint64_t seed;
    int64_t step;
    const uint32_t *positions;
    int64_t position_base;
} ftl_row_draws;

/* One training batch: x [n x D] row-major (n may be 0: this rank holds none of the global
 * batch's rows), labels [n] in [0, C). Applies dropout (when head->dropout > 0, masks from
 * `draws`), computes logits and the gradient of (sum of the n rows' cross-entropies, against
 * smoothed targets when head->label_smoothing > 0) x grad_scale into head->grads (overwritten).
 * With grad_scale = 1 / (rows of the global batch),
 * the sum of every rank's gradient is the global batch's mean gradient. Adds the batch's loss
 * sum / correct / count to *counts (metrics of the training-mode forward pass, as Keras
 * reports). A label out of range fails, naming it. */
ftl_status ftl_head_train_batch(ftl_head *head, const float *x, const int32_t *labels, size_t n,
                                const ftl_row_draws *draws, float grad_scale, ftl_metric_counts *counts);
/* After ftl_head_train_batch on the same n rows: the gradient of the same scaled loss with respect to
 * the input rows x [n x D] (through the dropout masks, so `draws` must be that batch's), which
 * fine-tuning sends back into the unfrozen part of the backbone. */
ftl_status ftl_head_input_grad(ftl_head *head, size_t n, const ftl_row_draws *draws, float *dx);
/* Evaluation forward pass (no dropout): adds loss/correct/count to *counts. */
ftl_status ftl_head_evaluate_batch(ftl_head *head, const float *x, const int32_t *labels, size_t n,
                                   ftl_metric_counts *counts);
/* Every label in [0, classes), or an error naming the first that is not (the head's own check,
 * for engines that train it elsewhere). */
ftl_status ftl_head_check_labels(int64_t classes, const int32_t *labels, size_t n);
/* Softmax probabilities [n x C] (no dropout). logits_out may be NULL. */
ftl_status ftl_head_predict(ftl_head *head, const float *x, size_t n, float *probs_out, float *logits_out);

/* ---- flip test-time augmentation (--tta flip) ----
 * A row's prediction is the mean of the class probabilities of the image and of its mirror image
 * (left-right), as timm's and fastai's TTA average them. It is expressed as logits log(mean p): their
 * softmax is the mean, so argmax, top-5, the log-sum-exp loss (-log mean p of the label) and the
 * probabilities all read the averaged prediction unchanged. */
typedef enum ftl_tta {
    FTL_TTA_AS_TRAINED = 0, /* eval/predict: what the model records (ftl.tta), none for older models */
    FTL_TTA_NONE,
    FTL_TTA_FLIP,
} ftl_tta;
#define FTL_MODEL_META_TTA "ftl.tta" /* "flip" or "none": how train's validation scored, and eval/predict's default */
/* "none" | "flip" (and "model" for FTL_TTA_AS_TRAINED where allow_as_trained). */
ftl_status ftl_tta_parse(const char *text, bool allow_as_trained, ftl_tta *out);
const char *ftl_tta_name(ftl_tta tta);
/* [n x c] logits of the image (za) and of its mirror (zb) -> out = log((softmax(za) + softmax(zb)) / 2),
 * computed in double, never -inf (a probability below DBL_MIN counts as DBL_MIN). out may alias za. */
void ftl_tta_mean_logits(const float *za, const float *zb, size_t n, size_t c, float *out);
/* ftl_head_evaluate_batch with flip TTA: x and x_mirrored are the features of the same n rows. */
ftl_status ftl_head_evaluate_batch_tta(ftl_head *head, const float *x, const float *x_mirrored, const int32_t *labels,
                                       size_t n, ftl_metric_counts *counts);
/* ftl_head_predict with flip TTA: probabilities are the mean, logits_out the TTA logits above. */
ftl_status ftl_head_predict_tta(ftl_head *head, const float *x, const float *x_mirrored, size_t n, float *probs_out,
                                float *logits_out);

/* ======================================================================== optimizers */

typedef enum ftl_optimizer_kind {
    FTL_OPTIMIZER_NADAM,
    FTL_OPTIMIZER_ADAM,
    FTL_OPTIMIZER_SGD,
} ftl_optimizer_kind;

typedef struct ftl_optimizer_config {
    ftl_optimizer_kind kind;
    double lr;             /* base learning rate (before scaling and warmup) */
    double beta1, beta2;   /* nadam/adam */
    double eps;            /* nadam/adam; added to sqrt(v_hat) */
    double momentum_decay; /* nadam: mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay)) */
    double momentum;       /* sgd */
    bool nesterov;         /* sgd */
    double weight_decay;   /* L2 added to the gradient (torch semantics), all parameters; 0 = off */
} ftl_optimizer_config;

/* Defaults: nadam lr 0.001, betas 0.9/0.999, eps 1e-7, momentum_decay 0.004 (Keras Nadam);
 * adam lr 0.001, betas 0.9/0.999, eps 1e-7 (Keras' eps; torch's default is 1e-8);
 * sgd lr 0.01, momentum 0, no nesterov (Keras SGD). */
ftl_optimizer_config ftl_optimizer_config_default(ftl_optimizer_kind kind);
const char *ftl_optimizer_kind_name(ftl_optimizer_kind kind);
ftl_status ftl_optimizer_kind_parse(const char *name, ftl_optimizer_kind *out);

typedef struct ftl_optimizer {
    ftl_optimizer_config config;
    size_t param_count;
    int slot_count;      /* state vectors: 2 for nadam/adam (m, v), 1 for sgd with momentum, else 0 */
    float *state;        /* ONE block [slot_count x param_count] */
    float *m, *v;        /* named slots in the block (m = momentum buffer for sgd); NULL if absent */
    int64_t step;        /* completed steps */
    double mu_product;   /* nadam: prod of mu_1..mu_step */
    struct ftl_pool_site *pool_site; /* internal: whether threads pay for the update */
} ftl_optimizer;

ftl_status ftl_optimizer_init(ftl_optimizer *opt, const ftl_optimizer_config *config, size_t param_count);
/* State vectors the optimizer keeps (what ftl_optimizer.slot_count will be). */
int ftl_optimizer_slot_count(const ftl_optimizer_config *config);
void ftl_optimizer_free(ftl_optimizer *opt);
/* One update of params from grads with learning rate lr (the schedule's value for this step). */
void ftl_optimizer_step(ftl_optimizer *opt, float *params, const float *grads, double lr);

/* One step's scalars, computed in double and rounded to float once: the CPU's update and a
 * device's (ftl_head_engine) read the same values, so both apply the same IEEE operations. */
typedef struct ftl_optimizer_update {
    ftl_optimizer_kind kind;
    float wd;                   /* weight decay */
    float b1, omb1, b2, omb2;   /* beta1, 1 - beta1, beta2, 1 - beta2 */
    float inv_bc2_sqrt, eps;    /* 1 / sqrt(1 - beta2^t) */
    float c_grad, c_m;          /* nadam: the gradient's and the momentum's coefficients; adam: c_m = -lr / bc1 */
    float momentum, neg_lr;     /* sgd */
    bool nesterov, has_momentum;
} ftl_optimizer_update;

/* The next step's scalars for learning rate lr; advances opt's counters (step, mu_product).
 * ftl_optimizer_step = this + ftl_optimizer_apply. */
void ftl_optimizer_next_update(ftl_optimizer *opt, double lr, ftl_optimizer_update *update);
/* Applies an update to params and opt's state slots. */
void ftl_optimizer_apply(ftl_optimizer *opt, const ftl_optimizer_update *update, float *params, const float *grads);

/* Per element, in this order and without fused multiply-adds (g = gradient, p = parameter):
 *   all:   g = g + wd * p                                   (when wd != 0)
 *   nadam: m = m * b1 + g * omb1;  v = v * b2 + omb2 * (g * g);  r = 1 / (sqrt(v) * inv_bc2_sqrt + eps)
 *          p = p + c_grad * (g * r);  p = p + c_m * (m * r)
 *   adam:  m, v as nadam;  p = p + c_m * (m / (sqrt(v) * inv_bc2_sqrt + eps))
 *   sgd:   with momentum: m = m * momentum + g;  g = nesterov ? g + momentum * m : m
 *          p = p + neg_lr * g
 * A device's kernel that follows it gives the CPU's bits. */

/* ======================================================================== head engines */

/* Where the head trains when not on the CPU: a GPU (ftl/device.h ftl_device_head_engine_create).
 * The trainer's host blocks stay the record: it loads them into the engine when fitting starts
 * and stores them back after each epoch's steps, so validation, early stopping, checkpoints and a
 * resume read the same values as on the CPU. */
typedef struct ftl_head_engine {
    void *ctx;
    int64_t dim, classes;       /* the head it trains (the trainer checks them against its own) */
    char description[256];      /* "cuda:0 NVIDIA H200: cuBLAS GEMMs and ftl's kernels; NCCL 2.27.3" */
    /* params [param_count], then the optimizer's state [slots x param_count] */
    ftl_status (*load)(void *ctx, const float *params, const float *opt_state, int slots);
    ftl_status (*store)(void *ctx, float *params, float *opt_state, int slots);
    /* As ftl_head_train_batch (the same draws and scaling); the gradient stays on the engine. */
    ftl_status (*train_batch)(void *ctx, const float *x, const int32_t *labels, size_t n, const ftl_row_draws *draws,
                              float dropout, float label_smoothing, float grad_scale, ftl_metric_counts *counts);
    /* The ranks' gradients summed in place on the engine (NCCL); NULL: the trainer copies them
     * to the host for the collectives and back. */
    ftl_status (*allreduce)(void *ctx);
    ftl_status (*grads_to_host)(void *ctx, float *grads);
    ftl_status (*grads_from_host)(void *ctx, const float *grads);
    ftl_status (*optimizer_step)(void *ctx, const ftl_optimizer_update *update);
    /* As ftl_head_evaluate_batch. */
    ftl_status (*evaluate_batch)(void *ctx, const float *x, const int32_t *labels, size_t n, ftl_metric_counts *counts);
    void (*destroy)(void *ctx);
} ftl_head_engine;

typedef enum ftl_lr_scaling {
    FTL_LR_SCALE_NONE,
    FTL_LR_SCALE_LINEAR, /* lr * B / B0 (Goyal et al.) */
    FTL_LR_SCALE_SQRT,   /* lr * sqrt(B / B0) (Krizhevsky) */
} ftl_lr_scaling;

ftl_status ftl_lr_scaling_parse(const char *name, ftl_lr_scaling *out); /* "none" | "linear" | "sqrt" */

/* The per-epoch decay after scaling (--lr-schedule), stepped once per epoch (timm's default, and
 * PyTorch's schedulers as usually stepped), e = 0-based epoch, T = the run's epochs:
 *   constant   target
 *   cosine     min_lr + (target - min_lr) (1 + cos(pi e / T)) / 2  (torch CosineAnnealingLR, Keras CosineDecay)
 *   step       target gamma^floor(e / step_epochs)                   (torch StepLR)
 *   plateau    Keras ReduceLROnPlateau on the early-stopping monitor: after `patience` epochs in a row
 *              without improving by more than its min_delta, lr = max(lr factor, min_lr) (torch's
 *              ReduceLROnPlateau with patience - 1 and an absolute threshold) */
typedef enum ftl_lr_schedule_kind { FTL_LR_CONSTANT, FTL_LR_COSINE, FTL_LR_STEP, FTL_LR_PLATEAU } ftl_lr_schedule_kind;

typedef struct ftl_lr_decay {
    ftl_lr_schedule_kind kind;
    double min_lr;            /* cosine's and plateau's floor (--min-lr); not scaled */
    int64_t step_epochs;      /* step */
    double gamma;
    int patience;             /* plateau */
    double factor;
} ftl_lr_decay;

/* "constant" | "cosine" | "step:EPOCHS:GAMMA" | "plateau:PATIENCE:FACTOR[:MIN_LR]"; out->min_lr on
 * entry is the floor to keep (--min-lr) unless the spec names one. `option` names the flag in errors. */
ftl_status ftl_lr_decay_parse(const char *spec, const char *option, ftl_lr_decay *out);
void ftl_lr_decay_describe(const ftl_lr_decay *d, char *out, size_t size);

/* Learning-rate schedule: scaling for the batch size, the per-epoch decay, then linear warmup (per step).
 *   factor k   = 1, B/B0 or sqrt(B/B0); B is the GLOBAL batch (per-rank batch x ranks)
 *   target     = lr * k
 *   epoch lr   E = the decay's value for the epoch (target when constant)
 *   warmup     lr(t) = E * (s + (1 - s) * min(1, (t + 1) / W)), t = 0-based global step,
 *              W = warmup_epochs * steps_per_epoch steps
 *   start s    = 1/k when k > 1: warmup starts at the base batch's LR (Goyal et al.; with k = ranks
 *              this is exactly Horovod's LearningRateWarmupCallback, which starts at lr/size);
 *              0 when k = 1 (a plain ramp from lr/W); or warmup_start_factor when >= 0. */
typedef struct ftl_lr_schedule {
    double lr;
    ftl_lr_scaling scaling;
    int64_t batch, base_batch;
    double warmup_epochs;       /* 0 = none */
    int64_t steps_per_epoch;
    double warmup_start_factor; /* < 0: automatic (above) */
    ftl_lr_decay decay;
    int64_t epochs;             /* T of the cosine */
    double epoch_lr;            /* E of the current epoch (ftl_lr_schedule_epoch), when epoch_lr_set */
    bool epoch_lr_set;
} ftl_lr_schedule;

/* Plateau's state, kept in checkpoints so a resume continues it exactly. */
typedef struct ftl_lr_plateau {
    double lr;    /* the current (reduced) learning rate */
    double best;  /* NaN until the first epoch */
    int wait;     /* epochs in a row without improvement */
} ftl_lr_plateau;

double ftl_lr_schedule_target(const ftl_lr_schedule *s);
/* E for 0-based `epoch`; plateau_lr is the plateau's current value (NaN: not started, the target). */
double ftl_lr_schedule_epoch(const ftl_lr_schedule *s, int64_t epoch, double plateau_lr);
double ftl_lr_schedule_at(const ftl_lr_schedule *s, int64_t step);
void ftl_lr_plateau_start(ftl_lr_plateau *p, double lr);
/* The epoch's monitored value in; true when it reduced p->lr. */
bool ftl_lr_plateau_update(ftl_lr_plateau *p, const ftl_lr_decay *d, double value, bool maximize, double min_delta);

/* ======================================================================== early stopping */

typedef enum ftl_monitor {
    FTL_MONITOR_VAL_ACC,
    FTL_MONITOR_VAL_LOSS,
    FTL_MONITOR_ACC,
    FTL_MONITOR_LOSS,
} ftl_monitor;

typedef enum ftl_monitor_mode {
    FTL_MODE_AUTO, /* accuracies -> max, losses -> min (Keras' rule) */
    FTL_MODE_MIN,
    FTL_MODE_MAX,
} ftl_monitor_mode;

typedef struct ftl_early_stopping_config {
    bool stop;           /* stop when patience runs out (--early-stopping); false: only track the best */
    ftl_monitor monitor;
    ftl_monitor_mode mode;
    int patience;        /* epochs without improvement before stopping */
    double min_delta;    /* an improvement must exceed this (absolute) */
    double baseline;     /* NaN = none; else the first improvement must beat it */
    bool restore_best;   /* restore the best epoch's weights at the end (default true) */
} ftl_early_stopping_config;

/* Defaults: no stopping, monitor val_acc, auto mode, patience 3, min_delta 0, restore_best. */
ftl_early_stopping_config ftl_early_stopping_config_default(void);
/* Parses "monitor=val_acc,patience=3,min_delta=0.001[,mode=max][,baseline=0.5]" (sets stop = true). */
ftl_status ftl_early_stopping_parse(const char *spec, ftl_early_stopping_config *config);
const char *ftl_monitor_name(ftl_monitor monitor);
ftl_status ftl_monitor_parse(const char *name, ftl_monitor *out);

/* Keras EarlyStopping (restore_best_weights=True) semantics, with one difference: ftl restores
 * the best weights at the end of training even when stopping never fired (Keras restores only
 * when it stops early); restore_best = false keeps the last epoch's weights. */
typedef struct ftl_early_stopping {
    ftl_early_stopping_config config;
    bool maximize;
    bool has_best;
    double best;            /* best monitored value so far (valid when has_best) */
    int64_t best_epoch;     /* 1-based epoch of the best value (of the kept weights), 0 = none */
    int wait;               /* epochs since the last improvement */
    int64_t stopped_epoch;  /* 1-based epoch at which stopping fired, 0 = not stopped */
    size_t param_count;
    float *best_params;     /* copy of the parameters at best_epoch (when restore_best) */
    bool has_best_params;   /* best_params holds weights (the first epoch's if none improved) */
} ftl_early_stopping;

ftl_status ftl_early_stopping_init(ftl_early_stopping *es, const ftl_early_stopping_config *config,
                                   size_t param_count);
void ftl_early_stopping_free(ftl_early_stopping *es);
/* Records the monitored value at the end of 1-based `epoch` (params = the weights after it).
 * Returns true when training should stop now. A NaN value never counts as an improvement. */
bool ftl_early_stopping_update(ftl_early_stopping *es, int64_t epoch, double value, const float *params);
/* The weights training starts from were measured before (phase 1's best): they become the best so
 * far, as epoch 0, with this monitored value. */
void ftl_early_stopping_seed(ftl_early_stopping *es, double value, const float *params);
/* Copies the best weights into params if restore_best and a best exists; returns whether it did. */
bool ftl_early_stopping_restore(const ftl_early_stopping *es, float *params);

/* ======================================================================== model file
 * MODEL.ftl: safetensors with "head.kernel" F32 [D, C] and "head.bias" F32 [C] and metadata:
 * ftl.format = "ftl-model-1", ftl.version, ftl.classes (JSON array), and whatever the caller adds
 * (the FTL_MODEL_META_* keys below are the conventional ones). */

#define FTL_MODEL_FORMAT               "ftl-model-1"
/* A model that also holds fine-tuned backbone tensors: a reader of ftl-model-1 only refuses it rather
 * than running the frozen backbone with a head trained for the tuned one. */
#define FTL_MODEL_FORMAT_TUNED         "ftl-model-2"
#define FTL_MODEL_TUNED_PREFIX         "backbone/"          /* + the ONNX initializer name */
#define FTL_MODEL_META_TUNED_COUNT     "ftl.fine_tuned_tensors"
#define FTL_MODEL_META_BACKBONE_IDENTITY "ftl.backbone_identity" /* ftl_model_info.identity of the tuned backbone */
#define FTL_MODEL_META_FINE_TUNE_CUT   "ftl.fine_tune_cut"  /* e.g. "last 4" / "from TENSOR" */
#define FTL_MODEL_META_INT8_SCALES     "ftl.int8_scales"    /* precision int8: the calibration (ftl_nn_int8_scales_json) */
#define FTL_MODEL_META_BOTTOM_IDENTITY "ftl.bottom_identity" /* ftl_model_info.identity of the cut's frozen bottom
                                                                (the key of its boundary rows in the feature cache) */
#define FTL_CHECKPOINT_FORMAT          "ftl-checkpoint-2"  /* 2: dropout keyed by (seed, step, row), global batches */
#define FTL_CHECKPOINT_META_RUN_ID     "ftl.run_id"         /* 32 hex digits drawn at a run's start, kept on resume */
#define FTL_CHECKPOINT_META_TO_DELETE  "ftl.checkpoints_to_delete" /* JSON array: the --keep-last deletions still
                                                                       owed when it was written (done on resume) */
#define FTL_MODEL_META_FORMAT          "ftl.format"
#define FTL_MODEL_META_VERSION         "ftl.version"
#define FTL_MODEL_META_CLASSES         "ftl.classes"         /* JSON array of class names */
#define FTL_MODEL_META_FEATURE_DIM     "ftl.feature_dim"     /* D, decimal */
#define FTL_MODEL_META_BACKBONE_PATH   "ftl.backbone_path"
#define FTL_MODEL_META_BACKBONE_SHA256 "ftl.backbone_sha256"
#define FTL_MODEL_META_FEATURE_TENSOR  "ftl.feature_tensor"  /* backbone output used as features */
#define FTL_MODEL_META_INPUT_SIZE      "ftl.input_size"
#define FTL_MODEL_META_INPUT_SCALING   "ftl.input_scaling"   /* e.g. "x/127.5-1" */
#define FTL_MODEL_META_TRAINING_ARGS   "ftl.training_args"   /* JSON */
#define FTL_MODEL_META_METRICS         "ftl.metrics"         /* JSON */
#define FTL_MODEL_META_DROPOUT         "ftl.dropout"

/* Writes MODEL.ftl atomically. meta must contain FTL_MODEL_META_CLASSES with C names; format,
 * version and feature_dim are filled in. */
ftl_status ftl_classifier_save(const char *path, const ftl_head *head, const ftl_kv *meta, size_t meta_count);
/* The same with n_tuned fine-tuned backbone tensors (written as FTL_MODEL_TUNED_PREFIX + name, the
 * file then in format FTL_MODEL_FORMAT_TUNED); n_tuned 0 writes exactly what ftl_classifier_save does. */
ftl_status ftl_classifier_save_tuned(const char *path, const ftl_head *head, const ftl_kv *meta, size_t meta_count,
                                     const ftl_tensor_override *tuned, int n_tuned);
/* The same, replacing a file at `path` only when `replace` (--overwrite, or a file the run was
 * allowed to replace from its start): else one that appeared meanwhile is left as it is and
 * FTL_E_EXISTS says where this model was kept instead. */
ftl_status ftl_classifier_write(const char *path, bool replace, const ftl_head *head, const ftl_kv *meta, size_t meta_count,
                                const ftl_tensor_override *tuned, int n_tuned);

/* Whether a file looks like safetensors (an 8-byte header length, then '{'). */
bool ftl_is_safetensors_file(const char *path);
/* `ftl inspect MODEL.ftl | CHECKPOINT`: classes, backbone (path, sha256, feature tensor),
 * preprocessing, training arguments and final metrics of a model; epoch, step, rank count and
 * what it resumes of a checkpoint. As text or one JSON document. */
ftl_status ftl_trained_file_describe(const char *path, FILE *out, bool json);
/* `ftl inspect --verify FILE`: checks every tensor of a safetensors file against its CRC32C and
 * prints one line (or JSON document): tensor count, bytes, and ok, the first damaged tensor (then
 * FTL_E_FORMAT naming it), or that the file has no checksums (FTL_OK: nothing can be checked). */
ftl_status ftl_trained_file_verify(const char *path, FILE *out, bool json);

typedef struct ftl_classifier {
    ftl_head head;
    char **class_names;   /* [head.classes] */
    ftl_tensor_override *tuned; /* fine-tuned backbone tensors (names and data owned), for ftl_model_options */
    int n_tuned;
    ftl_safetensors *file; /* for the remaining metadata (ftl_safetensors_metadata) */
} ftl_classifier;

/* Loads a model file (or the head of a checkpoint), checking shapes against the class list. */
ftl_status ftl_classifier_load(const char *path, ftl_classifier *model);
void ftl_classifier_free(ftl_classifier *model);
const char *ftl_classifier_metadata(const ftl_classifier *model, const char *key);

/* ======================================================================== training loop */

/* One batch handed to the trainer: this rank's rows of one global batch; the memory stays valid
 * until the next call on the source. */
typedef struct ftl_feature_batch {
    const float *features; /* [count x D] row-major */
    const int32_t *labels; /* [count] */
    size_t count;          /* rows on this rank (0 is possible on the feature-cache path) */
    size_t global_count;   /* rows of the global batch over all ranks; 0: the pass ended */
    const uint32_t *positions; /* position of each row in the global batch; NULL: position_base + i */
    int64_t position_base;
    double backbone_seconds; /* time this batch spent in a backbone (per-batch mode), else 0 */
} ftl_feature_batch;

/* Where batches come from: in-memory features, a feature cache, a streaming loader, or a loader
 * plus a backbone run per batch (--no-feature-cache). */
typedef struct ftl_batch_source {
    void *ctx;
    /* Examples in one pass over the data, all ranks together (for steps per epoch), 0 if unknown. */
    int64_t size;
    /* true: the sequence of global batches is the same for any number of ranks (feature cache),
     * so its position is one blob valid under any rank count; false: each rank streams its own
     * shard and the checkpoint keeps every rank's position. */
    bool global_order;
    /* Start a fresh pass (epoch mode; not called when steps_per_epoch streams over passes). */
    ftl_status (*begin_pass)(void *ctx);
    /* This rank's rows of the next global batch of max_count x ranks rows. When the pass ends:
     * wrap = true continues into a new pass (reshuffled) to fill the batch; wrap = false returns
     * what is left (global_count 0 at the end). */
    ftl_status (*next_batch)(void *ctx, size_t max_count, bool wrap, ftl_feature_batch *out);
    /* Opaque position (for checkpoints; optional): a malloc'ed blob, and its restore. */
    ftl_status (*save_position)(void *ctx, uint8_t **blob, size_t *size);
    ftl_status (*restore_position)(void *ctx, const uint8_t *blob, size_t size);
} ftl_batch_source;

/* In-memory features (cache loaded in RAM), for one process: each batch is the whole global
 * batch (under several ranks use the feature-cache sources of ftl_train_run). The arrays are borrowed. shuffle: a new permutation
 * of all examples for each pass, from xoshiro256** seeded with `seed` (deterministic). */
typedef struct ftl_memory_source {
    const float *features;
    const int32_t *labels;
    int64_t count, dim;
    bool shuffle;
    uint64_t rng[4];         /* state after drawing the current permutation */
    uint64_t pass_rng[4];    /* state before it (the position records this, not the permutation) */
    int64_t pass;            /* passes started */
    int64_t cursor;          /* next index in the permutation */
    uint32_t *order;
    float *batch_features;
    int32_t *batch_labels;
    size_t batch_capacity;
} ftl_memory_source;

ftl_status ftl_memory_source_init(ftl_memory_source *src, const float *features, const int32_t *labels,
                                  int64_t count, int64_t dim, bool shuffle, uint64_t seed);
void ftl_memory_source_free(ftl_memory_source *src);
ftl_batch_source ftl_memory_source_as_batch_source(ftl_memory_source *src);

/* What happened in one epoch (also the JSONL record). Metrics are NaN when not measured. */
typedef struct ftl_epoch_log {
    int64_t epoch, epochs;   /* 1-based */
    int64_t steps, examples; /* this epoch, all ranks */
    double seconds;
    double loss, acc, val_loss, val_acc;
    double lr;               /* at the last step of the epoch */
    double images_per_second;
    /* The epoch's time in parts that add up to `seconds`: the backbone part holds a fine-tuned
     * top's forward and backward too; other_s is what no part covers (set-up, reductions, hooks). */
    double data_wait_s, backbone_s, head_s, allreduce_s, validation_s, checkpoint_s, other_s;
    double gpu_util_percent, gpu_memory_bytes; /* the backbone's GPU this epoch (NVML): mean busy %, most
                                                  memory in use; NaN when not on a GPU */
    bool improved;           /* the monitored value improved */
    int64_t best_epoch;
    const char *checkpoint;  /* the file written this epoch, or NULL */
} ftl_epoch_log;

/* A trained part between the batch rows and the head: fine-tuning's unfrozen top of the backbone
 * (ftl/nn.h ftl_finetune_*), whose input rows are the frozen bottom's boundary tensors. Its
 * parameters follow the head's in the trainer's one block (bind), so the optimizer, early
 * stopping's best copy, checkpoints and the allreduce cover both. BatchNormalization in it runs
 * with fixed statistics, so a row's features do not depend on the other rows of its batch. */
typedef struct ftl_fit_top {
    void *ctx;
    int64_t in_dim;        /* floats per row the batch sources give */
    int64_t out_dim;       /* floats per row into the head: the head's D */
    size_t param_count;    /* values it trains (after the head's in the block) */
    int64_t max_rows;      /* the most rows per forward; the trainer asks for no more (>= the per-rank batch) */
    /* From now on params/grads (param_count floats each, inside the trainer's blocks) are its
     * storage; its current values are copied into params. */
    ftl_status (*bind)(void *ctx, float *params, float *grads);
    /* rows [n x in_dim] -> features [n x out_dim], keeping what backward needs; n <= max_rows. */
    ftl_status (*forward)(void *ctx, const float *rows, size_t n, float *features);
    /* After forward on the same n rows: d(loss)/d(features) [n x out_dim] in, its grads overwritten. */
    ftl_status (*backward)(void *ctx, const float *dfeatures, size_t n);
} ftl_fit_top;

typedef struct ftl_fit_config {
    int64_t batch_size;       /* per rank */
    int64_t epochs;
    int64_t steps_per_epoch;  /* 0: one pass per epoch (below); > 0: an endless stream of reshuffled
                                 passes cut into epochs of this many steps (Petastorm style) */
    bool drop_remainder;      /* pass mode: floor(N/B) full batches (default, as the article's
                                 loaders); false: ceil(N/B), the last one partial (Keras fit on arrays) */
    int64_t eval_batch_size;  /* validation batches (default 1024; any size gives the same counts) */
    ftl_optimizer_config optimizer;
    ftl_lr_scaling lr_scaling;
    int64_t base_batch;       /* B0 for lr scaling */
    double warmup_epochs;
    double warmup_start_factor; /* < 0: automatic */
    ftl_lr_decay lr_decay;      /* --lr-schedule (default constant) */
    double label_smoothing;     /* --label-smoothing e in [0, 1): the training loss's targets; val's loss stays plain */
    double dropout;
    uint64_t seed;            /* weights init and dropout (the loader has its own) */
    ftl_early_stopping_config early_stopping;
    /* Checkpoints: a path pattern where {epoch} or {epoch:03d} is the 1-based epoch; NULL = none. */
    const char *checkpoint_pattern;
    bool save_best_only;      /* only epochs where the monitored value improved */
    int keep_last;            /* delete older checkpoints of this run beyond the last K (0 = keep all) */
    /* Stored in every checkpoint and compared on resume (backbone sha256, classes, feature dim);
     * also the place for training args. Borrowed. */
    const ftl_kv *checkpoint_meta;
    size_t checkpoint_meta_count;
    const char *log_path;     /* JSONL, appended: run_record first (when set), then one "record":"epoch" line per epoch */
    const char *run_record;   /* one JSON object ("record":"run": command, versions, data, machine); NULL = none */
    FILE *epoch_out;          /* Keras-style epoch lines; NULL = silent */
    ftl_collectives collectives; /* ftl/dist.h; rank 0 of 1 = single process */
    /* Figures of the device the backbone runs on, asked at each epoch end (e.g. a GPU's busy % and
     * memory: ftl/device.h ftl_device_monitor_take); false or NULL: none. */
    bool (*device_usage)(void *ctx, double *util_percent, double *memory_bytes);
    void *device_usage_ctx;
    /* Chrome trace-event file (--timeline): one track per rank, a span per data wait, backbone,
     * head step, allreduce, validation and checkpoint; NULL = none. */
    const char *timeline_path;
    /* Fine-tuning: the trained top between the rows and the head (NULL: the rows are the features). */
    const ftl_fit_top *top;
    /* Where the head's steps run (NULL: the CPU). Not with a top: fine-tuning trains on the CPU. */
    const ftl_head_engine *head_engine;
    /* Flip TTA for validation (--tta flip): the validation rows mirrored, in the same order, fetched in
     * the same batches as val (through the top too when fine-tuning); the scores are the mean of both
     * orientations' probabilities, on the CPU head (its host weights are current at every epoch end).
     * NULL: none. */
    ftl_batch_source *val_mirrored;
    /* The weights the trainer starts from were already measured (phase 1's best): they count as
     * epoch 0, which later epochs must beat to be kept, so the result is never worse on the
     * monitored metric. NULL: none. */
    const ftl_epoch_log *initial;
    /* Called after each epoch (rank 0 and others); set *stop to end training. Optional. */
    ftl_status (*on_epoch_end)(void *ctx, const ftl_epoch_log *log, bool *stop);
    void *on_epoch_end_ctx;
} ftl_fit_config;

/* batch 16, epochs 30, drop_remainder, eval batch 1024, nadam lr 0.001, seed 42, dropout 0,
 * early stopping defaults (track val_acc, restore best, no stopping), single process. */
ftl_fit_config ftl_fit_config_default(void);

typedef struct ftl_fit_result {
    int64_t epochs_run;        /* completed epochs, including those before a resume */
    int64_t best_epoch;        /* 0 when nothing was monitored */
    double best_value;         /* the monitored value at best_epoch */
    bool stopped_early;
    bool restored_best;
    ftl_epoch_log last;        /* the last epoch's record */
    /* Metrics of the returned weights: those of best_epoch when restored, else the last epoch. */
    double final_loss, final_acc, final_val_loss, final_val_acc;
} ftl_fit_result;

typedef struct ftl_trainer ftl_trainer;

/* A trainer for features of dimension dim and `classes` classes: head (Glorot init from seed),
 * optimizer and early stopping. The config is copied (its strings and arrays are borrowed). */
ftl_status ftl_trainer_init(ftl_trainer **out, const ftl_fit_config *config, int64_t dim, int64_t classes);
void ftl_trainer_free(ftl_trainer *trainer);
ftl_head *ftl_trainer_head(ftl_trainer *trainer);
/* The one parameter block: the head's values, then the top's (config->top); *count: its length. */
float *ftl_trainer_params(ftl_trainer *trainer, size_t *count);
const ftl_optimizer *ftl_trainer_optimizer(const ftl_trainer *trainer);
int64_t ftl_trainer_epoch(const ftl_trainer *trainer); /* completed epochs */
int64_t ftl_trainer_step(const ftl_trainer *trainer);  /* completed steps */

/* Trains from the current epoch up to config->epochs (validation each epoch if val != NULL),
 * then restores the best weights (unless restore_best is off). */
ftl_status ftl_trainer_fit(ftl_trainer *trainer, ftl_batch_source *train, ftl_batch_source *val,
                           ftl_fit_result *result);

/* Writes a checkpoint of the whole training state now (the trainer does this itself each epoch
 * when checkpoint_pattern is set). train may be NULL (no loader position). A resume continues
 * with the epoch after the last completed one, so exact resumes need epoch-end checkpoints. */
ftl_status ftl_trainer_save_checkpoint(ftl_trainer *trainer, const char *path, ftl_batch_source *train);
/* Restores a checkpoint: refuses one from another backbone, class set or feature dimension
 * (comparing the checkpoint_meta identity keys) or another optimizer, with a message naming the
 * difference; restores the loader position into train (if given). On failure the trainer may be
 * partly restored: free it. */
ftl_status ftl_trainer_resume(ftl_trainer *trainer, const char *path, ftl_batch_source *train);
/* What ftl_trainer_resume checks first, without a trainer: that `path` is a checkpoint and that its
 * identity keys (those of `meta` it records: backbone, classes, features, preprocessing, ...) are
 * this run's, and that every tensor matches its checksum. A run calls it before computing any
 * features, so a wrong or damaged --resume costs nothing. */
ftl_status ftl_checkpoint_check_identity(const char *path, const ftl_kv *meta, size_t meta_count);
/* The epoch history so far (including epochs before a resume, from the checkpoint). */
size_t ftl_trainer_history(const ftl_trainer *trainer, const ftl_epoch_log **logs);

/* The trainer's current weights over one pass of a source (no dropout; through config->top when set).
 * With config->val_mirrored set, source is the validation rows it mirrors and both are scored with
 * flip TTA, as every epoch's validation is. */
ftl_status ftl_trainer_evaluate(ftl_trainer *trainer, ftl_batch_source *source, ftl_metric_counts *out);

/* Evaluation over one pass of a source (no dropout). */
ftl_status ftl_head_evaluate(ftl_head *head, ftl_batch_source *source, size_t batch_size, ftl_metric_counts *out);

#ifdef __cplusplus
}
#endif
#endif
