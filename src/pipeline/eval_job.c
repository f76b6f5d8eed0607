/* `ftl eval MODEL.ftl DATA`: streams a dataset through the backbone (or its cached features) and
 * the trained head; loss, top-1, top-5, per-class accuracy and the confusion matrix. */
#include "ftl/pipeline.h"
#include "ftl/loader.h"
#include "ftl/image.h"
#include "ftl/dist.h"
#include "data/dataset.h"
#include "data/loader_plan.h"
#include "pipeline/classifier_backbone.h"
#include "pipeline/dataset_classes.h"
#include "pipeline/feature_cache.h"
#include "nn/onnx/backbone_files.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/io_check.h"
#include "util/json.h"
#include "util/log.h"
#include "util/progress.h"
#include "util/timing.h"
#include "util/interrupt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ftl_eval_options_init(ftl_eval_options *o) {
    memset(o, 0, sizeof *o);
    o->batch = 32;
    o->loader_threads = 0;
    o->show_progress = true;
}

typedef struct eval_state {
    ftl_eval_result *r;
    ftl_classifier *clf;
    float *logits;
    int64_t *class_correct, *class_total;
    double loss_sum;
    int64_t top1, top5;
    ftl_atomic_file csv;   /* --predictions on rank 0, renamed into place only when complete */
    bool predictions;
    ftl_strbuf lines;      /* other ranks' prediction lines, gathered to rank 0 at the end */
} eval_state;

/* A CSV field: quoted, with quotes doubled. */
static void csv_append(ftl_strbuf *b, const char *s) {
    ftl_strbuf_append(b, "\"", 1);
    for (; *s; s++) ftl_strbuf_append(b, *s == '"' ? "\"\"" : s, *s == '"' ? 2 : 1);
    ftl_strbuf_append(b, "\"", 1);
}

/* Accumulates one batch of features: argmax of the logits (first maximum, as the trainer's
 * accuracy), log-sum-exp loss in double, top-5 membership. With flip TTA (x_mirrored: the mirror
 * images' features) the logits are log(mean probability), so the same code scores the mean. */
static ftl_status eval_batch(eval_state *e, const float *x, const float *x_mirrored, const int32_t *labels,
                             const char *const *paths, int64_t n) {
    int64_t c = e->clf->head.classes;
    if (x_mirrored) FTL_TRY(ftl_head_predict_tta(&e->clf->head, x, x_mirrored, (size_t)n, NULL, e->logits));
    else FTL_TRY(ftl_head_predict(&e->clf->head, x, (size_t)n, NULL, e->logits));
    for (int64_t i = 0; i < n; i++) {
        const float *z = e->logits + i * c;
        int32_t y = labels[i];
        if (y < 0 || y >= c)
            return ftl_fail(FTL_E_FORMAT, "row %lld%s%s has label %d but the model knows %lld classes",
                            (long long)(e->r->rows + i), paths ? " " : "", paths ? paths[i] : "", y, (long long)c);
        int64_t best = 0;
        double maxz = z[0];
        for (int64_t k = 1; k < c; k++)
            if (z[k] > z[best]) best = k;
        for (int64_t k = 1; k < c; k++) maxz = z[k] > maxz ? z[k] : maxz;
        double sum = 0;
        for (int64_t k = 0; k < c; k++) sum += exp((double)z[k] - maxz);
        e->loss_sum += log(sum) + maxz - (double)z[y];
        int64_t above = 0; /* classes ranked strictly above the true one */
        for (int64_t k = 0; k < c; k++) above += z[k] > z[y] || (z[k] == z[y] && k < y);
        e->top1 += best == y;
        e->top5 += above < 5;
        e->class_total[y]++;
        e->class_correct[y] += best == y;
        e->r->confusion[y * c + best]++;
        if (e->predictions) {
            double p = exp((double)z[best] - maxz) / sum;
            ftl_strbuf line = {0};
            csv_append(&line, paths ? paths[i] : "");
            ftl_strbuf_printf(&line, ",%d,%lld,%.6f\n", y, (long long)best, p);
            if (e->csv.fp) fputs(line.data, e->csv.fp);
            else ftl_strbuf_append(&e->lines, line.data, line.len);
            ftl_strbuf_free(&line);
        }
    }
    e->r->rows += n;
    return FTL_OK;
}

