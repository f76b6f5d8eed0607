/* The streaming loader. Reader threads fetch row-group pieces (from the disk cache or the
 * source), in the deterministic piece sequence, into a ring of `queue` slots; one assembler
 * thread consumes them strictly in sequence, runs the shuffle buffer and fills a small ring of
 * batches; ftl_loader_next hands those out. Only the assembler decides the order, so the output
 * is the same for any number of readers. */
#include "ftl/image.h"
#include "ftl/loader.h"
#include "data/dataset.h"
#include "data/loader_plan.h"
#include "data/row_group_cache.h"
#include "data/shuffle_buffer.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/log.h"
#include "util/timing.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { BATCH_RING = 3, POSITION_VERSION = 1 };
static const char POSITION_MAGIC[8] = {'F', 'T', 'L', 'L', 'P', 'O', 'S', '1'};

typedef struct piece_slot {
    bool ready;
    ftl_status status;
    char *error;
    loader_rows rows;
} piece_slot;

typedef struct batch_slot {
    ftl_batch meta;
    ftl_status status;
    char *error;
    int32_t *labels;
    int64_t *row_index, *row_pass;
    uint8_t *values;
    char **paths;
} batch_slot;

struct ftl_loader {
    ftl_loader_options o;
    loader_plan plan;
    row_group_cache cache;
    bool use_cache;
    char *columns_desc;     /* part of the cache key */

    pthread_mutex_t lock;
    pthread_cond_t piece_ready, piece_free, batch_ready, batch_free;
    bool stop;

    /* pieces: sequence number n is piece order_{n / piece_count}[n % piece_count] */
    int queue;
    piece_slot *slots;
    int64_t next_claim, consumed, start_seq, end_seq;
    int64_t order_pass[2];
    int *order[2];
    int order_next;

    /* batches */
    batch_slot batches[BATCH_RING];
    int64_t produced, taken, released;

    pthread_t *readers;
    int reader_count;
    pthread_t assembler;
    bool assembler_started;
    shuffle_buffer shuffle;  /* used by the assembler only; allocated at open */

    /* where the consumer is: the next batch it will get */
    int64_t next_epoch, next_step;
    int64_t start_pass, start_skip;

    double wait_seconds;
    int64_t stat_batches, stat_rows, stat_row_groups, stat_bytes;
};

void ftl_loader_options_init(ftl_loader_options *o) {
    memset(o, 0, sizeof *o);
    o->value_column = FTL_COLUMN_IMAGE;
    o->label_column = FTL_COLUMN_LABEL;
    o->num_shards = 1;
    o->batch_size = 16;
    o->shuffle = true;
    o->shuffle_buffer = 400;
    o->seed = 42;
    o->epochs = 1;
    o->equal_batches = true;
}

/* ---------------------------------------------------------------- reading pieces */

/* The piece order of a pass, cached for the two most recent passes. Called with the lock held. */
static int piece_for_sequence(ftl_loader *l, int64_t seq) {
    int64_t pass = seq / l->plan.piece_count;
    for (int k = 0; k < 2; k++)
        if (l->order[k] && l->order_pass[k] == pass) return l->order[k][seq % l->plan.piece_count];
    int k = l->order_next;
    l->order_next ^= 1;
    if (!l->order[k]) l->order[k] = ftl_xmalloc((size_t)l->plan.piece_count * sizeof(int));
    loader_plan_pass_order(&l->plan, l->o.seed, pass, l->o.shuffle, l->order[k]);
    l->order_pass[k] = pass;
    return l->order[k][seq % l->plan.piece_count];
}

typedef struct reader_buffers {
    ftl_parquet_column_values label, value, path, format;
    loader_rows whole;
    ftl_image_prepper *prepper;  /* encoded datasets: this reader's decoder, made on first use */
    ftl_parquet_value name;      /* the path of a row that failed to decode */
} reader_buffers;

/* ", PATH" of a row for a message (malloc'd), or "" when the file has no path column. */
static char *row_name(const loader_file *f, int group, int64_t row, reader_buffers *rb) {
    if (f->name_column < 0 || ftl_parquet_read_value(f->parquet, group, f->name_column, row, &rb->name) != FTL_OK ||
        rb->name.is_null)
        return ftl_strdup("");
    int n = rb->name.size < 4096 ? (int)rb->name.size : 4096;
    return ftl_format(", %.*s", n, (const char *)rb->name.data);
}

/* A dataset that keeps encoded images: each row is its pixels ("rgb") or its original file, decoded
 * here with prep's recipe to the very pixels prep computed. A row that does not decode was read at
 * prep: it is damaged, and an error, not a skip. */
