/* `ftl train`: backbone -> (feature cache | per-batch backbone) -> trainer -> MODEL.ftl (phase 1, the head),
 * then fine_tune_phase.c's phase 2 when a fine-tuning cut is given. */
#include "ftl/pipeline.h"
#include "ftl/loader.h"
#include "ftl/dist.h"
#include "ftl/parquet.h"
#include "data/dataset.h"
#include "data/loader_plan.h"
#include "pipeline/dataset_classes.h"
#include "pipeline/feature_cache.h"
#include "pipeline/loader_source.h"
#include "pipeline/store_sources.h"
#include "pipeline/train_checks.h"
#include "pipeline/train_paths.h"
#include "pipeline/train_run.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"
#include "util/log.h"
#include "util/timing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void ftl_train_options_init(ftl_train_options *o) {
    memset(o, 0, sizeof *o);
    ftl_embed_options_init(&o->embed);
    o->feature_cache = true;
    o->shuffle_buffer = 400;
    o->fit = ftl_fit_config_default();
    o->show_progress = true;
    o->fine_tune_epochs = 10;
    o->fine_tune_lr = 1e-5;
}

/* Cached rows held in memory: half the RAM, at most 1 GiB, so a run's peak memory stays the same
 * at any dataset size (larger sets stream from the cache files, which the page cache keeps warm). */
static int64_t default_max_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    int64_t half = pages > 0 && page > 0 ? (int64_t)pages * page / 2 : (int64_t)1 << 30;
    return half < ((int64_t)1 << 30) ? half : (int64_t)1 << 30;
}

/* The image loader a run reads (or would read) its training data through: its order is the
 * training order in every mode. */
ftl_loader_options train_run_order(const ftl_train_options *o, const char *const *sources) {
    ftl_loader_options lo;
    ftl_loader_options_init(&lo);
    lo.sources = sources;
    lo.source_count = 1;
    if (o->embed.image_column) lo.value_column = o->embed.image_column;
    if (o->embed.label_column) lo.label_column = o->embed.label_column;
    lo.image_size = o->embed.image_size;
    lo.batch_size = (int)o->fit.batch_size;
    lo.drop_remainder = o->fit.drop_remainder;
    lo.shuffle = true;
    lo.shuffle_buffer = o->shuffle_buffer;
    lo.seed = o->fit.seed;
    lo.epochs = 0; /* endless: the trainer decides when to stop */
    lo.steps_per_epoch = o->fit.steps_per_epoch;
    lo.equal_batches = true;
    lo.label_offset = o->embed.label_offset;
    lo.shard = o->fit.collectives.rank;
    lo.num_shards = o->fit.collectives.world_size > 0 ? o->fit.collectives.world_size : 1;
    lo.threads = o->embed.loader_threads; /* 0: the loader's default for the dataset */
    lo.cache_dir = o->data_cache_dir;
    lo.cache_size_limit = o->data_cache_limit;
    return lo;
}

static ftl_loader_options val_order(const ftl_train_options *o, const char *const *sources) {
    ftl_loader_options lo = train_run_order(o, sources);
    lo.batch_size = (int)(o->fit.eval_batch_size > 0 ? o->fit.eval_batch_size : 256);
    lo.drop_remainder = false;
    lo.shuffle = false;
    lo.steps_per_epoch = 0;
    lo.equal_batches = false;
    return lo;
}

