/* ftl public API: the whole jobs behind `ftl train`, `ftl eval` and `ftl predict`, built from
 * the loader, the backbone, the feature cache and the trainer. */
#ifndef FTL_PIPELINE_H
#define FTL_PIPELINE_H

#include "ftl/base.h"
#include "ftl/args.h"
#include "ftl/embed.h"
#include "ftl/train.h"
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ---- train ---- */

typedef struct ftl_train_options {
    const char *train_path;       /* image dataset (ftl prep output, or any Parquet with label/image) */
    const char *val_path;         /* NULL: no validation (monitor acc or loss then) */
    const char *out_path;         /* MODEL.ftl */
    ftl_embed_options embed;      /* backbone, feature tensor, preprocessing, precision, columns, batch, threads */
    bool feature_cache;           /* default true: embed once, train on stored features */
    const char *cache_dir;        /* default: ftl-feature-cache/ next to out_path */
    int64_t max_memory;           /* cached features larger than this are streamed; default half the RAM, at most 1 GiB */
    int64_t shuffle_buffer;       /* rows; default 400 (the article's) */
    bool augment_flip;            /* --augment flip: each (seed, pass, row) draws the image or its mirror;
                                     with the feature cache both orientations are cached */
    bool tta_flip;                /* --tta flip: validation scores the mean of each image's and its mirror's
                                     probabilities (val's mirrored features cached too), and the model records
                                     it so eval, predict and export follow it */
    const char *data_cache_dir;   /* local-disk cache of image row groups (--no-feature-cache) */
    int64_t data_cache_limit;
    ftl_fit_config fit;
    const char *resume_path;      /* a checkpoint to continue from (of either phase) */
    /* Fine-tuning (phase 2, after the head's phase 1): the cut's top trained with the head at its own
     * learning rate and early stopping, from phase 1's best weights (its epoch 0); the frozen bottom's
     * boundary tensors are cached like features. Off when cut.last_convs == 0 and !cut.from_tensor. */
    ftl_fine_tune_cut fine_tune;
    int64_t fine_tune_epochs;     /* default 10 */
    double fine_tune_lr;          /* default 1e-5 (the Keras guide) */
    double fine_tune_warmup_epochs;
    ftl_lr_decay fine_tune_lr_decay; /* --fine-tune-lr-schedule (default constant) */
    bool fine_tune_only;          /* no phase 1: start from init_path */
    const ftl_epoch_log *fine_tune_start; /* with fine_tune_only: phase 2's epoch 0 as phase 1 ended (ftl sweep
                                     --fine-tune-top gives its trial's), not init_path measured on val (NULL) */
    const char *init_path;        /* a trained MODEL.ftl (its head, and its fine-tuned tensors if any) */
    bool overwrite;
    bool strict;                  /* a class without training (or validation) images is an error, not a warning */
    bool show_progress;
    int argc;                     /* the command line, for the log's run record (optional) */
    char *const *argv;
} ftl_train_options;

void ftl_train_options_init(ftl_train_options *options);

typedef struct ftl_train_summary {
    ftl_fit_result fit;           /* the last phase's */
    ftl_fit_result head_phase;    /* phase 1's when fine-tuning followed it */
    bool fine_tuned;
    int64_t boundary_dim;         /* floats per image at the fine-tuning cut */
    bool boundary_cache_reused;
    int64_t train_rows, val_rows, dim, classes;
    double seconds, features_seconds;
    bool features_cached, features_in_memory, train_cache_reused, val_cache_reused;
    char head_device[256];        /* where the head trained: "cpu", or the GPU engine's description */
} ftl_train_summary;

ftl_status ftl_train_run(const ftl_train_options *options, ftl_train_summary *summary);

/* ftl train's options by name: what the command line's flags and the Python package's keywords
 * become. Not in the options struct: */
typedef struct ftl_train_args {
    bool help_asked;              /* --help: nothing was parsed */
    bool quiet;                   /* --quiet: the caller lowers the log level to warnings */
    const char *report_path;      /* --report REPORT.html: draw the log after training (NULL: none) */
} ftl_train_args;
/* argv[0] is "train", argv[1..] are `ftl train`'s arguments (TRAIN --val VAL --backbone M --out OUT
 * ...). Fills *options (its strings point into argv) after every check the command line makes:
 * ranges, options that cannot take effect together, --precision auto resolved on this CPU (every rank
 * agreeing). Sets the process's stall timeout (--stall-timeout). Errors name the option. */
ftl_status ftl_train_args_parse(int argc, char **argv, ftl_train_options *options, ftl_train_args *extra);
/* After a successful ftl_train_run: --report's page of the run's log (and timeline), on rank 0 (it
 * was checked at parse time that --log is given). FTL_OK when report_path is NULL. */