static ftl_status decode_encoded_rows(ftl_loader *l, const loader_file *f, int group, reader_buffers *rb) {
    const int64_t row_bytes = l->plan.row_bytes;
    FTL_TRY(ftl_parquet_read_column(f->parquet, group, f->format_column, &rb->format));
    if (rb->format.rows != rb->value.rows)
        return ftl_fail(FTL_E_FORMAT, "%s: row group %d: columns have different row counts", f->path, group);
    if (!rb->prepper) FTL_TRY(ftl_image_prepper_init(&rb->prepper, l->plan.image_size));
    for (int64_t i = 0; i < rb->value.rows; i++) {
        const uint8_t *data = rb->value.data + rb->value.offsets[i];
        int64_t n = rb->value.offsets[i + 1] - rb->value.offsets[i];
        const char *format = (const char *)rb->format.data + rb->format.offsets[i];
        int64_t format_len = rb->format.validity && !rb->format.validity[i] ? -1 : rb->format.offsets[i + 1] - rb->format.offsets[i];
        uint8_t *to = rb->whole.values + i * row_bytes;
        bool pixels = format_len == 3 && memcmp(format, FTL_IMAGE_FORMAT_PIXELS, 3) == 0;
        bool file = (format_len == 4 && memcmp(format, "jpeg", 4) == 0) || (format_len == 3 && memcmp(format, "png", 3) == 0);
        ftl_status st = FTL_OK, decoded = FTL_OK;
        ftl_image_info info = {0};
        if (pixels && n == row_bytes) {
            memcpy(to, data, (size_t)row_bytes);
        } else if (pixels) {
            st = ftl_fail(FTL_E_FORMAT, "%s: row group %d: row %lld: '%s' has %lld bytes of pixels, expected %lld", f->path,
                          group, (long long)i, FTL_COLUMN_IMAGE, (long long)n, (long long)row_bytes);
        } else if (!file) {
            st = ftl_fail(FTL_E_FORMAT, "%s: row group %d: row %lld: '%s' is '%.*s'; expected rgb, jpeg or png", f->path, group,
                          (long long)i, FTL_COLUMN_IMAGE_FORMAT, format_len < 0 ? 4 : (int)(format_len < 16 ? format_len : 16),
                          format_len < 0 ? "null" : format);
        } else if ((decoded = ftl_image_prepper_run(rb->prepper, data, (size_t)n, to, &info)) != FTL_OK || info.warning[0]) {
            /* prep stored only files that decoded without a warning */
            char *why = ftl_strdup(decoded != FTL_OK ? ftl_last_error() : info.warning), *name = row_name(f, group, i, rb);
            st = ftl_fail(FTL_E_FORMAT, "%s: row group %d: row %lld%s: its stored %.*s does not decode (%s); the dataset is "
                          "damaged: prep it again", f->path, group, (long long)i, name, (int)format_len, format, why);
            free(why);
            free(name);
        }
        if (st != FTL_OK) return st;
    }
    return FTL_OK;
}

static ftl_status decode_row_group(ftl_loader *l, const loader_file *f, int group, reader_buffers *rb) {
    const int64_t row_bytes = l->plan.row_bytes;
    FTL_TRY(ftl_parquet_read_column(f->parquet, group, f->label_column, &rb->label));
    FTL_TRY(ftl_parquet_read_column(f->parquet, group, f->value_column, &rb->value));
    bool with_paths = f->path_column >= 0;
    if (with_paths) FTL_TRY(ftl_parquet_read_column(f->parquet, group, f->path_column, &rb->path));
    int64_t rows = rb->label.rows;
    if (rb->value.rows != rows || (with_paths && rb->path.rows != rows))
        return ftl_fail(FTL_E_FORMAT, "%s: row group %d: columns have different row counts", f->path, group);
    /* Paths are stored NUL-terminated (one extra byte each) so rows can hand out C strings. */
    loader_rows_reserve(&rb->whole, rows, row_bytes, with_paths, with_paths ? rb->path.offsets[rows] + rows : 0);
    const char *label_name = l->o.label_column, *value_name = l->o.value_column;
    for (int64_t i = 0; i < rows; i++) {
        if (rb->label.validity && !rb->label.validity[i])
            return ftl_fail(FTL_E_FORMAT, "%s: row group %d: row %lld: '%s' is null", f->path, group, (long long)i, label_name);
        int64_t v;
        if (rb->label.type == FTL_PARQUET_INT32) {
            int32_t x;
            memcpy(&x, (const uint8_t *)rb->label.values + 4 * i, 4);
            v = x;
        } else {
            memcpy(&v, (const uint8_t *)rb->label.values + 8 * i, 8);
        }
        int64_t stored = v;
        if (v >= INT32_MIN && v <= INT32_MAX) v += l->o.label_offset; /* the sum cannot overflow then */
        if (v < 0 || v > INT32_MAX)
            return ftl_fail(FTL_E_FORMAT, "%s: row group %d: row %lld: label %lld%s is out of range", f->path, group,
                            (long long)i, (long long)stored, l->o.label_offset ? " (before --label-offset)" : "");
        rb->whole.labels[i] = (int32_t)v;
    }
    if (rb->value.null_count > 0)
        for (int64_t i = 0; i < rows; i++)
            if (!rb->value.validity[i])
                return ftl_fail(FTL_E_FORMAT, "%s: row group %d: row %lld: '%s' is null", f->path, group, (long long)i, value_name);
    if (f->encoded) {
        FTL_TRY(decode_encoded_rows(l, f, group, rb));
    } else if (rb->value.type == FTL_PARQUET_BYTE_ARRAY) {
        for (int64_t i = 0; i < rows; i++) {
            int64_t n = rb->value.offsets[i + 1] - rb->value.offsets[i];
            if (n != row_bytes)
                return ftl_fail(FTL_E_FORMAT, "%s: row group %d: row %lld: '%s' has %lld bytes, expected %lld%s", f->path,
                                group, (long long)i, value_name, (long long)n, (long long)row_bytes,
                                l->plan.image_size ? " (S x S x 3 bytes; wrong --image-size?)" : "");
        }
        /* Equal lengths: the values are one contiguous block. */
        memcpy(rb->whole.values, rb->value.data + rb->value.offsets[0], (size_t)(rows * row_bytes));
    } else {
        if (rb->value.fixed_length != row_bytes)
            return ftl_fail(FTL_E_FORMAT, "%s: row group %d: '%s' values have %d bytes, expected %lld", f->path, group,
                            value_name, rb->value.fixed_length, (long long)row_bytes);
        memcpy(rb->whole.values, rb->value.values, (size_t)(rows * row_bytes));
    }
    if (with_paths) {
        int64_t at = 0;
        for (int64_t i = 0; i < rows; i++) {
            int64_t n = rb->path.offsets[i + 1] - rb->path.offsets[i];
            rb->whole.path_offsets[i] = at;
            memcpy(rb->whole.path_data + at, rb->path.data + rb->path.offsets[i], (size_t)n);
            rb->whole.path_data[at + n] = '\0';
            at += n + 1;
        }
        rb->whole.path_offsets[rows] = at;
    }
    return FTL_OK;
}