char *train_run_args_json(const ftl_train_options *o) {
    const ftl_fit_config *f = &o->fit;
    ftl_strbuf b = {0};
    ftl_strbuf_printf(&b, "{\"optimizer\": \"%s\", \"lr\": ", ftl_optimizer_kind_name(f->optimizer.kind));
    ftl_json_append_number(&b, f->optimizer.lr);
    if (f->optimizer.kind == FTL_OPTIMIZER_SGD) {
        ftl_strbuf_append(&b, ", \"momentum\": ", 14);
        ftl_json_append_number(&b, f->optimizer.momentum);
        ftl_strbuf_printf(&b, ", \"nesterov\": %s", f->optimizer.nesterov ? "true" : "false");
    }
    ftl_strbuf_append(&b, ", \"weight_decay\": ", 18);
    ftl_json_append_number(&b, f->optimizer.weight_decay);
    ftl_strbuf_printf(&b, ", \"batch\": %lld, \"epochs\": %lld, \"steps_per_epoch\": %lld, \"seed\": %llu, \"dropout\": ",
                      (long long)f->batch_size, (long long)f->epochs, (long long)f->steps_per_epoch, (unsigned long long)f->seed);
    ftl_json_append_number(&b, f->dropout);
    ftl_strbuf_printf(&b, ", \"scale_lr\": \"%s\", \"base_batch\": %lld, \"warmup_epochs\": ",
                      f->lr_scaling == FTL_LR_SCALE_LINEAR ? "linear" : f->lr_scaling == FTL_LR_SCALE_SQRT ? "sqrt" : "none",
                      (long long)f->base_batch);
    ftl_json_append_number(&b, f->warmup_epochs);
    char schedule[96];
    ftl_lr_decay_describe(&f->lr_decay, schedule, sizeof schedule);
    ftl_strbuf_printf(&b, ", \"lr_schedule\": \"%s\", \"label_smoothing\": ", schedule);
    ftl_json_append_number(&b, f->label_smoothing);
    if (o->fine_tune.last_convs > 0 || (o->fine_tune.from_tensor && o->fine_tune.from_tensor[0])) {
        ftl_strbuf_printf(&b, ", \"fine_tune\": {\"last_convs\": %d, \"from\": ", o->fine_tune.last_convs);
        if (o->fine_tune.from_tensor && o->fine_tune.from_tensor[0]) ftl_json_append_string(&b, o->fine_tune.from_tensor);
        else ftl_strbuf_append(&b, "null", 4);
        ftl_strbuf_printf(&b, ", \"epochs\": %lld, \"lr\": ", (long long)o->fine_tune_epochs);
        ftl_json_append_number(&b, o->fine_tune_lr);
        ftl_strbuf_printf(&b, ", \"warmup_epochs\": ");
        ftl_json_append_number(&b, o->fine_tune_warmup_epochs);
        ftl_lr_decay_describe(&o->fine_tune_lr_decay, schedule, sizeof schedule);
        ftl_strbuf_printf(&b, ", \"lr_schedule\": \"%s\", \"only\": %s}", schedule, o->fine_tune_only ? "true" : "false");
    }
    ftl_strbuf_printf(&b, ", \"augment\": \"%s\"", o->augment_flip ? "flip" : "none");
    ftl_strbuf_printf(&b, ", \"early_stopping\": %s, \"monitor\": \"%s\", \"patience\": %d, \"min_delta\": ",
                      f->early_stopping.stop ? "true" : "false", ftl_monitor_name(f->early_stopping.monitor),
                      f->early_stopping.patience);
    ftl_json_append_number(&b, f->early_stopping.min_delta);
    ftl_strbuf_printf(&b, ", \"restore_best\": %s, \"shuffle_buffer\": %lld, \"feature_cache\": %s, \"world_size\": %d",
                      f->early_stopping.restore_best ? "true" : "false", (long long)o->shuffle_buffer,
                      o->feature_cache ? "true" : "false", f->collectives.world_size);
    ftl_strbuf_append(&b, "}", 1);
    return b.data;
}

/* The log's first line for this run: what ran, on what data and backbone, where; `resume`: the
 * checkpoint this part of the run continues, or NULL. */
char *train_run_record_json(const ftl_train_options *o, int64_t dim, const char *classes_json, const ftl_model_info *info,
                            const char *head_device, const char *resume) {
    ftl_strbuf b = {0};
    ftl_strbuf_printf(&b, "{\"record\":\"run\",\"ftl_version\":\"%s\",\"command\":[\"ftl\"", FTL_VERSION);
    for (int i = 0; i < o->argc; i++) {
        ftl_strbuf_append(&b, ",", 1);
        ftl_json_append_string(&b, o->argv[i]);
    }
    time_t now = time(NULL);
    struct tm tm;
    char when[32] = "";
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    ftl_strbuf_printf(&b, "],\"started\":\"%s\",\"resume\":", when);
    if (resume) ftl_json_append_string(&b, resume);
    else ftl_strbuf_append(&b, "null", 4);
    ftl_strbuf_printf(&b, ",\"backbone\":{\"path\":");
    ftl_json_append_string(&b, o->embed.backbone_path);
    ftl_strbuf_printf(&b, ",\"sha256\":\"%s\",\"feature_tensor\":", info->sha256);
    ftl_json_append_string(&b, info->feature_name);
    ftl_strbuf_printf(&b, ",\"feature_dim\":%lld},\"train\":", (long long)dim);
    ftl_json_append_string(&b, o->train_path);
    ftl_strbuf_printf(&b, ",\"val\":");
    if (o->val_path) ftl_json_append_string(&b, o->val_path);
    else ftl_strbuf_append(&b, "null", 4);
    ftl_strbuf_printf(&b, ",\"classes\":%s,\"label_offset\":%d,\"precision\":\"%s\",\"conv_algorithm\":\"%s\","
                          "\"feature_cache\":%s,\"threads\":%d,\"ranks\":%d,\"device\":\"%s\",\"backbone_device\":",
                      classes_json ? classes_json : "[]", o->embed.label_offset, ftl_nn_precision_name(o->embed.precision),
                      ftl_nn_conv_algorithm_name(o->embed.conv_algorithm), o->feature_cache ? "true" : "false",
                      o->embed.threads > 0 ? o->embed.threads : ftl_cpu_count(), ftl_dist_size(&o->fit.collectives),
                      ftl_device_kind_name(info->device_kind == FTL_DEVICE_CUDA ? FTL_DEVICE_CUDA : FTL_DEVICE_CPU));
    ftl_json_append_string(&b, info->device ? info->device : "");
    ftl_strbuf_printf(&b, ",\"head_device\":");
    ftl_json_append_string(&b, head_device);
    ftl_strbuf_printf(&b, ",\"machine\":{\"host\":");
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    ftl_json_append_string(&b, host);
    char cpu[256] = "";
    FILE *fp = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (fp && fgets(line, sizeof line, fp))
        if (strncmp(line, "model name", 10) == 0) {
            const char *colon = strchr(line, ':');
            if (colon) snprintf(cpu, sizeof cpu, "%s", colon + 2);
            cpu[strcspn(cpu, "\n")] = '\0';
            break;
        }
    if (fp) fclose(fp);
    ftl_strbuf_printf(&b, ",\"cpu\":");
    ftl_json_append_string(&b, cpu);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    ftl_strbuf_printf(&b, ",\"cores\":%ld}}", online);
    return b.data;
}