/* Where eval's rows come from when the feature cache holds them all. */
typedef struct cached_rows {
    feature_cache_parts parts; /* count 0: not cached, run the backbone */
    feature_cache_parts mirrored; /* flip TTA: the mirror images' rows (then parts.count > 0 too) */
    ftl_model *bottom, *top;   /* a fine-tuned model: the cut's frozen bottom (the key) and the tuned top */
} cached_rows;

static void cached_rows_free(cached_rows *c) {
    feature_cache_parts_free(&c->parts);
    feature_cache_parts_free(&c->mirrored);
    ftl_model_free(c->bottom);
    ftl_model_free(c->top);
    memset(c, 0, sizeof *c);
}

/* "last N" / "from TENSOR", as the model file records the cut (from points into text). */
static bool parse_cut(const char *text, ftl_fine_tune_cut *cut) {
    memset(cut, 0, sizeof *cut);
    char *end = NULL;
    if (strncmp(text, "last ", 5) == 0) {
        long n = strtol(text + 5, &end, 10);
        if (end == text + 5 || *end || n < 1 || n > 1000000) return false;
        cut->last_convs = (int)n;
        return true;
    }
    if (strncmp(text, "from ", 5) == 0 && text[5]) {
        cut->from_tensor = text + 5;
        return true;
    }
    return false;
}

/* The options of a fine-tuned model's bottom or top: as its tuned backbone was loaded. */
static ftl_model_options cut_half_options(const classifier_backbone *cb) {
    const ftl_model_info *info = ftl_model_get_info(cb->backbone);
    ftl_model_options mo;
    ftl_model_options_init(&mo);
    mo.features_from = info->feature_name;
    mo.precision = cb->precision;
    mo.int8_scales = cb->int8_scales;
    mo.conv_algorithm = cb->conv_algorithm;
    mo.threads = info->threads;
    mo.device = cb->device;
    mo.batch = info->batch;
    mo.overrides = cb->clf.tuned;
    mo.n_overrides = cb->clf.n_tuned;
    return mo;
}