static ftl_status read_piece(ftl_loader *l, const loader_piece *pc, reader_buffers *rb, loader_rows *out) {
    const loader_file *f = &l->plan.files[pc->file];
    bool with_paths = f->path_column >= 0;
    int64_t group_rows = ftl_parquet_row_group_rows(f->parquet, pc->row_group);
    char key[65];
    bool hit = false;
    if (l->use_cache) {
        row_group_cache_key(f->path, f->size, f->mtime_ns, pc->row_group, l->columns_desc, l->plan.row_bytes, key);
        hit = row_group_cache_get(&l->cache, key, group_rows, l->plan.row_bytes, with_paths, &rb->whole);
    }
    if (!hit) {
        ftl_status st = decode_row_group(l, f, pc->row_group, rb);
        if (st != FTL_OK) return st;
        if (l->use_cache) row_group_cache_put(&l->cache, key, &rb->whole);
    }
    int64_t n = pc->row_end - pc->row_begin;
    int64_t path_bytes = with_paths ? rb->whole.path_offsets[pc->row_end] - rb->whole.path_offsets[pc->row_begin] : 0;
    loader_rows_reserve(out, n, l->plan.row_bytes, with_paths, path_bytes);
    memcpy(out->labels, rb->whole.labels + pc->row_begin, (size_t)n * sizeof(int32_t));
    memcpy(out->values, rb->whole.values + pc->row_begin * l->plan.row_bytes, (size_t)(n * l->plan.row_bytes));
    if (with_paths) {
        int64_t base = rb->whole.path_offsets[pc->row_begin];
        for (int64_t i = 0; i <= n; i++) out->path_offsets[i] = rb->whole.path_offsets[pc->row_begin + i] - base;
        memcpy(out->path_data, rb->whole.path_data + base, (size_t)path_bytes);
        out->path_data[path_bytes] = '\0';
    }
    return FTL_OK;
}

static void *reader_main(void *arg) {
    ftl_loader *l = arg;
    reader_buffers rb;
    memset(&rb, 0, sizeof rb);
    for (;;) {
        pthread_mutex_lock(&l->lock);
        while (!l->stop && l->next_claim < l->end_seq && l->next_claim >= l->consumed + l->queue)
            pthread_cond_wait(&l->piece_free, &l->lock);
        if (l->stop || l->next_claim >= l->end_seq) {
            pthread_mutex_unlock(&l->lock);
            break;
        }
        int64_t seq = l->next_claim++;
        int piece = piece_for_sequence(l, seq);
        pthread_mutex_unlock(&l->lock);

        piece_slot *slot = &l->slots[seq % l->queue];
        ftl_status st = read_piece(l, &l->plan.pieces[piece], &rb, &slot->rows);
        pthread_mutex_lock(&l->lock);
        slot->status = st;
        free(slot->error);
        slot->error = st == FTL_OK ? NULL : ftl_strdup(ftl_last_error());
        slot->ready = true;
        if (st == FTL_OK) {
            l->stat_row_groups++;
            l->stat_bytes += slot->rows.rows * l->plan.row_bytes;
        }
        pthread_cond_broadcast(&l->piece_ready);
        pthread_mutex_unlock(&l->lock);
    }
    ftl_parquet_column_values_free(&rb.label);
    ftl_parquet_column_values_free(&rb.value);
    ftl_parquet_column_values_free(&rb.path);
    ftl_parquet_column_values_free(&rb.format);
    ftl_parquet_value_free(&rb.name);
    ftl_image_prepper_free(rb.prepper);
    loader_rows_free(&rb.whole);
    return NULL;
}