char *train_run_metrics_json(const ftl_fit_result *r) {
    ftl_strbuf b = {0};
    ftl_strbuf_printf(&b, "{\"epochs_run\": %lld, \"best_epoch\": %lld, \"stopped_early\": %s, \"restored_best\": %s",
                      (long long)r->epochs_run, (long long)r->best_epoch, r->stopped_early ? "true" : "false",
                      r->restored_best ? "true" : "false");
    const struct { const char *name; double v; } m[] = {{"loss", r->final_loss}, {"acc", r->final_acc},
                                                         {"val_loss", r->final_val_loss}, {"val_acc", r->final_val_acc}};
    for (size_t i = 0; i < 4; i++) {
        ftl_strbuf_printf(&b, ", \"%s\": ", m[i].name);
        ftl_json_append_number(&b, m[i].v);
    }
    ftl_strbuf_append(&b, "}", 1);
    return b.data;
}


void train_run_free(train_run *r) {
    if (r->have_train_global) global_order_source_free(&r->train_global);
    if (r->have_val_local) file_order_source_free(&r->val_local);
    if (r->have_train_store) feature_store_close(&r->train_store);
    if (r->have_val_store) feature_store_close(&r->val_store);
    if (r->have_train_flipped) feature_store_close(&r->train_flipped);
    if (r->have_train_stream) loader_source_close(&r->train_stream);
    if (r->have_val_stream) loader_source_close(&r->val_stream);
    if (r->have_train_top) top_source_free(&r->train_top);
    if (r->have_val_top) top_source_free(&r->val_top);
    ftl_model_free(r->top);
    ftl_model_free(r->backbone);
    for (int64_t i = 0; i < r->class_count; i++) free(r->class_names[i]);
    free(r->class_names);
    free(r->preprocess_json);
    free(r->classes_json);
    free(r->cache_dir);
}

/* Creates the folder an output goes into, so a long run cannot fail at its very end. */
/* This rank's share of a dataset's rows: contiguous, sizes differing by at most one. */
static void rank_rows(const ftl_collectives *c, int64_t total, int64_t *begin, int64_t *end) {
    int64_t k = ftl_dist_rank(c), n = ftl_dist_size(c);
    *begin = k * total / n;
    *end = (k + 1) * total / n;
}

/* The trainer's sources over one rank's stores: global batches in the single-process order for
 * training, this rank's rows once for validation (val NULL: none). */
static ftl_status sources_over_stores(train_run *r, const ftl_train_options *o, feature_store *train, feature_store *flipped,
                                      feature_store *val, int64_t train_total, int64_t dim) {
    const char *train_src[1] = {o->train_path};
    ftl_loader_options torder = train_run_order(o, train_src);
    train->dim = dim; /* a rank with no rows has no part to learn it from */
    if (flipped) flipped->dim = dim;
    FTL_TRY(global_order_source_init(&r->train_global, &torder, train, flipped, o->fit.seed, train_total,
                                     ftl_dist_size(&o->fit.collectives)));
    r->have_train_global = true;
    r->train = global_order_source_as_batch_source(&r->train_global);
    if (val) {
        val->dim = dim;
        file_order_source_init(&r->val_local, val);
        r->have_val_local = true;
        r->val = file_order_source_as_batch_source(&r->val_local);
    }
    return FTL_OK;
}

/* Feature-cache mode: each rank embeds (or reuses) its rows of train and val, then trains on
 * global batches in the single-process order (in memory, or streamed from its parts). */
