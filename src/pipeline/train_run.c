/* A training run's sources, shared by `ftl train`'s phases and `ftl sweep`: the loaders' orders,
 * this rank's rows, and the batch sources over cached features or over a backbone run per batch. */
#include "ftl/pipeline.h"
#include "ftl/loader.h"
#include "ftl/dist.h"
#include "data/loader_plan.h"
#include "pipeline/feature_cache.h"
#include "pipeline/train_run.h"
#include "util/error.h"
#include "util/log.h"
#include "util/timing.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Cached rows held in memory: half the RAM, at most 1 GiB, so a run's peak memory stays the same
 * at any dataset size (larger sets stream from the cache files, which the page cache keeps warm). */
int64_t train_run_default_max_memory(void) {
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
    if (r->have_val_mirrored_local) file_order_source_free(&r->val_mirrored_local);
    if (r->have_val_flipped) feature_store_close(&r->val_flipped);
    if (r->have_val_mirrored_stream) loader_source_close(&r->val_mirrored_stream);
    if (r->have_val_mirrored_top) top_source_free(&r->val_mirrored_top);
    ftl_model_free(r->top);
    ftl_model_free(r->backbone);
    for (int64_t i = 0; i < r->class_count; i++) free(r->class_names[i]);
    free(r->class_names);
    free(r->preprocess_json);
    free(r->classes_json);
    free(r->cache_dir);
}

/* This rank's share of a dataset's rows: contiguous, sizes differing by at most one. */
static void rank_rows(const ftl_collectives *c, int64_t total, int64_t *begin, int64_t *end) {
    int64_t k = ftl_dist_rank(c), n = ftl_dist_size(c);
    *begin = k * total / n;
    *end = (k + 1) * total / n;
}

/* The trainer's sources over one rank's stores: global batches in the single-process order for
 * training, this rank's rows once for validation (val NULL: none). */
ftl_status train_run_sources_over_stores(train_run *r, const ftl_train_options *o, feature_store *train,
                                         feature_store *flipped, feature_store *val, int64_t train_total, int64_t dim) {
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

void train_run_mirrored_val_over_store(train_run *r, feature_store *flipped, int64_t dim) {
    flipped->dim = dim;
    file_order_source_init(&r->val_mirrored_local, flipped);
    r->have_val_mirrored_local = true;
    r->val_mirrored = file_order_source_as_batch_source(&r->val_mirrored_local);
    r->have_val_mirrored = true;
}

ftl_batch_source *train_run_val_mirrored(train_run *r) { return r->have_val_mirrored ? &r->val_mirrored : NULL; }

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
    /* --tta flip: val's mirrored images' features, computed once like the training rows' */
    feature_cache_parts vfp = {0};
    bool val_tta = o->tta_flip && o->val_path && ve > vb;
    if (st == FTL_OK && val_tta) {
        req.flipped = true;
        st = feature_cache_get(&req, &vfp);
        req.flipped = false;
        s->val_cache_reused = s->val_cache_reused && vfp.reused;
    }
    s->features_seconds = ftl_now() - t0;
    int64_t dim = ftl_model_get_info(r->backbone)->feature_dim;
    int64_t bytes = ((te - tb) * (o->augment_flip ? 2 : 1) + (ve - vb) * (o->tta_flip ? 2 : 1)) * dim * 4;
    int64_t limit = o->max_memory > 0 ? o->max_memory : train_run_default_max_memory();
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
    if (st == FTL_OK && val_tta) {
        st = feature_store_open(&r->val_flipped, vfp.parts, vfp.count, vb, ve, s->features_in_memory, stream_bytes);
        r->have_val_flipped = st == FTL_OK;
    }
    if (st == FTL_OK && r->train_store.dim && r->train_store.dim != dim)
        st = ftl_fail(FTL_E_FORMAT, "the cached features have %lld floats but the backbone gives %lld: rebuild the cache",
                      (long long)r->train_store.dim, (long long)dim);
    if (st == FTL_OK) st = train_run_sources_over_stores(r, o, &r->train_store, r->have_train_flipped ? &r->train_flipped : NULL,
                                               o->val_path ? &r->val_store : NULL, train_total, dim);
    if (st == FTL_OK && r->have_val_flipped) train_run_mirrored_val_over_store(r, &r->val_flipped, dim);
    r->dim = dim;
    s->train_rows = train_total;
    s->val_rows = val_total;
    feature_cache_parts_free(&tp);
    feature_cache_parts_free(&fp);
    feature_cache_parts_free(&vp);
    feature_cache_parts_free(&vfp);
    return st;
}

/* The image loaders with `model` run on every training and validation batch. */
ftl_status train_run_open_streams(train_run *r, const ftl_train_options *o, ftl_model *model, ftl_train_summary *s) {
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
    if (o->val_path && o->tta_flip) { /* the same rows again, every image mirrored */
        FTL_TRY(loader_source_open(&r->val_mirrored_stream, &vorder, model, &r->preprocess, dim));
        r->have_val_mirrored_stream = true;
        loader_source_set_mirror_all(&r->val_mirrored_stream);
        r->val_mirrored = loader_source_as_batch_source(&r->val_mirrored_stream);
        r->have_val_mirrored = true;
    }
    return FTL_OK;
}

/* --no-feature-cache: the backbone runs on every training and validation batch. */
ftl_status train_run_setup_per_batch(train_run *r, const ftl_train_options *o, ftl_train_summary *s) {
    r->dim = ftl_model_get_info(r->backbone)->feature_dim;
    return train_run_open_streams(r, o, r->backbone, s);
}