/* ---------------------------------------------------------------- assembling batches */

typedef struct assembly {
    ftl_loader *l;
    int64_t epoch, step;          /* of the batch being filled */
    int64_t pass;                 /* the pass whose rows are being emitted */
    int64_t emitted_in_pass, skip;
    batch_slot *batch;            /* being filled, NULL when none */
    bool finished;                /* all epochs done */
    bool failed;
} assembly;

static bool mode_steps(const ftl_loader *l) { return l->o.steps_per_epoch > 0; }

/* Waits for a free batch slot; false when the loader is being closed. */
static bool acquire_batch(assembly *a) {
    ftl_loader *l = a->l;
    pthread_mutex_lock(&l->lock);
    while (!l->stop && l->produced - l->released >= BATCH_RING) pthread_cond_wait(&l->batch_free, &l->lock);
    bool ok = !l->stop;
    pthread_mutex_unlock(&l->lock);
    if (!ok) return false;
    a->batch = &l->batches[l->produced % BATCH_RING];
    a->batch->meta = (ftl_batch){.epoch = a->epoch, .step = a->step, .row_bytes = l->plan.row_bytes};
    a->batch->status = FTL_OK;
    return true;
}

static void publish_batch(assembly *a, bool last_in_epoch) {
    ftl_loader *l = a->l;
    a->batch->meta.last_in_epoch = last_in_epoch;
    pthread_mutex_lock(&l->lock);
    l->produced++;
    pthread_cond_broadcast(&l->batch_ready);
    pthread_mutex_unlock(&l->lock);
    a->batch = NULL;
    a->step++;
    if (last_in_epoch) {
        a->epoch++;
        a->step = 0;
        if (l->o.epochs > 0 && a->epoch >= l->o.epochs) a->finished = true;
    }
}

static void emit_row(void *ctx, int32_t label, int64_t index, const uint8_t *value, const char *path) {
    assembly *a = ctx;
    ftl_loader *l = a->l;
    if (a->finished || a->failed) return;
    if (a->skip > 0) { /* resuming: rows the restored position has already delivered */
        a->skip--;
        a->emitted_in_pass++;
        return;
    }
    if (!mode_steps(l) && a->emitted_in_pass >= l->plan.rows_per_pass) return; /* equal-batches trim */
    a->emitted_in_pass++;
    if (!a->batch && !acquire_batch(a)) {
        a->failed = true;
        return;
    }
    batch_slot *b = a->batch;
    int64_t r = b->meta.rows++;
    b->labels[r] = label;
    b->row_index[r] = index;
    b->row_pass[r] = a->pass;
    memcpy(b->values + r * l->plan.row_bytes, value, (size_t)l->plan.row_bytes);
    if (b->paths) {
        free(b->paths[r]);
        b->paths[r] = ftl_strdup(path ? path : "");
    }
    bool pass_done = !mode_steps(l) && a->emitted_in_pass == l->plan.rows_per_pass;
    if (b->meta.rows == l->o.batch_size || pass_done) {
        bool last = mode_steps(l) ? a->step + 1 == l->o.steps_per_epoch : pass_done;
        publish_batch(a, last);
    }
}

static void publish_end(assembly *a, ftl_status status, const char *error) {
    ftl_loader *l = a->l;
    if (!a->batch && !acquire_batch(a)) return;
    a->batch->meta.rows = 0;
    a->batch->status = status;
    free(a->batch->error);
    a->batch->error = error ? ftl_strdup(error) : NULL;
    pthread_mutex_lock(&l->lock);
    l->produced++;
    pthread_cond_broadcast(&l->batch_ready);
    pthread_mutex_unlock(&l->lock);
    a->batch = NULL;
}