ftl_status train_run_setup_cached(train_run *r, const ftl_train_options *o, ftl_train_summary *s) {
    const ftl_collectives *col = &o->fit.collectives;
    const char *train_src[1] = {o->train_path}, *val_src[1] = {o->val_path};
    double t0 = ftl_now();
    int64_t train_total = 0, val_total = 0, tb, te, vb = 0, ve = 0;
    FTL_TRY(loader_total_rows(train_src, 1, &train_total));
    if (o->val_path) FTL_TRY(loader_total_rows(val_src, 1, &val_total));
    rank_rows(col, train_total, &tb, &te);
    rank_rows(col, val_total, &vb, &ve);
    feature_cache_parts tp = {0}, vp = {0};
    feature_cache_request req = {.sources = train_src, .source_count = 1, .what = "train", .embed = &o->embed,
                                 .model = r->backbone, .cache_dir = r->cache_dir, .row_begin = tb, .row_end = te,
                                 .collectives = col, .fingerprint = r->train_fingerprint[0] ? r->train_fingerprint : NULL};
    ftl_status st = te > tb ? feature_cache_get(&req, &tp) : FTL_OK;
    s->train_cache_reused = tp.reused;
    /* --augment flip: the mirrored images' features too, the training rows only */
    feature_cache_parts fp = {0};
    if (st == FTL_OK && o->augment_flip && te > tb) {
        req.flipped = true;
        st = feature_cache_get(&req, &fp);
        req.flipped = false;
        s->train_cache_reused = s->train_cache_reused && fp.reused;
    }
    if (st == FTL_OK && o->val_path && ve > vb) {
        req.sources = val_src;
        req.what = "val";
        req.fingerprint = NULL;
        req.row_begin = vb;
        req.row_end = ve;
        st = feature_cache_get(&req, &vp);
        s->val_cache_reused = vp.reused;
    }
    s->features_seconds = ftl_now() - t0;
    int64_t dim = ftl_model_get_info(r->backbone)->feature_dim;
    int64_t bytes = ((te - tb) * (o->augment_flip ? 2 : 1) + (ve - vb)) * dim * 4;
    int64_t limit = o->max_memory > 0 ? o->max_memory : default_max_memory();
    s->features_in_memory = bytes <= limit;
    if (st == FTL_OK && !s->features_in_memory)
        ftl_log_info("feature cache: %.1f GiB of features exceed the memory limit; streaming them", (double)bytes / (1 << 30));
    /* Streaming keeps a few row groups per file decoded: an eighth of the limit, at most 256 MiB. */
    int64_t stream_bytes = limit / 8 < ((int64_t)256 << 20) ? limit / 8 : ((int64_t)256 << 20);
    if (st == FTL_OK) {
        st = feature_store_open(&r->train_store, tp.parts, tp.count, tb, te, s->features_in_memory, stream_bytes);
        r->have_train_store = st == FTL_OK;
    }
    if (st == FTL_OK && o->augment_flip) {
        st = feature_store_open(&r->train_flipped, fp.parts, fp.count, tb, te, s->features_in_memory, stream_bytes);
        r->have_train_flipped = st == FTL_OK;
    }
    if (st == FTL_OK && o->val_path) {
        st = feature_store_open(&r->val_store, vp.parts, vp.count, vb, ve, s->features_in_memory, stream_bytes);
        r->have_val_store = st == FTL_OK;
    }
    if (st == FTL_OK && r->train_store.dim && r->train_store.dim != dim)
        st = ftl_fail(FTL_E_FORMAT, "the cached features have %lld floats but the backbone gives %lld: rebuild the cache",
                      (long long)r->train_store.dim, (long long)dim);
    if (st == FTL_OK) st = sources_over_stores(r, o, &r->train_store, r->have_train_flipped ? &r->train_flipped : NULL,
                                               o->val_path ? &r->val_store : NULL, train_total, dim);
    r->dim = dim;
    s->train_rows = train_total;
    s->val_rows = val_total;
    feature_cache_parts_free(&tp);
    feature_cache_parts_free(&fp);
    feature_cache_parts_free(&vp);
    return st;
}

/* The image loaders with `model` run on every training and validation batch. */
static ftl_status open_streams(train_run *r, const ftl_train_options *o, ftl_model *model, ftl_train_summary *s) {
    const char *train_src[1] = {o->train_path}, *val_src[1] = {o->val_path};
    ftl_loader_options torder = train_run_order(o, train_src), vorder = val_order(o, val_src);
    int64_t dim = ftl_model_get_info(model)->feature_dim;
    r->preprocess = o->embed.preprocess;
    FTL_TRY(loader_source_open(&r->train_stream, &torder, model, &r->preprocess, dim));
    r->have_train_stream = true;
    if (o->augment_flip) loader_source_set_flip(&r->train_stream, o->fit.seed);
    r->train = loader_source_as_batch_source(&r->train_stream);
    s->train_rows = ftl_loader_total_rows(r->train_stream.loader);
    if (o->val_path) {
        FTL_TRY(loader_source_open(&r->val_stream, &vorder, model, &r->preprocess, dim));
        r->have_val_stream = true;
        r->val = loader_source_as_batch_source(&r->val_stream);
        s->val_rows = ftl_loader_total_rows(r->val_stream.loader);
    }
    return FTL_OK;
}

/* --no-feature-cache: the backbone runs on every training and validation batch. */
ftl_status train_run_setup_per_batch(train_run *r, const ftl_train_options *o, ftl_train_summary *s) {
    r->dim = ftl_model_get_info(r->backbone)->feature_dim;
    return open_streams(r, o, r->backbone, s);
}

/* r's sources become the frozen top over the boundary rows they give. */
static void through_top(train_run *r, const ftl_train_options *o) {
    top_source_init(&r->train_top, r->train, r->top);
    r->have_train_top = true;
    r->train = top_source_as_batch_source(&r->train_top);
    if (o->val_path) {
        top_source_init(&r->val_top, r->val, r->top);
        r->have_val_top = true;
        r->val = top_source_as_batch_source(&r->val_top);
    }
}