static ftl_status cached_rows_find(cached_rows *c, classifier_backbone *cb, const ftl_eval_options *o,
                                   const ftl_embed_options *eo, const char *cache_dir, int64_t begin, int64_t end,
                                   bool tta, const ftl_collectives *col) {
    const char *src[1] = {o->data_path};
    feature_cache_request req = {.sources = src, .source_count = 1, .what = "eval", .embed = eo, .model = cb->backbone,
                                 .cache_dir = cache_dir, .row_begin = begin, .row_end = end, .collectives = col};
    const char *cut_text = ftl_classifier_metadata(&cb->clf, FTL_MODEL_META_FINE_TUNE_CUT);
    const char *bottom_identity = ftl_classifier_metadata(&cb->clf, FTL_MODEL_META_BOTTOM_IDENTITY);
    ftl_fine_tune_cut cut;
    if (cut_text && cb->clf.n_tuned > 0) {
        /* the tuned backbone's own features are never cached: its boundary rows may be */
        if (!bottom_identity) return FTL_OK; /* a model file from before boundary reuse */
        if (!parse_cut(cut_text, &cut)) {
            ftl_log_warn("eval: %s records the cut \"%s\", which is not \"last N\" or \"from TENSOR\"; computing the "
                         "features from the images", o->model_path, cut_text);
            return FTL_OK;
        }
        ftl_model_options mo = cut_half_options(cb);
        mo.bottom_of = &cut;
        if (ftl_model_load(cb->backbone_path, &mo, &c->bottom) != FTL_OK) { /* the whole backbone still can */
            ftl_log_warn("eval: cannot load the frozen bottom of %s's cut (%s): %s; computing the features from the images",
                         o->model_path, cut_text, ftl_last_error());
            ftl_clear_error();
            return FTL_OK;
        }
        if (strcmp(ftl_model_get_info(c->bottom)->identity, bottom_identity) != 0) {
            ftl_log_warn("eval: the frozen bottom of %s's cut (%s) has identity %.16s..., the file records %.16s...; "
                         "not using its boundary rows", o->model_path, cut_text, ftl_model_get_info(c->bottom)->identity,
                         bottom_identity);
            cached_rows_free(c);
            return FTL_OK;
        }
        req.model = c->bottom;
    }
    FTL_TRY(feature_cache_lookup(&req, &c->parts));
    if (c->parts.count > 0 && tta) { /* both orientations from the cache, or both from the images */
        req.flipped = true;
        FTL_TRY(feature_cache_lookup(&req, &c->mirrored));
        if (c->mirrored.count == 0) {
            ftl_log_info("eval: the feature cache %s holds the rows but not their mirror images' (--tta flip); computing "
                         "both orientations from the images", cache_dir);
            feature_cache_parts_free(&c->parts);
            memset(&c->parts, 0, sizeof c->parts);
        }
    }
    if (c->parts.count == 0) {
        ftl_log_info("eval: the feature cache %s does not hold %s of rows %lld-%lld; computing their features", cache_dir,
                     c->bottom ? "the boundary rows" : "the features", (long long)begin, (long long)end);
        return FTL_OK;
    }
    if (c->bottom) {
        ftl_model_options mo = cut_half_options(cb);
        mo.top_of = &cut;
        if (ftl_model_load(cb->backbone_path, &mo, &c->top) != FTL_OK) {
            ftl_log_warn("eval: cannot load the tuned top of %s's cut (%s): %s; computing the features from the images",
                         o->model_path, cut_text, ftl_last_error());
            ftl_clear_error();
            cached_rows_free(c);
            return FTL_OK;
        }
        ftl_log_info("eval: reusing the boundary rows of the cut (%s) from %d part%s in %s: only the tuned top and the "
                     "head run", cut_text, c->parts.count, c->parts.count == 1 ? "" : "s", cache_dir);
    } else {
        ftl_log_info("eval: reusing the features of rows %lld-%lld from %d part%s in %s: only the head runs", (long long)begin,
                     (long long)end, c->parts.count, c->parts.count == 1 ? "" : "s", cache_dir);
    }
    return FTL_OK;
}

/* Before any work: no output is an input or another output, and none exists without overwrite. */
static ftl_status eval_check_paths(const ftl_eval_options *o) {
    ftl_io_check *c = ftl_io_check_new("eval");
    const char *outputs[3][2] = {{"--predictions", o->predictions_path}, {"--json", o->json_path},
                                 {"--confusion", o->confusion_path}};
    for (int i = 0; i < 3; i++) ftl_io_check_output(c, outputs[i][0], outputs[i][1]);
    ftl_io_check_input(c, "MODEL", o->model_path);
    ftl_io_check_input(c, "DATA", o->data_path);
    nn_io_check_backbone(c, "--backbone", o->backbone_path);
    ftl_status st = ftl_io_check_run(c);
    ftl_io_check_free(c);
    for (int i = 0; i < 3 && st == FTL_OK; i++)
        if (outputs[i][1] && !o->overwrite && ftl_path_exists(outputs[i][1]))
            st = ftl_fail(FTL_E_EXISTS, "%s %s already exists (use --overwrite to replace it)", outputs[i][0], outputs[i][1]);
    return st;
}

/* Exact global sums over the ranks: counts as integers, the loss as a double sum; rank 0 gets every
 * rank's prediction lines, in rank (= dataset) order. */