static void *assembler_main(void *arg) {
    ftl_loader *l = arg;
    const loader_plan *p = &l->plan;
    assembly a = {.l = l, .epoch = l->next_epoch, .step = l->next_step, .skip = l->start_skip};
    shuffle_buffer *sb = &l->shuffle;
    if (l->o.epochs > 0 && a.epoch >= l->o.epochs) a.finished = true;
    for (int64_t pass = l->start_pass; !a.finished && !a.failed; pass++) {
        a.emitted_in_pass = 0;
        a.pass = pass;
        shuffle_buffer_reseed(sb, loader_mix_seed(l->o.seed, pass, p->shard, 2));
        for (int i = 0; i < p->piece_count && !a.failed && !a.finished; i++) {
            int64_t seq = pass * p->piece_count + i;
            piece_slot *slot = &l->slots[seq % l->queue];
            pthread_mutex_lock(&l->lock);
            while (!l->stop && !slot->ready) pthread_cond_wait(&l->piece_ready, &l->lock);
            bool stopping = l->stop;
            const loader_piece *pc = &p->pieces[piece_for_sequence(l, seq)];
            pthread_mutex_unlock(&l->lock);
            int64_t first_row = p->files[pc->file].row_group_first_row[pc->row_group] + pc->row_begin;
            if (stopping) {
                a.failed = true;
                break;
            }
            if (slot->status != FTL_OK) {
                publish_end(&a, slot->status, slot->error);
                a.failed = true;
                break;
            }
            const loader_rows *r = &slot->rows;
            for (int64_t k = 0; k < r->rows && !a.finished && !a.failed; k++)
                shuffle_buffer_push(sb, r->labels[k], first_row + k, r->values + k * p->row_bytes,
                                    r->has_paths ? r->path_data + r->path_offsets[k] : NULL, emit_row, &a);
            pthread_mutex_lock(&l->lock);
            slot->ready = false;
            l->consumed = seq + 1;
            pthread_cond_broadcast(&l->piece_free);
            pthread_mutex_unlock(&l->lock);
        }
        if (!a.failed && !a.finished) shuffle_buffer_drain(sb, emit_row, &a);
        sb->count = 0;
    }
    if (!a.failed) publish_end(&a, FTL_OK, NULL);
    return NULL;
}

/* ---------------------------------------------------------------- the order alone */

typedef struct index_sink {
    int64_t *rows;
    int64_t count, limit;
} index_sink;

static void collect_index(void *ctx, int32_t label, int64_t index, const uint8_t *value, const char *path) {
    (void)label, (void)path, (void)index;
    index_sink *s = ctx;
    if (s->count >= s->limit) return; /* the equal-batches trim, as emit_row */
    memcpy(&s->rows[s->count++], value, sizeof(int64_t));
}

ftl_status ftl_loader_pass_rows(const ftl_loader_options *o, int64_t pass, int64_t **rows, int64_t *count) {
    *rows = NULL;
    *count = 0;
    loader_plan p;
    FTL_TRY(loader_plan_build(o, &p));
    /* The same decisions as the assembler, made on row indices instead of row bytes. */
    int *order = ftl_xmalloc((size_t)(p.piece_count ? p.piece_count : 1) * sizeof *order);
    loader_plan_pass_order(&p, o->seed, pass, o->shuffle, order);
    shuffle_buffer sb;
    int64_t buffer = o->shuffle ? o->shuffle_buffer : 0, shard_rows = p.shard_end - p.shard_begin;
    if (!shuffle_buffer_init(&sb, buffer < shard_rows ? buffer : shard_rows, (int64_t)sizeof(int64_t), false)) {
        free(order);
        loader_plan_free(&p);
        return ftl_fail(FTL_E_NOMEM, "not enough memory for a shuffle buffer of %lld rows", (long long)buffer);
    }
    shuffle_buffer_reseed(&sb, loader_mix_seed(o->seed, pass, p.shard, 2));
    index_sink sink = {.rows = ftl_xmalloc((size_t)(p.rows_per_pass ? p.rows_per_pass : 1) * sizeof(int64_t)),
                       .limit = p.rows_per_pass};
    for (int i = 0; i < p.piece_count; i++) {
        const loader_piece *pc = &p.pieces[order[i]];
        int64_t first = p.files[pc->file].row_group_first_row[pc->row_group];
        for (int64_t r = pc->row_begin; r < pc->row_end; r++) {
            int64_t global = first + r;
            shuffle_buffer_push(&sb, 0, global, (const uint8_t *)&global, NULL, collect_index, &sink);
        }
    }
    shuffle_buffer_drain(&sb, collect_index, &sink);
    shuffle_buffer_free(&sb);
    free(order);
    loader_plan_free(&p);
    *rows = sink.rows;
    *count = sink.count;
    return FTL_OK;
}

/* ---------------------------------------------------------------- position */

typedef struct position_record {
    char magic[8];
    uint32_t version, steps_mode;
    int64_t epoch, step;
    /* the plan it belongs to */
    int64_t total_rows, row_bytes, shuffle_buffer, steps_per_epoch;
    uint64_t seed;
    int32_t shard, num_shards, batch_size, flags;
} position_record;

static int32_t plan_flags(const ftl_loader_options *o) {
    return (o->shuffle ? 1 : 0) | (o->drop_remainder ? 2 : 0) | (o->equal_batches ? 4 : 0);
}