ftl_status train_run_setup_through_cut(train_run *r, const ftl_train_options *o, train_run *bottom, ftl_train_summary *s) {
    ftl_status st = o->feature_cache ? boundary_setup(r, o, NULL, 0, bottom, s) : cut_half_load(o, false, NULL, 0, &bottom->backbone);
    if (st == FTL_OK) st = cut_half_load(o, true, NULL, 0, &r->top);
    if (st != FTL_OK) return st;
    int64_t dim = ftl_model_get_info(r->top)->feature_dim;
    r->dim = dim;
    if (!o->feature_cache) { /* bottom, then top, on every batch */
        st = open_streams(r, o, bottom->backbone, s);
        if (st == FTL_OK) through_top(r, o);
        return st;
    }
    feature_store *bt = &bottom->train_store, *bf = bottom->have_train_flipped ? &bottom->train_flipped : NULL,
                  *bv = bottom->have_val_store ? &bottom->val_store : NULL;
    int64_t rows = (bt->end - bt->begin) * (bf ? 2 : 1) + (bv ? bv->end - bv->begin : 0);
    int64_t limit = o->max_memory > 0 ? o->max_memory : default_max_memory();
    int64_t boundary_bytes = s->features_in_memory ? rows * bottom->dim * 4 : 0; /* held for phase 2 */
    if (boundary_bytes + rows * dim * 4 > limit) { /* no room beside the boundary rows: the top runs per batch */
        ftl_log_info("fine-tuning: phase 1's %.1f GiB of features exceed the memory limit; the frozen top runs on every "
                     "batch of boundary rows", (double)(rows * dim * 4) / (1 << 30));
        st = sources_over_stores(r, o, bt, bf, bv, s->train_rows, bottom->dim);
        if (st == FTL_OK) through_top(r, o);
        return st;
    }
    double t0 = ftl_now();
    st = top_features_store(bt, r->top, &r->train_store);
    r->have_train_store = st == FTL_OK;
    if (st == FTL_OK && bf) {
        st = top_features_store(bf, r->top, &r->train_flipped);
        r->have_train_flipped = st == FTL_OK;
    }
    if (st == FTL_OK && bv) {
        st = top_features_store(bv, r->top, &r->val_store);
        r->have_val_store = st == FTL_OK;
    }
    double seconds = ftl_now() - t0;
    s->features_seconds += seconds;
    char *cut = fine_tune_cut_text(&o->fine_tune);
    if (st == FTL_OK)
        ftl_log_info("fine-tuning: phase 1's features of %lld rows made from their boundary rows by the frozen top (%s) "
                     "in %.1f s", (long long)rows, cut, seconds);
    free(cut);
    if (st == FTL_OK)
        st = sources_over_stores(r, o, &r->train_store, r->have_train_flipped ? &r->train_flipped : NULL,
                                 r->have_val_store ? &r->val_store : NULL, s->train_rows, dim);
    return st;
}

ftl_status train_run_save_model(const train_run *r, const ftl_train_options *o, ftl_trainer *trainer,
                                const ftl_fit_result *res, const ftl_tensor_override *tuned, int n_tuned,
                                const ftl_kv *extra, size_t n_extra) {
    const ftl_model_info *info = ftl_model_get_info(r->backbone);
    char *dim = ftl_format("%lld", (long long)r->dim);
    char *size = ftl_format("%d", r->image_size);
    char *dropout = ftl_format("%.9g", o->fit.dropout);
    char *offset = ftl_format("%d", o->embed.label_offset);
    char *args = train_run_args_json(o);
    char *metrics = train_run_metrics_json(res);
    char *abs_backbone = realpath(o->embed.backbone_path, NULL);
    char *scales = o->embed.int8_scales ? ftl_nn_int8_scales_json(o->embed.int8_scales) : ftl_strdup("");
    ftl_kv meta[] = {
        {FTL_MODEL_META_CLASSES, r->classes_json},
        {FTL_MODEL_META_FEATURE_DIM, dim},
        {FTL_MODEL_META_BACKBONE_PATH, abs_backbone ? abs_backbone : o->embed.backbone_path},
        {FTL_MODEL_META_BACKBONE_SHA256, info->sha256},
        {FTL_MODEL_META_FEATURE_TENSOR, info->feature_name},
        {FTL_MODEL_META_INPUT_SIZE, size},
        {FTL_MODEL_META_INPUT_SCALING, r->preprocess_json},
        {"ftl.precision", ftl_nn_precision_name(o->embed.precision)},
        {"ftl.device", info->device ? info->device : ""},
        {"ftl.conv_algorithm", ftl_nn_conv_algorithm_name(o->embed.conv_algorithm)},
        {"ftl.label_offset", offset},
        {FTL_MODEL_META_TRAINING_ARGS, args},
        {FTL_MODEL_META_METRICS, metrics},
        {FTL_MODEL_META_DROPOUT, dropout},
        {FTL_MODEL_META_INT8_SCALES, scales},
    };
    size_t n_meta = sizeof meta / sizeof meta[0];
    ftl_kv *all = ftl_xcalloc(n_meta + n_extra, sizeof *all);
    memcpy(all, meta, sizeof meta);
    if (n_extra) memcpy(all + n_meta, extra, n_extra * sizeof *extra);
    /* Rank 0 alone writes: the others wait in the finalize barrier, without a limit while it says so. */
    ftl_dist_phase_begin(&o->fit.collectives, "writing the model");
    /* --out existed at the start only with --overwrite or --resume: else a file there now is another run's */
    bool replace = o->overwrite || o->resume_path;
    ftl_status st = ftl_classifier_write(o->out_path, replace, ftl_trainer_head(trainer), all, n_meta + n_extra, tuned, n_tuned);
    ftl_dist_phase_end(&o->fit.collectives);
    free(all);
    free(dim), free(size), free(dropout), free(args), free(metrics), free(abs_backbone), free(offset), free(scales);
    return st;
}