static ftl_status sum_over_ranks(eval_state *e, const ftl_eval_options *o) {
    const ftl_collectives *col = o->collectives;
    bool rank0 = ftl_dist_rank(col) == 0;
    int64_t c = e->r->classes;
    ftl_dist_set_context(col, -1, "summing the eval metrics");
    int64_t n = 3 + 2 * c + c * c;
    int64_t *v = ftl_xcalloc((size_t)n, sizeof *v);
    v[0] = e->r->rows, v[1] = e->top1, v[2] = e->top5;
    memcpy(v + 3, e->class_correct, (size_t)c * sizeof *v);
    memcpy(v + 3 + c, e->class_total, (size_t)c * sizeof *v);
    memcpy(v + 3 + 2 * c, e->r->confusion, (size_t)(c * c) * sizeof *v);
    ftl_status st = ftl_dist_allreduce_i64(col, v, (size_t)n);
    if (st == FTL_OK) st = ftl_dist_allreduce_f64(col, &e->loss_sum, 1);
    e->r->rows = v[0], e->top1 = v[1], e->top5 = v[2];
    memcpy(e->class_correct, v + 3, (size_t)c * sizeof *v);
    memcpy(e->class_total, v + 3 + c, (size_t)c * sizeof *v);
    memcpy(e->r->confusion, v + 3 + 2 * c, (size_t)(c * c) * sizeof *v);
    free(v);
    if (st == FTL_OK && e->predictions) { /* every rank's lines, in rank (= dataset) order */
        uint8_t *all = NULL;
        size_t *sizes = ftl_xcalloc((size_t)ftl_dist_size(col), sizeof *sizes);
        st = ftl_dist_gather(col, e->lines.data ? e->lines.data : "", e->lines.len, 0, &all, sizes);
        size_t bytes = 0;
        for (int k = 0; k < ftl_dist_size(col); k++) bytes += sizes[k];
        if (st == FTL_OK && rank0 && bytes) st = ftl_write_all(e->csv.fp, all, bytes, o->predictions_path);
        free(sizes);
        free(all);
    }
    return st;
}

/* Where `ftl train` or `ftl sweep` left the features of this model's data, or NULL: the folder next
 * to the model (train's default), else the one of a sweep's trials beside BEST.ftl
 * (BEST.trials/ftl-feature-cache/, where the trials that made it trained). */
static char *default_cache_dir(const char *model_path) {
    const char *slash = strrchr(model_path, '/');
    char *next_to = slash ? ftl_format("%.*s/ftl-feature-cache", (int)(slash - model_path), model_path)
                          : ftl_strdup("ftl-feature-cache");
    if (ftl_is_directory(next_to)) return next_to;
    free(next_to);
    size_t n = strlen(model_path);
    bool ftl_suffix = n > 4 && strcmp(model_path + n - 4, ".ftl") == 0;
    char *trials = ftl_format("%.*s.trials/ftl-feature-cache", (int)(ftl_suffix ? n - 4 : n), model_path);
    if (ftl_is_directory(trials)) return trials;
    free(trials);
    return NULL;
}

/* Without --cache-dir, the cache `ftl train` leaves next to the model by default, or a sweep's (only
 * files of exactly this key are used: same data, backbone, preprocessing, precision, algorithm); NULL: none. */
static char *eval_cache_dir(const ftl_eval_options *o) {
    return o->cache_dir ? ftl_strdup(o->cache_dir) : default_cache_dir(o->model_path);
}

/* Flip TTA as asked, else as the model records it (older models: none). */
static bool eval_tta(const ftl_eval_options *o, const ftl_classifier *clf) {
    const char *recorded = ftl_classifier_metadata(clf, FTL_MODEL_META_TTA);
    bool flip = o->tta == FTL_TTA_FLIP || (o->tta == FTL_TTA_AS_TRAINED && recorded && strcmp(recorded, "flip") == 0);
    if (flip)
        ftl_log_info("eval: flip TTA (%s): each image scored by the mean of its and its mirror image's probabilities",
                     o->tta == FTL_TTA_FLIP ? "--tta flip" : "as the model was trained");
    return flip;
}