ftl_status ftl_loader_position_save(const ftl_loader *l, uint8_t **blob, size_t *size) {
    position_record r;
    memset(&r, 0, sizeof r);
    memcpy(r.magic, POSITION_MAGIC, 8);
    r.version = POSITION_VERSION;
    r.steps_mode = mode_steps(l);
    r.epoch = l->next_epoch;
    r.step = l->next_step;
    r.total_rows = l->plan.total_rows;
    r.row_bytes = l->plan.row_bytes;
    r.shuffle_buffer = l->o.shuffle_buffer;
    r.steps_per_epoch = l->o.steps_per_epoch;
    r.seed = l->o.seed;
    r.shard = l->plan.shard;
    r.num_shards = l->plan.num_shards;
    r.batch_size = l->o.batch_size;
    r.flags = plan_flags(&l->o);
    *blob = ftl_xmalloc(sizeof r);
    memcpy(*blob, &r, sizeof r);
    *size = sizeof r;
    return FTL_OK;
}

static ftl_status restore_position(ftl_loader *l) {
    const ftl_loader_options *o = &l->o;
    position_record r;
    if (o->resume_position_size != sizeof r)
        return ftl_fail(FTL_E_FORMAT, "loader position has %zu bytes, expected %zu", o->resume_position_size, sizeof r);
    memcpy(&r, o->resume_position, sizeof r);
    if (memcmp(r.magic, POSITION_MAGIC, 8) != 0 || r.version != POSITION_VERSION)
        return ftl_fail(FTL_E_FORMAT, "not a loader position (bad magic or version)");
    const char *what = NULL;
    if (r.total_rows != l->plan.total_rows) what = "the dataset's row count";
    else if (r.row_bytes != l->plan.row_bytes) what = "the row size";
    else if (r.shard != l->plan.shard || r.num_shards != l->plan.num_shards) what = "the shard";
    else if (r.batch_size != o->batch_size) what = "the batch size";
    else if (r.seed != o->seed) what = "the seed";
    else if (r.shuffle_buffer != o->shuffle_buffer || r.flags != plan_flags(o)) what = "the shuffle settings";
    else if (r.steps_per_epoch != o->steps_per_epoch) what = "steps per epoch";
    if (what)
        return ftl_fail(FTL_E_INVALID_ARG, "cannot resume the data position: %s differs from the saved run", what);
    /* epochs past 2^31 are no real run's, and would overflow the row arithmetic below */
    if (r.epoch < 0 || r.epoch > INT32_MAX || r.step < 0 || r.step >= l->plan.batches_per_epoch)
        return ftl_fail(FTL_E_FORMAT, "loader position epoch %lld step %lld is out of range", (long long)r.epoch,
                        (long long)r.step);
    l->next_epoch = r.epoch;
    l->next_step = r.step;
    if (mode_steps(l)) {
        int64_t rows;
        if (__builtin_mul_overflow(r.epoch, o->steps_per_epoch, &rows) || __builtin_add_overflow(rows, r.step, &rows) ||
            __builtin_mul_overflow(rows, (int64_t)o->batch_size, &rows))
            return ftl_fail(FTL_E_FORMAT, "loader position epoch %lld step %lld is out of range", (long long)r.epoch,
                            (long long)r.step);
        l->start_pass = rows / l->plan.rows_per_pass;
        l->start_skip = rows % l->plan.rows_per_pass;
    } else {
        l->start_pass = r.epoch;
        l->start_skip = r.step * o->batch_size;
    }
    return FTL_OK;
}

/* ---------------------------------------------------------------- open / next / close */

static ftl_status open_cache(ftl_loader *l) {
    const loader_plan *p = &l->plan;
    char **keys = ftl_xcalloc((size_t)(p->piece_count ? p->piece_count : 1), sizeof *keys);
    for (int i = 0; i < p->piece_count; i++) {
        const loader_file *f = &p->files[p->pieces[i].file];
        keys[i] = ftl_xmalloc(65);
        row_group_cache_key(f->path, f->size, f->mtime_ns, p->pieces[i].row_group, l->columns_desc, p->row_bytes, keys[i]);
    }
    FTL_TRY(row_group_cache_open(&l->cache, l->o.cache_dir, l->o.cache_size_limit, keys, p->piece_count));
    l->use_cache = true;
    return FTL_OK;
}