/* The trainer's per-epoch device figures from the GPU monitor. */
static bool gpu_usage(void *ctx, double *util_percent, double *memory_bytes) {
    return ftl_device_monitor_take(ctx, util_percent, memory_bytes);
}

/* The start of a run, shared by ftl train and ftl sweep: the classes (val's checked against train's),
 * the image size, the int8 calibration (*op then points at *calibrated, which holds the scales), the
 * backbone, and under mpirun the checks that every rank has the same backbone and data. */
ftl_status train_run_prepare(train_run *r, const ftl_train_options **op, ftl_train_options *calibrated,
                             ftl_nn_int8_scales **own_scales) {
    const ftl_train_options *o = *op;
    bool ft = fine_tuning(o);
    const char *train_src[1] = {o->train_path};
    ftl_status st = dataset_read_classes(train_src, o->embed.label_column ? o->embed.label_column : FTL_COLUMN_LABEL,
                                         o->embed.label_offset, &r->class_names, &r->class_count);
    if (st == FTL_OK && o->val_path) {
        const char *val_src[1] = {o->val_path};
        char *what = ftl_format("the training set %s", o->train_path);
        st = dataset_check_classes(val_src, o->embed.label_column ? o->embed.label_column : FTL_COLUMN_LABEL,
                                   o->embed.label_offset, r->class_names,
                                   r->class_count, what);
        free(what);
        int val_size = 0;
        if (st == FTL_OK) st = loader_dataset_image_size(train_src, 1, o->embed.image_size, &r->image_size);
        if (st == FTL_OK) st = loader_dataset_image_size(val_src, 1, o->embed.image_size, &val_size);
        if (st == FTL_OK && val_size != r->image_size)
            st = ftl_fail(FTL_E_INVALID_ARG, "%s holds %dx%d images but %s holds %dx%d: prep both with the same --size",
                          o->val_path, val_size, val_size, o->train_path, r->image_size, r->image_size);
    } else if (st == FTL_OK) {
        st = loader_dataset_image_size(train_src, 1, o->embed.image_size, &r->image_size);
    }
    if (st == FTL_OK) st = train_check_labels(o, r); /* before any calibration or feature reads an image */
    /* int8: one calibration on the training images (rank 0's, broadcast) before any cache key; with a
     * cut, of the frozen bottom only, so the tuned top runs fp32 in every graph it is part of */
    if (st == FTL_OK && o->embed.precision == FTL_NN_INT8 && !o->embed.int8_scales) {
        ftl_embed_options eo = o->embed;
        eo.sources = train_src;
        eo.source_count = 1;
        eo.collectives = &o->fit.collectives;
        if (ft) eo.bottom_of = &o->fine_tune;
        char *cache = train_cache_dir(o);
        eo.calibration_cache_dir = cache; /* beside the features it keys: a rerun or resume skips it */
        st = ftl_embed_calibrate(&eo, own_scales);
        free(cache);
        *calibrated = *o;
        calibrated->embed.int8_scales = *own_scales;
        o = calibrated;
        *op = o;
    }
    ftl_model_options mo;
    ftl_model_options_init(&mo);
    mo.features_from = o->embed.features_from;
    mo.precision = o->embed.precision;
    mo.int8_scales = o->embed.int8_scales;
    mo.device = o->embed.device;
    mo.deterministic = o->embed.deterministic;
    mo.conv_algorithm = o->embed.conv_algorithm;
    mo.threads = o->embed.threads;
    mo.batch = o->embed.batch;
    if (st == FTL_OK) st = ftl_model_load(o->embed.backbone_path, &mo, &r->backbone);
    /* Every rank must train on the same data with the same backbone: compared with rank 0's. */
    const ftl_collectives *col = &o->fit.collectives;
    if (st == FTL_OK && ftl_dist_active(col)) {
        ftl_dist_set_context(col, -1, "the start-up checks");
        st = ftl_dist_check_same(col, "the backbone (sha256)", ftl_model_get_info(r->backbone)->sha256);
        char *ti = dataset_quick_identity(train_src, 1);
        if (st == FTL_OK) st = ftl_dist_check_same(col, "the training dataset", ti);
        free(ti);
        if (st == FTL_OK && o->val_path) {
            const char *val_src[1] = {o->val_path};
            char *vi = dataset_quick_identity(val_src, 1);
            st = ftl_dist_check_same(col, "the validation dataset", vi);
            free(vi);
        }
        /* Sizes can agree while the rows differ (a re-prep with another seed): the content too. */
        if (st == FTL_OK) st = ftl_dataset_fingerprint(train_src, 1, r->train_fingerprint);
        if (st == FTL_OK) st = ftl_dist_check_same(col, "the training dataset's content fingerprint", r->train_fingerprint);
    }
    if (st == FTL_OK) {
        r->preprocess_json = ftl_nn_preprocess_json(&o->embed.preprocess, r->backbone, r->image_size);
        r->classes_json = ftl_json_string_array(r->class_names, r->class_count);
        r->cache_dir = train_cache_dir(o);
        r->dim = ftl_model_get_info(r->backbone)->feature_dim;
    }
    return st;
}