/* A loader over rows [at, next) in order: of the dataset's images, or of the cache part that holds
 * them (rows of `want` floats). */
static ftl_status open_segment(const ftl_eval_options *o, const char *const *src, const feature_part *part, int64_t at,
                               int64_t next, int label_offset, int64_t want, ftl_loader **out) {
    *out = NULL;
    ftl_loader_options lo;
    ftl_loader_options_init(&lo);
    const char *part_src[1] = {part ? part->path : NULL};
    lo.sources = part ? part_src : src;
    lo.source_count = 1;
    lo.value_column = part ? FTL_COLUMN_FEATURES : (o->image_column ? o->image_column : FTL_COLUMN_IMAGE);
    if (o->label_column && !part) lo.label_column = o->label_column;
    lo.path_column = FTL_COLUMN_PATH;
    lo.path_optional = true;
    lo.image_size = part ? 0 : o->image_size;
    lo.batch_size = o->batch;
    lo.shuffle = false;
    lo.equal_batches = false;
    lo.epochs = 1;
    lo.threads = o->loader_threads; /* 0: the loader's default for the dataset */
    lo.label_offset = part ? 0 : label_offset; /* cached labels carry it already */
    lo.row_begin = part ? at - part->begin : at;
    lo.row_end = part ? next - part->begin : next;
    FTL_TRY(ftl_loader_open(&lo, out));
    int64_t bytes = ftl_loader_row_bytes(*out);
    if (part && bytes != want * 4) {
        ftl_loader_close(*out);
        *out = NULL;
        return ftl_fail(FTL_E_FORMAT, "%s: rows have %lld floats, the model expects %lld", part->path,
                        (long long)bytes / 4, (long long)want);
    }
    return FTL_OK;
}