ftl_status ftl_loader_open(const ftl_loader_options *options, ftl_loader **out) {
    *out = NULL;
    ftl_loader *l = ftl_xcalloc(1, sizeof *l);
    l->o = *options;
    if (!l->o.value_column) l->o.value_column = FTL_COLUMN_IMAGE;
    if (!l->o.label_column) l->o.label_column = FTL_COLUMN_LABEL;
    if (l->o.num_shards == 0) l->o.num_shards = 1;
    if (l->o.threads > 256) { /* each is a thread with its buffers: a typo, not a plan */
        int threads = l->o.threads;
        free(l);
        return ftl_fail(FTL_E_INVALID_ARG, "--loader-threads %d is out of range (1..256)", threads);
    }
    if (l->o.shuffle_buffer < 0) l->o.shuffle_buffer = 0;
    l->o.resume_position = NULL;
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->piece_ready, NULL);
    pthread_cond_init(&l->piece_free, NULL);
    pthread_cond_init(&l->batch_ready, NULL);
    pthread_cond_init(&l->batch_free, NULL);
    ftl_status st = loader_plan_build(&l->o, &l->plan); /* with the defaults above */
    l->o.sources = NULL; /* not kept: only needed while planning */
    if (st != FTL_OK) {
        free(l);
        return st;
    }
    if (l->o.path_column && l->plan.file_count > 0 && l->plan.files[0].path_column < 0) l->o.path_column = NULL;
    /* Pixel rows are a copy, which one reader keeps ahead of any backbone; encoded rows are decoded
     * and thumbnailed here, one image at a time per reader: a reader per core (docs/BENCHMARKS.md,
     * issue 48, measures decode against the backbone's rate). */
    if (l->o.threads <= 0) l->o.threads = l->plan.any_encoded ? ftl_cpu_count() : 1;
    /* A shuffle buffer larger than the shard holds the whole shard and emits the same order. */
    int64_t shard_rows = l->plan.shard_end - l->plan.shard_begin;
    if (l->o.shuffle_buffer > shard_rows) l->o.shuffle_buffer = shard_rows;
    l->columns_desc = ftl_format("%s|%s|%s|%d", l->o.label_column, l->o.value_column, l->o.path_column ? l->o.path_column : "",
                                 l->o.label_offset);
    if (options->resume_position) {
        l->o.resume_position = options->resume_position;
        st = restore_position(l);
        l->o.resume_position = NULL;
    }
    if (st == FTL_OK && l->o.cache_dir) st = open_cache(l);
    if (st != FTL_OK) {
        ftl_loader_close(l);
        return st;
    }
    const loader_plan *p = &l->plan;
    l->queue = l->o.queue_row_groups > 0 ? l->o.queue_row_groups : 2 * l->o.threads;
    l->slots = ftl_xcalloc((size_t)l->queue, sizeof *l->slots);
    l->start_seq = l->next_claim = l->consumed = l->start_pass * p->piece_count;
    if (l->o.epochs <= 0) {
        l->end_seq = INT64_MAX;
    } else if (mode_steps(l)) {
        int64_t rows = l->o.epochs * l->o.steps_per_epoch * l->o.batch_size;
        l->end_seq = (rows + p->rows_per_pass - 1) / p->rows_per_pass * p->piece_count;
    } else {
        l->end_seq = l->o.epochs * p->piece_count;
    }
    /* Sizes come from flags and file metadata: allocate without aborting, and say what failed. */
    for (int i = 0; i < BATCH_RING; i++) {
        l->batches[i].labels = malloc((size_t)l->o.batch_size * sizeof(int32_t));
        l->batches[i].values = malloc((size_t)l->o.batch_size * (size_t)p->row_bytes);
        l->batches[i].row_index = malloc((size_t)l->o.batch_size * sizeof(int64_t));
        l->batches[i].row_pass = malloc((size_t)l->o.batch_size * sizeof(int64_t));
        if (l->o.path_column) l->batches[i].paths = calloc((size_t)l->o.batch_size, sizeof(char *));
        if (!l->batches[i].labels || !l->batches[i].values || !l->batches[i].row_index || !l->batches[i].row_pass || (l->o.path_column && !l->batches[i].paths)) {
            ftl_status st = ftl_fail(FTL_E_NOMEM, "not enough memory for batches of %d rows of %lld bytes (%.1f GiB each)",
                                     l->o.batch_size, (long long)p->row_bytes,
                                     (double)l->o.batch_size * (double)p->row_bytes / (double)(1 << 30));
            ftl_loader_close(l);
            return st;
        }
    }
    if (!shuffle_buffer_init(&l->shuffle, l->o.shuffle ? l->o.shuffle_buffer : 0, p->row_bytes, l->o.path_column != NULL)) {
        ftl_status st = ftl_fail(FTL_E_NOMEM, "not enough memory for a shuffle buffer of %lld rows of %lld bytes",
                                 (long long)l->o.shuffle_buffer, (long long)p->row_bytes);
        ftl_loader_close(l);
        return st;
    }
    l->readers = ftl_xcalloc((size_t)l->o.threads, sizeof *l->readers);
    for (; l->reader_count < l->o.threads; l->reader_count++)
        if (pthread_create(&l->readers[l->reader_count], NULL, reader_main, l) != 0) break;
    if (l->reader_count == 0 || pthread_create(&l->assembler, NULL, assembler_main, l) != 0) {
        ftl_loader_close(l);
        return ftl_fail(FTL_E_INTERNAL, "cannot start loader threads");
    }
    l->assembler_started = true;
    *out = l;
    return FTL_OK;
}