ftl_status ftl_train_write_report(const ftl_train_options *options, const char *report_path);
/* The options ftl_train_args_parse takes (names, kinds, value names, help; targets NULL). */
const ftl_arg *ftl_train_arg_table(int *count);
/* A --precision value: fp32|bf16|tf32|int8, or auto resolved here to the faster on this device
 * (every rank agreeing), said in an info line. */
ftl_status ftl_precision_resolve(const char *text, ftl_device_kind device, int threads, ftl_nn_precision *precision);
/* --calibration-method (NULL: keep the default) for --precision int8; warns when calibration options
 * come without int8. */
ftl_status ftl_calibration_method_resolve(const char *method, ftl_nn_precision precision, const char *calibration_path,
                                          ftl_nn_calibration_method *out);

/* ---- eval ---- */

typedef struct ftl_eval_options {
    const char *model_path;       /* MODEL.ftl */
    const char *data_path;        /* image dataset */
    const char *backbone_path;    /* NULL: the path recorded in the model (its sha256 is checked) */
    const char *cache_dir;        /* reuse cached features when present (NULL: none) */
    int batch, threads, loader_threads, image_size;
    ftl_device_kind device;       /* default auto (ftl/device.h) */
    const char *image_column, *label_column;
    int label_offset;             /* with label_offset_given; else the model's recorded one */
    bool label_offset_given;
    const char *predictions_path; /* CSV: path, label, predicted, probability (NULL: none) */
    ftl_tta tta;                  /* default: as the model records (ftl.tta); flip: the mean of each image's and
                                     its mirror's probabilities (both orientations' cached features when the
                                     cache holds them, else a second backbone pass) */
    /* Written by the caller after the run (ftl_eval_result_write_json / _confusion_csv), but checked
     * with --predictions before any work: none may be an input, exist without overwrite, or be
     * another of them. */
    const char *json_path, *confusion_path;
    bool overwrite;               /* replace existing outputs (else refused at the start, and never
                                     replaced if another run makes one meanwhile) */
    bool show_progress;
    /* Under mpirun: each rank evaluates its shard; the metrics are exact global sums and rank 0
     * writes --predictions in dataset order (NULL: one process). */
    const ftl_collectives *collectives;
} ftl_eval_options;

void ftl_eval_options_init(ftl_eval_options *options);

typedef struct ftl_eval_result {
    int64_t rows, classes;
    double loss, top1, top5;
    char **class_names;
    int64_t *confusion;           /* classes x classes: [true][predicted] */
    double seconds;
} ftl_eval_result;

ftl_status ftl_eval_run(const ftl_eval_options *options, ftl_eval_result *result);
void ftl_eval_result_free(ftl_eval_result *result);
void ftl_eval_result_print(const ftl_eval_result *result, FILE *out);
/* The metrics, per-class accuracy and confusion matrix as JSON (what `ftl eval --json` writes);
 * free() it. */
char *ftl_eval_result_json(const ftl_eval_result *result);
ftl_status ftl_eval_result_write_json(const ftl_eval_result *result, const char *path, bool overwrite);
ftl_status ftl_eval_result_write_confusion_csv(const ftl_eval_result *result, const char *path, bool overwrite);

/* ---- predict ---- */

typedef struct ftl_predict_options {
    const char *model_path;
    const char *backbone_path;    /* NULL: as recorded in the model */
    int top_k;                    /* default 5 */
    int threads;
    ftl_device_kind device;       /* default auto (ftl/device.h) */
    ftl_tta tta;                  /* default: as the model records; flip: each image and its mirror through the
                                     backbone, their probabilities averaged */
} ftl_predict_options;

void ftl_predict_options_init(ftl_predict_options *options);

typedef struct ftl_predictor ftl_predictor;

typedef struct ftl_prediction {
    int count;                    /* top_k or fewer */
    int class_index[16];
    const char *class_name[16];
    float probability[16];
} ftl_prediction;

ftl_status ftl_predictor_open(const ftl_predict_options *options, ftl_predictor **out);
/* Runs the dataset recipe (decode, thumbnail, pad), the backbone and the head on one image file. */
ftl_status ftl_predictor_run_file(ftl_predictor *p, const char *image_path, ftl_prediction *out);
/* The backbone and the head on an in-memory batch: count images of image_size x image_size x 3 uint8
 * RGB, back to back (what the dataset recipe makes of a photo; another size than the model's is
 * resized as the backbone's input is), into count x classes probabilities. */
ftl_status ftl_predictor_predict(ftl_predictor *p, const uint8_t *images_hwc, int count, int image_size, float *probs);
int64_t ftl_predictor_class_count(const ftl_predictor *p);
const char *ftl_predictor_class_name(const ftl_predictor *p, int64_t index); /* NULL out of range */
int ftl_predictor_input_size(const ftl_predictor *p);
bool ftl_predictor_tta_flip(const ftl_predictor *p); /* flip TTA is on (asked, or recorded in the model) */ /* the image size the model was trained on */
void ftl_predictor_close(ftl_predictor *p);

#endif