ftl_status ftl_eval_run(const ftl_eval_options *o, ftl_eval_result *r) {
    memset(r, 0, sizeof *r);
    double start = ftl_now();
    /* rank 0 alone writes the outputs */
    if (ftl_dist_rank(o->collectives) == 0) FTL_TRY(eval_check_paths(o));
    classifier_backbone cb;
    FTL_TRY(classifier_backbone_open(&cb, o->model_path, o->backbone_path, o->batch, o->threads, o->device));
    int64_t c = cb.clf.head.classes;
    r->classes = c;
    r->class_names = ftl_xcalloc((size_t)c, sizeof *r->class_names);
    for (int64_t k = 0; k < c; k++) r->class_names[k] = ftl_strdup(cb.clf.class_names[k]);
    r->confusion = ftl_xcalloc((size_t)(c * c), sizeof *r->confusion);
    eval_state e = {.r = r, .clf = &cb.clf};
    e.class_correct = ftl_xcalloc((size_t)c, sizeof(int64_t));
    e.class_total = ftl_xcalloc((size_t)c, sizeof(int64_t));
    ftl_status st = FTL_OK;
    const ftl_collectives *col = o->collectives;
    bool rank0 = ftl_dist_rank(col) == 0;
    e.predictions = o->predictions_path != NULL;
    if (o->predictions_path && rank0) {
        st = ftl_atomic_open(&e.csv, o->predictions_path);
        e.csv.no_replace = !o->overwrite;
        if (st == FTL_OK) fprintf(e.csv.fp, "path,label,predicted,probability\n");
    }
    /* The dataset must mean the same classes and hold images of the size the model was trained on. */
    const char *src[1] = {o->data_path};
    const char *label_col = o->label_column ? o->label_column : FTL_COLUMN_LABEL;
    /* Labels as the model was trained on them (--label-offset is recorded in the model). */
    const char *offset_meta = ftl_classifier_metadata(&cb.clf, "ftl.label_offset");
    int label_offset = offset_meta ? atoi(offset_meta) : 0;
    if (o->label_offset_given && o->label_offset != label_offset)
        ftl_log_warn("%s was trained with --label-offset %d; evaluating with %d as asked", o->model_path, label_offset,
                     o->label_offset);
    if (o->label_offset_given) label_offset = o->label_offset;
    if (st == FTL_OK) st = dataset_check_classes(src, label_col, label_offset, cb.clf.class_names, c, o->model_path);
    int data_size = 0;
    if (st == FTL_OK) st = loader_dataset_image_size(src, 1, o->image_size, &data_size);
    if (st == FTL_OK && data_size != cb.input_size)
        st = ftl_fail(FTL_E_INVALID_ARG, "%s holds %dx%d images but %s was trained on %dx%d: prep the data with --size %d",
                      o->data_path, data_size, data_size, o->model_path, cb.input_size, cb.input_size, cb.input_size);
    /* This rank's rows: a contiguous share, so rank order is dataset order. */
    int64_t total = 0, begin = 0, end = 0;
    if (st == FTL_OK) st = loader_total_rows(src, 1, &total);
    begin = ftl_dist_rank(col) * total / ftl_dist_size(col);
    end = (ftl_dist_rank(col) + 1) * total / ftl_dist_size(col);
    /* This rank's rows from the feature cache when it holds all of them (in any number of parts): the
     * features of a frozen model, or for a fine-tuned one the boundary rows of its cut, which the
     * tuned top turns into features. Else from the images, through the whole backbone. */
    ftl_embed_options eo;
    ftl_embed_options_init(&eo);
    eo.backbone_path = cb.backbone_path;
    eo.preprocess = cb.preprocess;
    eo.precision = cb.precision;
    eo.int8_scales = cb.int8_scales;
    eo.device = o->device;
    eo.conv_algorithm = cb.conv_algorithm;
    eo.image_column = o->image_column;
    eo.label_column = o->label_column;
    eo.image_size = o->image_size;
    eo.label_offset = label_offset;
    bool tta = eval_tta(o, &cb.clf);
    char *cache_dir = eval_cache_dir(o);
    cached_rows from = {0};
    if (st == FTL_OK && cache_dir && end > begin) st = cached_rows_find(&from, &cb, o, &eo, cache_dir, begin, end, tta, col);
    size_t feature_bytes = (size_t)(o->batch * cb.clf.head.dim) * sizeof(float) + 1;
    float *features = ftl_xmalloc(feature_bytes), *features_m = tta ? ftl_xmalloc(feature_bytes) : NULL;
    uint8_t *mirrored_images = NULL; /* flip TTA from the images: the batch mirrored */
    if (st == FTL_OK) e.logits = ftl_xmalloc((size_t)(o->batch * c) * sizeof(float));
    ftl_progress progress;
    bool show = o->show_progress && st == FTL_OK && end > begin && rank0;
    if (show) ftl_progress_start(&progress, "eval", "images", end - begin);
    ftl_dist_phase_begin(col, "evaluating its shard");
    int64_t want = from.top ? ftl_model_get_info(from.top)->input_floats : cb.clf.head.dim;
    /* Segments of rows in order: [at, next) from one cache part each (and one of the mirrored rows' with
     * TTA), or all of them from the images. */
    for (int64_t at = begin, k = 0, km = 0; st == FTL_OK && at < end;) {
        const feature_part *part = from.parts.count ? &from.parts.parts[k] : NULL;
        const feature_part *mpart = from.mirrored.count ? &from.mirrored.parts[km] : NULL;
        int64_t next = end;
        if (part && part->end < next) next = part->end;
        if (mpart && mpart->end < next) next = mpart->end;
        ftl_loader *l = NULL, *lm = NULL;
        st = open_segment(o, src, part, at, next, label_offset, want, &l);
        if (st == FTL_OK && mpart) st = open_segment(o, src, mpart, at, next, label_offset, want, &lm);
        ftl_batch b, bm;
        while (st == FTL_OK && (st = ftl_interrupt_check()) == FTL_OK && (st = ftl_loader_next(l, &b)) == FTL_OK && b.rows > 0) {
            if (lm && (st = ftl_loader_next(lm, &bm)) == FTL_OK && bm.rows != b.rows)
                st = ftl_fail(FTL_E_FORMAT, "%s: the mirrored rows' batch has %lld rows, the rows' %lld", mpart->path,
                              (long long)bm.rows, (long long)b.rows);
            const float *x = (const float *)b.values, *xm = NULL;
            int size = ftl_loader_image_size(l);
            if (st == FTL_OK && !part) {
                st = ftl_model_extract_features(cb.backbone, &cb.preprocess, b.values, (int)b.rows, size, features);
                x = features;
                if (st == FTL_OK && tta) {
                    mirrored_images = ftl_xrealloc(mirrored_images, (size_t)b.rows * (size_t)b.row_bytes);
                    ftl_image_flip_horizontal(b.values, mirrored_images, (int)b.rows, size);
                    st = ftl_model_extract_features(cb.backbone, &cb.preprocess, mirrored_images, (int)b.rows, size,
                                                    features_m);
                    xm = features_m;
                }
            } else if (st == FTL_OK) {
                xm = lm ? (const float *)bm.values : NULL;
                if (from.top) {
                    st = ftl_model_run(from.top, x, (int)b.rows, features);
                    x = features;
                    if (st == FTL_OK && lm) st = ftl_model_run(from.top, xm, (int)b.rows, features_m);
                    if (lm) xm = features_m;
                }
            }
            if (st == FTL_OK) st = eval_batch(&e, x, xm, b.labels, b.paths, b.rows);
            if (show) ftl_progress_update(&progress, r->rows);
        }
        ftl_loader_close(l);
        ftl_loader_close(lm);
        at = next;
        if (part && at >= part->end) k++;
        if (mpart && at >= mpart->end) km++;
    }
    ftl_dist_phase_end(col);
    if (show) ftl_progress_finish(&progress, r->rows);
    if (st == FTL_OK && ftl_dist_active(col)) st = sum_over_ranks(&e, o);
    if (st == FTL_OK && r->rows == 0) st = ftl_fail(FTL_E_FORMAT, "%s has no rows", o->data_path);
    if (st == FTL_OK) {
        r->loss = e.loss_sum / (double)r->rows;
        r->top1 = (double)e.top1 / (double)r->rows;
        r->top5 = (double)e.top5 / (double)r->rows;
    }
    if (e.csv.fp) {
        if (st == FTL_OK) st = ftl_atomic_commit(&e.csv);
        else ftl_atomic_abort(&e.csv);
    }
    free(features);
    free(features_m);
    free(mirrored_images);
    free(e.logits);
    free(e.class_correct);
    free(e.class_total);
    cached_rows_free(&from);
    free(cache_dir);
    ftl_strbuf_free(&e.lines);
    classifier_backbone_close(&cb);
    r->seconds = ftl_now() - start;
    if (st != FTL_OK) ftl_eval_result_free(r);
    return st;
}

