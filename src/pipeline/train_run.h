/* What `ftl train` shares between its phases (train_job.c runs phase 1 and the whole job,
 * fine_tune_phase.c runs phase 2): the run's sources, their setup over a backbone (the full one for
 * features, the frozen bottom for boundary tensors; train_run.c), and what the run records with
 * the model file (train_record.c). Internal to src/pipeline. */
#ifndef FTL_PIPELINE_TRAIN_RUN_H
#define FTL_PIPELINE_TRAIN_RUN_H

#include "ftl/pipeline.h"
#include "pipeline/feature_store.h"
#include "pipeline/loader_source.h"
#include "pipeline/store_sources.h"
#include "pipeline/top_source.h"

/* The run's sources: everything ftl_train_run opens, so one cleanup frees it all. */
typedef struct train_run {
    ftl_model *backbone;
    feature_store train_store, val_store, train_flipped;
    global_order_source train_global;
    file_order_source val_local;
    loader_source train_stream, val_stream;
    bool have_train_store, have_val_store, have_train_flipped, have_train_global, have_val_local, have_train_stream, have_val_stream;
    /* phase 1 of a fine-tuning run: the frozen top over the bottom's boundary rows */
    ftl_model *top;
    top_source train_top, val_top;
    bool have_train_top, have_val_top;
    ftl_batch_source train, val;
    /* --tta flip: the validation rows mirrored, in val's order (cached, streamed or through the top) */
    feature_store val_flipped;
    file_order_source val_mirrored_local;
    loader_source val_mirrored_stream;
    top_source val_mirrored_top;
    bool have_val_flipped, have_val_mirrored_local, have_val_mirrored_stream, have_val_mirrored_top, have_val_mirrored;
    ftl_batch_source val_mirrored;
    char **class_names;
    int64_t class_count, dim;
    int image_size;
    char *preprocess_json, *classes_json, *cache_dir;
    ftl_nn_preprocess preprocess; /* what the per-batch sources scale images with (they point here) */
    char train_fingerprint[65];  /* computed once (it reads every byte): the rank check and the cache key */
} train_run;

void train_run_free(train_run *r);
/* The start of a run, shared by ftl train and ftl sweep: the classes (val's checked against train's),
 * the image size, the int8 calibration (*o then points at *calibrated, which holds the scales, freed
 * by the caller), the backbone, and under mpirun the checks that every rank has the same backbone and
 * data; then the names, preprocessing, cache folder and feature size the run records. */
ftl_status train_run_prepare(train_run *r, const ftl_train_options **o, ftl_train_options *calibrated,
                             ftl_nn_int8_scales **own_scales);
/* What a run records: its training arguments (the model's ftl.training_args), the log's first line,
 * and the fit's result (ftl.metrics). All malloc'ed. */
char *train_run_args_json(const ftl_train_options *o);
char *train_run_record_json(const ftl_train_options *o, int64_t dim, const char *classes_json, const ftl_model_info *info,
                            const char *head_device, const char *resume);
char *train_run_metrics_json(const ftl_fit_result *r);
/* The identity a run's checkpoints carry (a resume compares it): backbone, classes, features,
 * preprocessing, precision, labels, augmentation, validation's TTA, shuffle buffer, int8 scales. */
enum { TRAIN_RUN_META_COUNT = 14 };
typedef struct train_run_meta {
    ftl_kv kv[TRAIN_RUN_META_COUNT];
    char *dim, *offset, *shuffle, *scales;
} train_run_meta;
void train_run_meta_init(train_run_meta *m, const train_run *r, const ftl_train_options *o);
void train_run_meta_free(train_run_meta *m);
/* The image loader whose order the training batches follow. */
ftl_loader_options train_run_order(const ftl_train_options *o, const char *const *sources);
/* Cached rows held in memory when --max-memory is not given: half the RAM, at most 1 GiB. */
int64_t train_run_default_max_memory(void);
/* The trainer's sources over one rank's stores: global batches in the single-process order for
 * training, this rank's rows once for validation (val NULL: none). */