ftl_status ftl_loader_next(ftl_loader *l, ftl_batch *batch) {
    memset(batch, 0, sizeof *batch);
    double start = ftl_now();
    pthread_mutex_lock(&l->lock);
    if (l->taken > l->released) {
        l->released = l->taken;
        pthread_cond_broadcast(&l->batch_free);
    }
    while (l->produced <= l->taken) pthread_cond_wait(&l->batch_ready, &l->lock);
    batch_slot *b = &l->batches[l->taken % BATCH_RING];
    l->taken++;
    pthread_mutex_unlock(&l->lock);
    l->wait_seconds += ftl_now() - start;
    if (b->status != FTL_OK) {
        l->taken--; /* keep returning the error */
        return ftl_fail(b->status, "%s", b->error ? b->error : "loader failed");
    }
    *batch = b->meta;
    batch->labels = b->labels;
    batch->row_index = b->row_index;
    batch->row_pass = b->row_pass;
    batch->values = b->values;
    batch->paths = (const char *const *)b->paths;
    if (b->meta.rows == 0) {
        l->taken--; /* the end marker stays the answer */
        return FTL_OK;
    }
    l->stat_batches++;
    l->stat_rows += b->meta.rows;
    if (b->meta.last_in_epoch) {
        l->next_epoch = b->meta.epoch + 1;
        l->next_step = 0;
    } else {
        l->next_epoch = b->meta.epoch;
        l->next_step = b->meta.step + 1;
    }
    return FTL_OK;
}

void ftl_loader_close(ftl_loader *l) {
    if (!l) return;
    pthread_mutex_lock(&l->lock);
    l->stop = true;
    pthread_cond_broadcast(&l->piece_free);
    pthread_cond_broadcast(&l->piece_ready);
    pthread_cond_broadcast(&l->batch_free);
    pthread_mutex_unlock(&l->lock);
    for (int i = 0; i < l->reader_count; i++) pthread_join(l->readers[i], NULL);
    if (l->assembler_started) pthread_join(l->assembler, NULL);
    free(l->readers);
    for (int i = 0; l->slots && i < l->queue; i++) {
        loader_rows_free(&l->slots[i].rows);
        free(l->slots[i].error);
    }
    free(l->slots);
    for (int i = 0; i < BATCH_RING; i++) {
        free(l->batches[i].labels);
        free(l->batches[i].row_index);
        free(l->batches[i].row_pass);
        free(l->batches[i].values);
        if (l->batches[i].paths)
            for (int k = 0; k < l->o.batch_size; k++) free(l->batches[i].paths[k]);
        free(l->batches[i].paths);
        free(l->batches[i].error);
    }
    free(l->order[0]);
    free(l->order[1]);
    shuffle_buffer_free(&l->shuffle);
    if (l->use_cache) row_group_cache_close(&l->cache);
    loader_plan_free(&l->plan);
    free(l->columns_desc);
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->piece_ready);
    pthread_cond_destroy(&l->piece_free);
    pthread_cond_destroy(&l->batch_ready);
    pthread_cond_destroy(&l->batch_free);
    free(l);
}

int64_t ftl_loader_batches_per_epoch(const ftl_loader *l) { return l->plan.batches_per_epoch; }
int64_t ftl_loader_total_rows(const ftl_loader *l) { return l->plan.total_rows; }
int64_t ftl_loader_shard_rows(const ftl_loader *l) { return l->plan.shard_end - l->plan.shard_begin; }
int64_t ftl_loader_shard_begin(const ftl_loader *l) { return l->plan.shard_begin; }
int64_t ftl_loader_epoch_rows(const ftl_loader *l) { return l->plan.rows_per_pass; }
int64_t ftl_loader_row_bytes(const ftl_loader *l) { return l->plan.row_bytes; }
int ftl_loader_image_size(const ftl_loader *l) { return l->plan.image_size; }

bool ftl_loader_paths_are_text(const ftl_loader *l) {
    for (int i = 0; i < l->plan.file_count; i++) {
        const loader_file *f = &l->plan.files[i];
        if (f->path_column >= 0 && !ftl_parquet_column(f->parquet, f->path_column)->utf8) return false;
    }
    return true;
}

const char *ftl_loader_metadata(const ftl_loader *l, const char *key) {
    return l->plan.file_count ? ftl_parquet_metadata_get(l->plan.files[0].parquet, key) : NULL;
}

void ftl_loader_stats_get(const ftl_loader *l, ftl_loader_stats *s) {
    ftl_loader *m = (ftl_loader *)l;
    pthread_mutex_lock(&m->lock);
    *s = (ftl_loader_stats){.wait_seconds = l->wait_seconds, .batches = l->stat_batches, .rows = l->stat_rows,
                            .row_groups_read = l->stat_row_groups, .bytes_read = l->stat_bytes};
    pthread_mutex_unlock(&m->lock);
    if (l->use_cache) {
        pthread_mutex_lock(&m->cache.lock);
        s->cache_hits = l->cache.hits;
        s->cache_misses = l->cache.misses;
        s->cache_bytes = l->cache.used;
        pthread_mutex_unlock(&m->cache.lock);
    }
}