void ftl_eval_result_free(ftl_eval_result *r) {
    for (int64_t k = 0; r->class_names && k < r->classes; k++) free(r->class_names[k]);
    free(r->class_names);
    free(r->confusion);
    memset(r, 0, sizeof *r);
}

void ftl_eval_result_print(const ftl_eval_result *r, FILE *out) {
    fprintf(out, "eval: %lld images in %.2f s - loss: %.4f - top-1: %.4f - top-5: %.4f\n", (long long)r->rows, r->seconds,
            r->loss, r->top1, r->top5);
    int shown = r->classes < 50 ? (int)r->classes : 50;
    fprintf(out, "  %-24s %8s %8s\n", "class", "images", "accuracy");
    for (int k = 0; k < shown; k++) {
        int64_t total = 0;
        for (int64_t j = 0; j < r->classes; j++) total += r->confusion[k * r->classes + j];
        fprintf(out, "  %-24.24s %8lld %8.4f\n", r->class_names[k], (long long)total,
                total ? (double)r->confusion[k * r->classes + k] / (double)total : 0.0);
    }
    if (shown < r->classes) fprintf(out, "  ... %lld more classes (--json or --confusion for all)\n", (long long)(r->classes - shown));
    if (r->classes <= 10) {
        fprintf(out, "  confusion (rows: true class, columns: predicted)\n  %-12s", "");
        for (int64_t j = 0; j < r->classes; j++) fprintf(out, " %10.10s", r->class_names[j]);
        fprintf(out, "\n");
        for (int64_t i = 0; i < r->classes; i++) {
            fprintf(out, "  %-12.12s", r->class_names[i]);
            for (int64_t j = 0; j < r->classes; j++) fprintf(out, " %10lld", (long long)r->confusion[i * r->classes + j]);
            fprintf(out, "\n");
        }
    }
}