ftl_status train_run_sources_over_stores(train_run *r, const ftl_train_options *o, feature_store *train,
                                         feature_store *flipped, feature_store *val, int64_t train_total, int64_t dim);
/* --tta flip over cached rows: val_mirrored reads `flipped` (this rank's mirrored validation rows) in
 * val's order. */
void train_run_mirrored_val_over_store(train_run *r, feature_store *flipped, int64_t dim);
/* The fit's val_mirrored for r (NULL without --tta flip or validation). */
ftl_batch_source *train_run_val_mirrored(train_run *r);
/* The image loaders with `model` run on every training and validation batch. */
ftl_status train_run_open_streams(train_run *r, const ftl_train_options *o, ftl_model *model, ftl_train_summary *s);
/* The training (and validation) sources over r->backbone's outputs: cached (each rank embeds or reuses
 * its rows) or recomputed every batch (--no-feature-cache). */
ftl_status train_run_setup_cached(train_run *r, const ftl_train_options *o, ftl_train_summary *s);
ftl_status train_run_setup_per_batch(train_run *r, const ftl_train_options *o, ftl_train_summary *s);
/* Phase 1 of a fine-tuning run: bottom's boundary rows once per recipe (cached: set up here; per
 * batch: its model only, its sources are phase 2's), and r's features from them through the
 * frozen top (r->top). */
ftl_status train_run_setup_through_cut(train_run *r, const ftl_train_options *o, train_run *bottom, ftl_train_summary *s);
/* MODEL.ftl with the trainer's head, n_tuned fine-tuned backbone tensors and extra metadata. */
ftl_status train_run_save_model(const train_run *r, const ftl_train_options *o, ftl_trainer *trainer,
                                const ftl_fit_result *res, const ftl_tensor_override *tuned, int n_tuned,
                                const ftl_kv *extra, size_t n_extra);

/* ---- phase 2 (fine_tune_phase.c) ---- */

/* --fine-tune-last or --fine-tune-from was given. */
bool fine_tuning(const ftl_train_options *o);
/* "last N" / "from TENSOR" (malloc'd): how checkpoints and models name the cut. */
char *fine_tune_cut_text(const ftl_fine_tune_cut *cut);
/* Phase 2's checkpoint pattern: phase 1's with "fine-tune-" before the file name (NULL for NULL). */
char *fine_tune_checkpoint_pattern(const char *pattern);
/* Which phase --resume's checkpoint continues (1 or 2) and phase 2's epoch 0 as it records them;
 * rank 0 reads the file and tells the others. A checkpoint of another cut is refused here. */
ftl_status fine_tune_resume_phase(const ftl_train_options *o, int *phase, ftl_epoch_log *start);
/* The frozen bottom of the cut (its features are the boundary rows) or, top, the frozen top (it
 * reads them), with --init's start tensors, on the run's device and precision. */
ftl_status cut_half_load(const ftl_train_options *o, bool top, const ftl_tensor_override *start, int n_start,
                         ftl_model **out);
/* Loads bottom's model if it has none and sets up its boundary sources (cached, or per batch) if
 * not yet done, over r's data and cache folder; the summary gets the boundary's facts. */
ftl_status boundary_setup(const train_run *r, const ftl_train_options *o, const ftl_tensor_override *start, int n_start,
                          train_run *bottom, ftl_train_summary *s);
/* Phase 2: the cut's top and the head trained together on the frozen bottom's boundary tensors
 * (`bottom`: phase 1's, its model loaded and maybe its sources set up, or empty: set up here; the
 * caller frees it),
 * from head_params (phase 1's best; NULL when resuming phase 2 or from --init) with `initial` as
 * epoch 0; rank 0 writes the model with the tuned tensors. base_meta: phase 1's checkpoint identity;
 * run_record: the log's run record for phase 2 (its fields; "phase" and "fine_tune" are added). */
ftl_status fine_tune_phase(train_run *r, train_run *bottom, const ftl_train_options *o, const float *head_params,
                           ftl_epoch_log initial, bool resume, const ftl_kv *base_meta, size_t n_base_meta,
                           const char *run_record, ftl_train_summary *s);

#endif