ftl_status ftl_train_run(const ftl_train_options *o, ftl_train_summary *s) {
    memset(s, 0, sizeof *s);
    double start = ftl_now();
    if (!o->train_path || !o->out_path || !o->embed.backbone_path)
        return ftl_fail(FTL_E_INVALID_ARG, "train needs a training dataset, --backbone and --out");
    FTL_TRY(train_check_paths(o, NULL));
    if (ftl_path_exists(o->out_path) && !o->overwrite && !o->resume_path)
        return ftl_fail(FTL_E_EXISTS, "model %s already exists (use --overwrite to replace it)", o->out_path);
    if (!o->val_path && (o->fit.early_stopping.monitor == FTL_MONITOR_VAL_ACC || o->fit.early_stopping.monitor == FTL_MONITOR_VAL_LOSS) &&
        o->fit.early_stopping.stop)
        return ftl_fail(FTL_E_INVALID_ARG, "early stopping on %s needs --val (or monitor=acc|loss)",
                        ftl_monitor_name(o->fit.early_stopping.monitor));
    /* Everything that can be checked before hours of work is checked first. */
    if (o->val_path && !ftl_path_exists(o->val_path))
        return ftl_fail(FTL_E_NOT_FOUND, "validation dataset %s does not exist", o->val_path);
    /* Only rank 0 reads the checkpoint (and broadcasts it): the other hosts need not have it. */
    if (o->resume_path && ftl_dist_rank(&o->fit.collectives) == 0 && !ftl_path_exists(o->resume_path))
        return ftl_fail(FTL_E_NOT_FOUND, "checkpoint %s does not exist", o->resume_path);
    bool ft = fine_tuning(o);
    if (o->fine_tune_only && !ft)
        return ftl_fail(FTL_E_INVALID_ARG, "--fine-tune-only needs the cut: --fine-tune-last N or --fine-tune-from TENSOR");
    if (ft && o->fine_tune.last_convs > 0 && o->fine_tune.from_tensor && o->fine_tune.from_tensor[0])
        return ftl_fail(FTL_E_INVALID_ARG, "give --fine-tune-last or --fine-tune-from, not both");
    if (o->fine_tune_only && !o->init_path && !o->resume_path)
        return ftl_fail(FTL_E_INVALID_ARG, "--fine-tune-only starts from a trained model: give --init MODEL.ftl");
    if (o->init_path && !o->fine_tune_only)
        return ftl_fail(FTL_E_INVALID_ARG, "--init MODEL.ftl goes with --fine-tune-only (the head is not trained again)");
    if (o->init_path && !ftl_path_exists(o->init_path))
        return ftl_fail(FTL_E_NOT_FOUND, "--init %s does not exist", o->init_path);
    if (ft && !(o->fine_tune_lr > 0)) return ftl_fail(FTL_E_INVALID_ARG, "--fine-tune-lr %g must be > 0", o->fine_tune_lr);
    if (ft && o->fine_tune_epochs < 0)
        return ftl_fail(FTL_E_INVALID_ARG, "--fine-tune-epochs %lld must be >= 0", (long long)o->fine_tune_epochs);
    /* the tuned top trains on the CPU whatever runs the backbone: refuse before phase 1, not after */
    if (ft && o->embed.precision == FTL_NN_BF16 && !ftl_nn_cpu_bf16_available())
        return ftl_fail(FTL_E_UNSUPPORTED, "--precision bf16 with fine-tuning: the top trains on this CPU, which has no bf16 "
                        "kernels in oneDNN (bf16 needs AVX-512): use --precision fp32, or auto");
    FTL_TRY(train_check_output_folders(o));
    train_run r, bottom; /* bottom: the cut's frozen bottom, when fine-tuning */
    memset(&r, 0, sizeof r);
    memset(&bottom, 0, sizeof bottom);
    ftl_train_options calibrated;
    ftl_nn_int8_scales *own_scales = NULL;
    ftl_status st = train_run_prepare(&r, &o, &calibrated, &own_scales);
    /* A resume continues the phase its checkpoint comes from; phase 2 then needs no phase 1. */
    int resume_phase = 1;
    ftl_epoch_log epoch0 = {.loss = NAN, .acc = NAN, .val_loss = NAN, .val_acc = NAN, .gpu_util_percent = NAN, .gpu_memory_bytes = NAN};
    if (st == FTL_OK && o->resume_path) st = fine_tune_resume_phase(o, &resume_phase, &epoch0);
    if (st == FTL_OK) st = train_check_resume_identity(o, &r, o->resume_path); /* before the features */
    if (st == FTL_OK && resume_phase == 2 && !ft)
        st = ftl_fail(FTL_E_INVALID_ARG, "cannot resume from %s: it is a fine-tuning checkpoint; give the same "
                      "--fine-tune-last/--fine-tune-from as the run that wrote it", o->resume_path);
    bool run_phase1 = st == FTL_OK && !o->fine_tune_only && resume_phase == 1;
    if (st == FTL_OK) {
        s->features_cached = o->feature_cache;
        /* with a cut, phase 1's features come from the boundary rows phase 2 trains on: one bottom pass */
        if (run_phase1 && ft) st = train_run_setup_through_cut(&r, o, &bottom, s);
        else if (run_phase1) st = o->feature_cache ? train_run_setup_cached(&r, o, s) : train_run_setup_per_batch(&r, o, s);
    }
    s->dim = r.dim;
    s->classes = r.class_count;

    ftl_trainer *trainer = NULL;
    train_run_meta meta;
    train_run_meta_init(&meta, &r, o);
    const ftl_model_info *info = st == FTL_OK ? ftl_model_get_info(r.backbone) : NULL;
    ftl_fit_config fit = o->fit;
    /* The head trains where the backbone runs: on a GPU, on the GPU engine (fine-tuning's phase 2
     * keeps its head on the CPU, with the top). */
    ftl_head_engine *engine = NULL;
    snprintf(s->head_device, sizeof s->head_device, "cpu");
    ftl_device gpu;
    bool on_gpu = st == FTL_OK && info->device_kind == FTL_DEVICE_CUDA && ftl_device_select(FTL_DEVICE_CUDA, -1, &gpu) == FTL_OK;
    bool head_on_gpu = on_gpu;
    if (st == FTL_OK && run_phase1 && ftl_dist_active(&fit.collectives)) {
        /* The gradient sums take one path on all ranks (NCCL on the GPU head, MPI on the CPU's):
         * when only some ranks have a GPU, every head trains on the CPU. */
        int64_t gpu_ranks = on_gpu ? 1 : 0;
        st = ftl_dist_allreduce_i64(&fit.collectives, &gpu_ranks, 1);
        if (st == FTL_OK && gpu_ranks > 0 && gpu_ranks < fit.collectives.world_size) {
            head_on_gpu = false;
            if (fit.collectives.rank == 0)
                ftl_log_warn("%lld of %d ranks run the backbone on a GPU, the others on the CPU: every rank trains its "
                             "head on the CPU", (long long)gpu_ranks, fit.collectives.world_size);
        }
    }
    if (head_on_gpu && run_phase1) {
        st = ftl_device_head_engine_create(&gpu, r.dim, (int64_t)r.class_count, (size_t)fit.batch_size,
                                           ftl_optimizer_slot_count(&fit.optimizer),
                                           ftl_dist_active(&fit.collectives) ? &fit.collectives : NULL, &engine);
        if (st == FTL_OK) {
            fit.head_engine = engine;
            snprintf(s->head_device, sizeof s->head_device, "%s", engine->description);
        }
    }
    char *run_record =
        info && fit.log_path ? train_run_record_json(o, r.dim, r.classes_json, info, s->head_device, o->resume_path) : NULL;
    /* phase 2's record is a resume only when phase 2 itself resumes (a resumed phase 1 starts it afresh) */
    char *phase2_record = info && fit.log_path && ft
                              ? train_run_record_json(o, r.dim, r.classes_json, info, s->head_device,
                                                resume_phase == 2 ? o->resume_path : NULL)
                              : NULL;
    fit.run_record = run_record;
    fit.checkpoint_meta = meta.kv;
    fit.checkpoint_meta_count = TRAIN_RUN_META_COUNT;
    if (!fit.epoch_out && fit.collectives.rank == 0) fit.epoch_out = ftl_log_output();
    ftl_device_monitor *monitor = NULL;
    if (on_gpu) monitor = ftl_device_monitor_start(&gpu); /* GPU busy % and memory in every epoch line */
    if (engine && fit.epoch_out) fprintf(fit.epoch_out, "Head on %s\n", engine->description);
    if (monitor) {
        fit.device_usage = gpu_usage;
        fit.device_usage_ctx = monitor;
    }
    if (st == FTL_OK && run_phase1) st = ftl_trainer_init(&trainer, &fit, r.dim, r.class_count);
    if (st == FTL_OK && run_phase1 && o->resume_path) st = ftl_trainer_resume(trainer, o->resume_path, &r.train);
    if (st == FTL_OK && run_phase1) st = ftl_trainer_fit(trainer, &r.train, o->val_path ? &r.val : NULL, &s->fit);
    if (st == FTL_OK && run_phase1 && !ft && fit.collectives.rank == 0)
        st = train_run_save_model(&r, o, trainer, &s->fit, NULL, 0, NULL, 0);
    ftl_head_engine_free(engine); /* phase 2 trains its head on the CPU, with the top */
    engine = NULL;
    if (st == FTL_OK && ft) {
        /* Phase 1's best weights are phase 2's start and its epoch 0. */
        if (run_phase1) {
            s->head_phase = s->fit;
            epoch0 = (ftl_epoch_log){.loss = s->fit.final_loss, .acc = s->fit.final_acc, .val_loss = s->fit.final_val_loss,
                                    .val_acc = s->fit.final_val_acc, .gpu_util_percent = NAN, .gpu_memory_bytes = NAN};
        }
        st = fine_tune_phase(&r, &bottom, o, run_phase1 ? ftl_trainer_head(trainer)->params : NULL, epoch0, resume_phase == 2,
                             meta.kv, TRAIN_RUN_META_COUNT, phase2_record, s);
    }
    ftl_trainer_free(trainer);
    ftl_device_monitor_stop(monitor);
    train_run_meta_free(&meta);
    free(run_record);
    free(phase2_record);
    train_run_free(&bottom);
    train_run_free(&r);
    ftl_nn_int8_scales_free(own_scales);
    s->seconds = ftl_now() - start;
    return st;
}