char *ftl_eval_result_json(const ftl_eval_result *r) {
    ftl_strbuf b = {0};
    ftl_strbuf_printf(&b, "{\"images\": %lld, \"loss\": ", (long long)r->rows);
    ftl_json_append_number(&b, r->loss);
    ftl_strbuf_printf(&b, ", \"top1\": ");
    ftl_json_append_number(&b, r->top1);
    ftl_strbuf_printf(&b, ", \"top5\": ");
    ftl_json_append_number(&b, r->top5);
    ftl_strbuf_printf(&b, ", \"classes\": [");
    for (int64_t k = 0; k < r->classes; k++) {
        int64_t total = 0;
        for (int64_t j = 0; j < r->classes; j++) total += r->confusion[k * r->classes + j];
        ftl_strbuf_printf(&b, "%s{\"name\": ", k ? ", " : "");
        ftl_json_append_string(&b, r->class_names[k]);
        ftl_strbuf_printf(&b, ", \"images\": %lld, \"accuracy\": ", (long long)total);
        ftl_json_append_number(&b, total ? (double)r->confusion[k * r->classes + k] / (double)total : 0.0);
        ftl_strbuf_printf(&b, "}");
    }
    ftl_strbuf_printf(&b, "], \"confusion\": [");
    for (int64_t i = 0; i < r->classes; i++) {
        ftl_strbuf_printf(&b, "%s[", i ? ", " : "");
        for (int64_t j = 0; j < r->classes; j++) ftl_strbuf_printf(&b, "%s%lld", j ? ", " : "", (long long)r->confusion[i * r->classes + j]);
        ftl_strbuf_printf(&b, "]");
    }
    ftl_strbuf_printf(&b, "]}\n");
    return b.data;
}

ftl_status ftl_eval_result_write_json(const ftl_eval_result *r, const char *path, bool overwrite) {
    char *json = ftl_eval_result_json(r);
    ftl_status st = ftl_output_write(path, json, strlen(json), overwrite);
    free(json);
    return st;
}

ftl_status ftl_eval_result_write_confusion_csv(const ftl_eval_result *r, const char *path, bool overwrite) {
    ftl_strbuf b = {0};
    ftl_strbuf_printf(&b, "true\\predicted");
    for (int64_t j = 0; j < r->classes; j++) {
        ftl_strbuf_append(&b, ",", 1);
        csv_append(&b, r->class_names[j]);
    }
    ftl_strbuf_printf(&b, "\n");
    for (int64_t i = 0; i < r->classes; i++) {
        csv_append(&b, r->class_names[i]);
        for (int64_t j = 0; j < r->classes; j++) ftl_strbuf_printf(&b, ",%lld", (long long)r->confusion[i * r->classes + j]);
        ftl_strbuf_printf(&b, "\n");
    }
    ftl_status st = ftl_output_write(path, b.data, b.len, overwrite);
    ftl_strbuf_free(&b);
    return st;
}
