/* Public model API: load (pipeline + compile), feature extraction in batches, info. */
#include "ftl/nn.h"
#include "ftl/profile.h"
#include "nn/backend.h"
#include "nn/cuda_backend.h"
#include "nn/onnx/load.h"
#include "nn/model_parts.h"
#include "nn/ir/topo.h"
#include "nn/ir/trainable.h"
#include "nn/preprocess.h"
#include "nn/ir/quantize.h"
#include "nn/ir/separable.h"
#include "nn/ir/ops.h"
#include "ftl/image.h"
#include "nn/ir/shape.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/log.h"
#include "util/sha256.h"

#include <dnnl.h>
#include <stdlib.h>
#include <string.h>

enum { DEFAULT_BATCH = 16, MAX_BATCH = FTL_MODEL_MAX_BATCH };

struct ftl_model {
    nn_graph *g;
    ftl_model_info info;
    char sha[65];
    char identity[65];
    char *path, *input_name, *feature_name, *backend_name, *device_name;
    const nn_backend *be;
    nn_compile_opts copts;   /* copts.batch = images per plan run; copts.node_batch = node_batch */
    int *node_batch;         /* per node micro-batch for copts.batch (NULL: uniform) */
    int *tail_node_batch;    /* the same for the tail plan */
    int uniform_batch;       /* the micro-batch when every node runs the same number of images */
    nn_plan *plan;           /* copts.batch rows */
    nn_plan *tail;           /* a partial last batch of tail_batch rows, compiled on first use */
    int tail_batch;
    int64_t input_per_image; /* floats */
    bool is_top;             /* the top of a cut: its input is boundary rows, not an image */
    int in_flight;           /* batches started (ftl_model_start_features), not collected */
    nn_preprocess_worker *workers; /* one per thread: batch resize (Pillow BILINEAR, as the peer recipe) */
    float *int8_scale;       /* precision int8: per graph tensor (nn_compile_opts) */
    bool *int8_unsigned, *int8_written;
    int *int8_zero;          /* a quantized model's zero points */
    bool *watch;             /* calibration: the tensors the plans hand to the observer */
};

void ftl_model_options_init(ftl_model_options *o) {
    memset(o, 0, sizeof *o);
    o->precision = FTL_NN_FP32;
    o->batch = DEFAULT_BATCH;
    o->device = FTL_DEVICE_AUTO;
    o->device_index = -1;
}

void ftl_model_free(ftl_model *m) {
    if (!m) return;
    if (m->plan) m->be->free(m->plan);
    if (m->tail) m->be->free(m->tail);
    free(m->node_batch);
    free(m->tail_node_batch);
    nn_graph_free(m->g);
    free(m->path);
    free(m->input_name);
    free(m->feature_name);
    free(m->backend_name);
    free(m->device_name);
    nn_preprocess_workers_free(m->workers, m->copts.threads);
    free(m->int8_scale);
    free(m->int8_unsigned);
    free(m->int8_written);
    free(m->int8_zero);
    free(m->watch);
    free(m);
}

/* Image geometry of the input: [N,C,H,W] or [N,H,W,C] with C = 3 (or 1). */
static void input_geometry(ftl_model *m, const nn_shape *s) {
    ftl_model_info *i = &m->info;
    if (s->rank != 4) return;
    bool nhwc = (s->d[3] == 3 || s->d[3] == 1) && s->d[1] != 3 && s->d[1] != 1;
    i->channels_last = nhwc;
    i->channels = (int)(nhwc ? s->d[3] : s->d[1]);
    i->height = (int)(nhwc ? s->d[1] : s->d[2]);
    i->width = (int)(nhwc ? s->d[2] : s->d[3]);
}

/* Bytes of the L3 cache one core sees (sysfs; glibc may report the whole host's); the
 * environment variable FTL_NN_CACHE_BYTES overrides it (tests, tuning). */
static int64_t l3_bytes(void) {
    const char *e = getenv("FTL_NN_CACHE_BYTES");
    if (e && atoll(e) > 0) return atoll(e);
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    long long kb = 0;
    if (f) {
        if (fscanf(f, "%lldK", &kb) != 1) kb = 0;
        fclose(f);
    }
    return kb > 0 ? kb * 1024 : 32ll << 20;
}

/* Input + output activation bytes of node i for one image (shapes inferred for batch 1). */
static int64_t layer_bytes(const nn_graph *g, int i, int elem) {
    const nn_node *n = &g->nodes[i];
    int64_t b = nn_shape_count(&g->tensors[n->out[0]].shape);
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0 && !g->tensors[n->in[k]].data) b += nn_shape_count(&g->tensors[n->in[k]].shape);
    return b * elem;
}

/* Images that fit a layer of `bytes` per image in the cache budget: a power of two <= batch, >= 2. */
static int fit_batch(int64_t bytes, int64_t budget, int batch) {
    int micro = 1;
    while (micro * 2 <= batch && (int64_t)micro * 2 * bytes <= budget) micro *= 2;
    return micro < 2 && batch >= 2 ? 2 : micro;
}

/* How each activation holds the batch, from its shape at batch 1 and 2: ROWS > 0 when its first
 * dimension is the batch times ROWS rows per image with the images outermost in memory (Swin's
 * [B x windows, 49, C]), known from its producer: a Reshape of such a tensor, or an op reading one
 * with the same rows; a micro-batch boundary may cut it. ROWS_PINNED when its size follows the
 * batch but that is not known (a Transpose's [3, B, heads, T, d], a Concat along the batch, what
 * is gathered or reshaped from those): its producer and readers then run one micro-batch.
 * NULL when some activation's size does not follow the batch (per-layer sizes not possible).
 * Shapes are for batch 1 on entry and exit. */
enum { ROWS_PINNED = -1 };

static int *batch_rows(nn_graph *g) {
    int n = g->n_tensors;
    int64_t *lead = ftl_xcalloc(2 * (size_t)n + 1, sizeof *lead), *count = ftl_xcalloc(2 * (size_t)n + 1, sizeof *count);
    int *rows = ftl_xcalloc((size_t)n + 1, sizeof *rows);
    bool ok = true;
    for (int pass = 1; pass <= 2 && ok; pass++) {
        if (pass == 2 && nn_infer_shapes(g, 2) != FTL_OK) ok = false;
        for (int t = 0; t < n && ok; t++) {
            const nn_shape *s = &g->tensors[t].shape;
            lead[(pass - 1) * n + t] = s->rank >= 1 ? s->d[0] : 0;
            count[(pass - 1) * n + t] = nn_shape_count(s);
        }
    }
    nn_infer_shapes(g, 1);
    /* rows of tensor t, or 0 when its size does not follow the batch */
#define ROWS_OF(t) (count[n + (t)] != 2 * count[(t)] || count[(t)] <= 0 ? 0                                    \
                    : lead[n + (t)] == 2 * lead[(t)] && lead[(t)] >= 1 ? (int)lead[(t)] : ROWS_PINNED)
    for (int k = 0; k < g->n_inputs && ok; k++) {
        int t = g->inputs[k];
        rows[t] = ROWS_OF(t);
        ok = rows[t] == 1; /* the caller's images: [B, ...] */
    }
    for (int i = 0; i < g->n_nodes && ok; i++) {
        const nn_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->n_in && ok; k++) /* every activation read was written before (or is an input) */
            ok = nd->in[k] < 0 || g->tensors[nd->in[k]].data || rows[nd->in[k]] != 0;
        for (int o = 0; o < nd->n_out && ok; o++) {
            int t = nd->out[o];
            if (t < 0) continue;
            int r = ROWS_OF(t);
            ok = r != 0;
            if (r > 0) { /* images outermost only where kept from an input: a Reshape's, or the same rows */
                bool kept = false;
                for (int k = 0; k < nd->n_in && !kept; k++) {
                    int x = nd->in[k];
                    if (x < 0 || g->tensors[x].data) continue;
                    kept = nn_op_is_reshape_like(nd->op) ? k == 0 && rows[x] > 0 : rows[x] == r;
                }
                if (!kept) r = ROWS_PINNED;
            }
            rows[t] = r;
        }
    }
#undef ROWS_OF
    free(lead);
    free(count);
    if (!ok) {
        free(rows);
        return NULL;
    }
    return rows;
}

/* Lowers node micro-batches so that a tensor whose images are not outermost is written and read at
 * one size, and so are the inputs of the node writing it (a Transpose moving the batch axis reads its
 * input through a permuted view, which a micro-batch boundary cannot cut); keeps them non-decreasing
 * along the graph. False when such a node reads a graph input. The graph is compacted (its tensors'
 * producers current). */
static bool pin_micro_batches(const nn_graph *g, const int *rows, int *nb) {
    bool changed = true, ok = true;
    while (changed && ok) {
        changed = false;
        for (int i = 0; i < g->n_nodes && ok; i++) {
            const nn_node *nd = &g->nodes[i];
            bool writes_pinned = false;
            for (int o = 0; o < nd->n_out; o++) writes_pinned |= nd->out[o] >= 0 && rows[nd->out[o]] == ROWS_PINNED;
            for (int k = 0; k < nd->n_in + nd->n_post && ok; k++) {
                int t = k < nd->n_in ? nd->in[k] : nd->post[k - nd->n_in].kind == NN_POST_SUM ? nd->post[k - nd->n_in].sum_tensor : -1;
                if (t < 0 || g->tensors[t].data || (rows[t] != ROWS_PINNED && !writes_pinned)) continue;
                int w = g->tensors[t].producer;
                if (w < 0) ok = false;
                else if (nb[w] != nb[i]) { /* the producer comes first: never larger */
                    nb[i] = nb[w] = nb[w] < nb[i] ? nb[w] : nb[i];
                    changed = true;
                }
            }
        }
        for (int i = g->n_nodes - 2; i >= 0; i--)
            if (nb[i] > nb[i + 1]) {
                nb[i] = nb[i + 1];
                changed = true;
            }
    }
    return ok;
}

/* The last node of a run that the CPU's int8 plan does in one step (nn/ir/separable.h: a stride-1 3x3
 * depthwise conv, the 1x1 that alone reads it and a 3x3 stride-2 MaxPool after that), or i when node i
 * starts none. Such a step runs its nodes at one micro-batch, so the planner keeps them at one: apart, a
 * 1x1 that narrows the channels fits more images than its depthwise and the boundary falls between them
 * (MobileNetV2's projections, Xception's block4 pool on a CPU with a smaller L3). Stride-2 pairs are
 * opt-in and rare: left to the sizes. The emitter makes the final choice. */
static int fused_run_end(const nn_graph *g, int i) {
    int m = nn_separable_pointwise(g, i, false);
    if (m < 0) return i;
    int q = nn_separable_pool(g, m);
    return q >= 0 ? q : m;
}

/* Micro-batches: the largest (power of two) number of images whose layer fits a third of the L3,
 * per node. Early layers (large activations) run 2 images at a time so they stay in cache from
 * layer to layer; late layers (7x7, 14x14) run 8-16 at once, where small chunks starve the kernels
 * (ResNet-50 layer4: 72% of peak at 2 images, 90% at 8). Made non-decreasing along the graph (a
 * node runs at most what every later node allows), so the plan has a few segments and few tensors
 * cross them. Sets *plan_batch (the largest) and, when not uniform, *node_batch; *uniform = one
 * size for all nodes (the biggest layer's), the fallback. Shapes are for batch 1 on entry and exit. */
static void choose_micro_batches(nn_graph *g, int batch, nn_precision prec, int *plan_batch, int **node_batch,
                                 int *uniform) {
    int elem = prec == NN_PREC_BF16 ? 2 : 4;
    int64_t budget = l3_bytes() / 3, worst = 0;
    *node_batch = NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        int64_t b = layer_bytes(g, i, elem);
        if (b > worst) worst = b;
    }
    *plan_batch = *uniform = fit_batch(worst, budget, batch);
    int *rows = g->n_nodes > 0 ? batch_rows(g) : NULL;
    if (!rows) return;
    int *nb = ftl_xmalloc(((size_t)g->n_nodes + 1) * sizeof *nb);
    int next = batch;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        int m = fit_batch(layer_bytes(g, i, elem), budget, batch);
        nb[i] = next = m < next ? m : next;
    }
    if (prec == NN_PREC_INT8) /* lowering the run's later nodes keeps the sizes non-decreasing */
        for (int i = 0; i < g->n_nodes; i++)
            for (int k = i + 1, end = fused_run_end(g, i); k <= end; k++)
                if (nb[k] > nb[i]) nb[k] = nb[i];
    bool ok = pin_micro_batches(g, rows, nb);
    free(rows);
    if (!ok) {
        free(nb);
        return;
    }
    *plan_batch = nb[g->n_nodes - 1];
    if (ftl_log_enabled(FTL_LOG_DEBUG))
        for (int i = 0; i < g->n_nodes; i++)
            if (i == 0 || nb[i] != nb[i - 1])
                ftl_log_debug("nn: micro-batch %d from node '%s' (%s, %lld KiB per image)", nb[i], g->nodes[i].name,
                              nn_op_name(g->nodes[i].op), (long long)(layer_bytes(g, i, elem) >> 10));
    if (nb[0] == *plan_batch) {
        free(nb);
        return;
    }
    *node_batch = nb;
}

/* Node micro-batches for a plan of `rows` images from those for the full plan: the largest
 * divisor of rows not above each. */
static int *node_batches_for(const int *full, int n_nodes, int rows) {
    int *nb = ftl_xmalloc(((size_t)n_nodes + 1) * sizeof *nb);
    for (int i = 0; i < n_nodes; i++) {
        int m = full[i] < rows ? full[i] : rows;
        while (rows % m) m--;
        nb[i] = m;
    }
    return nb;
}

void ftl_model_identity_of(const char *sha256, const ftl_tensor_override *overrides, int n_overrides, char out[65]) {
    if (n_overrides <= 0) {
        snprintf(out, 65, "%.64s", sha256);
        return;
    }
    ftl_sha256 h;
    ftl_sha256_init(&h);
    ftl_sha256_update(&h, sha256, 64);
    for (int k = 0; k < n_overrides; k++) {
        const ftl_tensor_override *ov = &overrides[k];
        int64_t count = ov->count;
        ftl_sha256_update(&h, ov->name, strlen(ov->name) + 1);
        ftl_sha256_update(&h, &count, sizeof count);
        ftl_sha256_update(&h, ov->data, (size_t)ov->count * sizeof(float));
    }
    uint8_t digest[32];
    ftl_sha256_final(&h, digest);
    ftl_sha256_hex(digest, out);
}

/* Replaces the overridden initializers (checked: a float initializer of the same size) and sets
 * m->identity from the file's checksum and every override. */
static ftl_status apply_overrides(ftl_model *m, const char *path, const ftl_model_options *o) {
    FTL_TRY(nn_graph_override(m->g, path, o->overrides, o->n_overrides));
    ftl_model_identity_of(m->sha, o->overrides, o->n_overrides, m->identity);
    return FTL_OK;
}

/* The identity of what this model computes: the overrides its pruned graph reads (a bottom model
 * is not changed by tuned tensors of the top, so its boundary cache stays valid), and for the top
 * of a cut, the cut: its features equal the full backbone's only up to float reassociation. */
static void identity_of_what_runs(ftl_model *m, const ftl_model_options *o) {
    const nn_graph *g = m->g;
    ftl_tensor_override *read = ftl_xcalloc((size_t)o->n_overrides + 1, sizeof *read);
    int n_read = 0;
    for (int k = 0; k < o->n_overrides; k++) {
        int t = nn_graph_find(g, o->overrides[k].name);
        bool used = false;
        for (int i = 0; t >= 0 && i < g->n_nodes && !used; i++)
            for (int j = 0; !g->nodes[i].dead && j < g->nodes[i].n_in; j++) used |= g->nodes[i].in[j] == t;
        if (used) read[n_read++] = o->overrides[k];
    }
    ftl_model_identity_of(m->sha, read, n_read, m->identity);
    free(read);
    if (o->top_of) {
        char *text = o->top_of->last_convs > 0 ? ftl_format("top of last %d\n%s", o->top_of->last_convs, m->identity)
                                               : ftl_format("top of from %s\n%s", o->top_of->from_tensor, m->identity);
        ftl_sha256_hex_of_string(text, m->identity);
        free(text);
    }
    if (o->precision == FTL_NN_INT8 && o->int8_scales) { /* int8 features differ with the calibration */
        char *text = ftl_format("int8 %s\n%s", ftl_nn_int8_scales_hash(o->int8_scales), m->identity);
        ftl_sha256_hex_of_string(text, m->identity);
        free(text);
    }
}

/* The per-tensor arrays of an int8 plan (or the watched tensors of a calibration run). */
static ftl_status int8_setup(ftl_model *m, const ftl_model_options *o, nn_observe_fn observe_fn, void *ctx) {
    size_t n = (size_t)m->g->n_tensors + 1;
    if (observe_fn) {
        m->watch = ftl_xcalloc(n, sizeof *m->watch);
        nn_int8_watched(m->g, m->watch);
        m->copts.observe = m->watch;
        m->copts.observe_fn = observe_fn;
        m->copts.observe_ctx = ctx;
    }
    bool quantized = m->g->quantized && !observe_fn; /* its own scales, at any precision: no calibration */
    if (!quantized && o->precision != FTL_NN_INT8) return FTL_OK;
    const ftl_nn_int8_scales *q = o->int8_scales;
    if (!quantized && !q)
        return ftl_fail(FTL_E_INVALID_ARG, "--precision int8 needs calibration scales (ftl_nn_calibrate, or the ones "
                        "a model file recorded)");
    m->int8_scale = ftl_xcalloc(n, sizeof *m->int8_scale);
    m->int8_unsigned = ftl_xcalloc(n, sizeof *m->int8_unsigned);
    m->int8_written = ftl_xcalloc(n, sizeof *m->int8_written);
    m->copts.int8_scale = m->int8_scale;
    m->copts.int8_unsigned = m->int8_unsigned;
    m->copts.int8_written = m->int8_written;
    if (quantized) {
        m->int8_zero = ftl_xcalloc(n, sizeof *m->int8_zero);
        m->copts.int8_zero = m->int8_zero;
        nn_qdq_plan_int8(m->g, m->int8_scale, m->int8_unsigned, m->int8_written, m->int8_zero);
        return FTL_OK;
    }
    return nn_int8_tensor_arrays(m->g, q->names, q->scale, q->is_unsigned, q->count, o->bottom_of || o->top_of,
                                 m->int8_scale, m->int8_unsigned, m->int8_written);
}

bool ftl_nn_cpu_int8_fast(void) {
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return isa == dnnl_cpu_isa_avx512_core_vnni || isa == dnnl_cpu_isa_avx512_core_bf16 ||
           isa == dnnl_cpu_isa_avx512_core_amx || isa == dnnl_cpu_isa_avx2_vnni;
}

static ftl_status load(ftl_model *m, const char *path, const ftl_model_options *o) {
    FTL_TRY(nn_load_checked_expecting(path, &m->g, m->sha, o->expected_sha256, o->expected_sha256_of));
    FTL_TRY(apply_overrides(m, path, o));
    nn_graph *g = m->g;
    int feature;
    FTL_TRY(nn_select_features(g, o->features_from, &feature));
    /* the whole backbone's, before a cut */
    g->pointwise_depthwise = nn_graph_find_pointwise_depthwise(g, nn_cpu_depthwise_min_expansion());
    g->blocked_images = nn_cpu_blocked_images(g);
    ftl_status st = FTL_OK;
    if (o->bottom_of && o->top_of)
        return ftl_fail(FTL_E_INVALID_ARG, "%s: a model is the bottom or the top of a cut, not both", path);
    if (o->top_of) { /* features_from computed from the boundary rows of the cut */
        nn_cut_spec spec = {o->top_of->last_convs, o->top_of->from_tensor};
        st = nn_graph_prune(g, feature);
        if (st == FTL_OK) st = nn_infer_shapes(g, 1);
        if (st == FTL_OK) st = nn_top_input(g, &spec, feature);
        if (st != FTL_OK) return ftl_fail_context(st, "%s", path);
        /* not the full backbone's features (the same up to float reassociation): an identity of their own */
        m->is_top = true;
    }
    if (o->bottom_of) { /* the boundary of the cut below features_from */
        nn_cut_spec spec = {o->bottom_of->last_convs, o->bottom_of->from_tensor};
        st = nn_graph_prune(g, feature);
        if (st == FTL_OK) st = nn_infer_shapes(g, 1);
        if (st == FTL_OK) st = nn_bottom_output(g, &spec, &feature);
        if (st != FTL_OK) return ftl_fail_context(st, "%s", path);
    }
    m->feature_name = ftl_strdup(g->tensors[feature].name);
    st = nn_graph_prune(g, feature);
    if (st == FTL_OK) identity_of_what_runs(m, o);
    if (st == FTL_OK) {
        long long params, macs;
        nn_graph_cost(g, &params, &macs);
        m->info.params = params;
        m->info.macs_per_image = macs;
    }
    nn_optimize_stats stats;
    if (st == FTL_OK) st = nn_prepare_for_run(g, feature, &stats);
    if (st != FTL_OK) return ftl_fail_context(st, "%s", path);
    ftl_log_debug("nn: %s: %d nodes after optimisation (BN folded %d, BN as conv %d, activations fused %d, residual adds "
                  "fused %d, pads folded %d, identities dropped %d)", path, g->n_nodes, stats.bn_folded, stats.bn_to_conv,
                  stats.acts_fused, stats.sums_fused, stats.pads_folded, stats.identities);
    int in = g->inputs[0], out = g->outputs[0];
    /* features are per image: the output's first dimension must follow the batch */
    nn_shape one = g->tensors[out].shape;
    FTL_TRY(nn_infer_shapes(g, 2));
    nn_shape two = g->tensors[out].shape;
    FTL_TRY(nn_infer_shapes(g, 1));
    if (g->batch_locked > 0) { /* shapes are always for the locked batch: the output must follow it */
        two = one;
        two.d[0] = 2 * one.d[0];
    }
    if (one.rank < 1 || two.d[0] != 2 * one.d[0] || (g->batch_locked <= 0 && one.d[0] != 1) ||
        (g->batch_locked > 0 && one.d[0] != g->batch_locked)) {
        char a[96], b[96];
        return ftl_fail(FTL_E_UNSUPPORTED, "%s: tensor '%s' has shape %s for 1 image and %s for 2: its first dimension "
                        "is not the batch, so it cannot be a per-image feature tensor", path, g->tensors[out].name,
                        nn_shape_str(&one, false, a, sizeof a), nn_shape_str(&two, false, b, sizeof b));
    }
    m->input_name = ftl_strdup(g->tensors[in].name);
    if (!m->is_top) input_geometry(m, &g->tensors[in].shape);
    m->input_per_image = nn_shape_count(&g->tensors[in].shape) / g->tensors[in].shape.d[0];
    m->info.input_floats = m->input_per_image;
    m->info.feature_dim = nn_shape_count(&g->tensors[out].shape) / g->tensors[out].shape.d[0];
    m->info.batch = o->batch;
    if (g->batch_locked > MAX_BATCH) /* the graph fixes its batch: as many images as --batch may take */
        return ftl_fail(FTL_E_UNSUPPORTED, "the model's batch is fixed at %lld images; ftl runs at most %d at once",
                        (long long)g->batch_locked, MAX_BATCH);
    m->info.fixed_batch = (int)g->batch_locked;
    if (g->batch_locked > 0) /* every plan runs exactly that many images; a partial batch is padded */
        m->copts.batch = (int)g->batch_locked;
    else if (m->be != nn_backend_cpu()) m->copts.batch = o->batch; /* a GPU takes the whole batch at once */
    else if (o->micro_batch > 0) m->copts.batch = o->micro_batch < o->batch ? o->micro_batch : o->batch;
    else choose_micro_batches(g, o->batch, m->copts.precision, &m->copts.batch, &m->node_batch, &m->uniform_batch);
    m->copts.node_batch = m->node_batch;
    return FTL_OK;
}

static ftl_status model_load(const char *path, const ftl_model_options *options, nn_observe_fn observe_fn, void *ctx,
                             ftl_model **model);

ftl_status ftl_model_load(const char *path, const ftl_model_options *options, ftl_model **model) {
    return model_load(path, options, NULL, NULL, model);
}

ftl_status nn_model_load_watching(const char *path, const ftl_model_options *o, nn_observe_fn observe_fn, void *ctx,
                                  ftl_model **model) {
    if (o->precision != FTL_NN_FP32 && o->precision != FTL_NN_BF16)
        return ftl_fail(FTL_E_INTERNAL, "calibration runs the fp32 or the bf16 model");
    return model_load(path, o, observe_fn, ctx, model);
}

static ftl_status model_load(const char *path, const ftl_model_options *options, nn_observe_fn observe_fn, void *ctx,
                             ftl_model **model) {
    *model = NULL;
    ftl_model_options defaults;
    ftl_model_options_init(&defaults);
    const ftl_model_options *o = options ? options : &defaults;
    if (o->batch < 1 || o->batch > MAX_BATCH)
        return ftl_fail(FTL_E_INVALID_ARG, "--batch %d: must be between 1 and %d", o->batch, MAX_BATCH);
    if (o->micro_batch < 0) return ftl_fail(FTL_E_INVALID_ARG, "micro batch %d: must be >= 0 (0 = auto)", o->micro_batch);
    if (o->threads < 0 || o->threads > 1024)
        return ftl_fail(FTL_E_INVALID_ARG, "--threads %d: must be 0..1024 (0 = all cores)", o->threads);
    if (o->precision != FTL_NN_FP32 && o->precision != FTL_NN_BF16 && o->precision != FTL_NN_TF32 &&
        o->precision != FTL_NN_INT8)
        return ftl_fail(FTL_E_INVALID_ARG, "unknown precision %d", (int)o->precision);
    if (o->precision == FTL_NN_INT8 && o->device == FTL_DEVICE_CUDA)
        return ftl_fail(FTL_E_UNSUPPORTED, "--precision int8 with --device cuda: the GPU backend has no int8 path yet; "
                        "use --device cpu (or auto), or fp32/bf16/tf32 on the GPU");
    ftl_device dev;
    FTL_TRY(ftl_device_select(o->device, o->device_index, &dev));
    if (o->precision == FTL_NN_INT8 && dev.kind == FTL_DEVICE_CUDA) {
        ftl_log_warn("%s: --precision int8 runs on the CPU: the GPU backend has no int8 path yet", path);
        FTL_TRY(ftl_device_select(FTL_DEVICE_CPU, -1, &dev));
    }
    if (dev.kind == FTL_DEVICE_CPU && o->precision == FTL_NN_TF32)
        return ftl_fail(FTL_E_INVALID_ARG, "--precision tf32: TensorFloat-32 is a GPU tensor-core mode, and %s runs on the "
                        "CPU: use fp32 or bf16 there%s%s", path, dev.fallback[0] ? "; no GPU: " : "", dev.fallback);
    if (dev.kind == FTL_DEVICE_CPU && o->precision == FTL_NN_BF16 && !ftl_nn_cpu_bf16_available())
        return ftl_fail(FTL_E_UNSUPPORTED, "--precision bf16 for %s: this CPU has no bf16 kernels in %s (its ISA here is %s; "
                        "bf16 needs AVX-512): use --precision fp32, or auto", path, dev.versions, nn_cpu_isa_name());
    if (dev.fallback[0]) ftl_log_debug("nn: no GPU, running on the CPU: %s", dev.fallback);
    if (o->n_overrides < 0 || (o->n_overrides > 0 && !o->overrides))
        return ftl_fail(FTL_E_INVALID_ARG, "%d tensor overrides without their list", o->n_overrides);
    if (o->conv_algorithm != FTL_NN_CONV_AUTO && o->conv_algorithm != FTL_NN_CONV_DIRECT)
        return ftl_fail(FTL_E_INVALID_ARG, "unknown convolution algorithm %d", (int)o->conv_algorithm);
    ftl_model *m = ftl_xcalloc(1, sizeof *m);
    m->path = ftl_strdup(path);
    m->be = dev.kind == FTL_DEVICE_CUDA ? nn_backend_cuda() : nn_backend_cpu();
    m->device_name = ftl_strdup(dev.description);
    m->copts = (nn_compile_opts){.batch = o->batch,
                                 .precision = o->precision == FTL_NN_BF16   ? NN_PREC_BF16
                                              : o->precision == FTL_NN_TF32 ? NN_PREC_TF32
                                              : o->precision == FTL_NN_INT8 ? NN_PREC_INT8
                                                                            : NN_PREC_F32,
                                 .threads = o->threads ? o->threads : ftl_cpu_count(),
                                 .winograd = o->conv_algorithm == FTL_NN_CONV_AUTO,
                                 .device = dev.ordinal,
                                 .deterministic = o->deterministic};
    if (dev.kind == FTL_DEVICE_CPU && o->precision == FTL_NN_BF16 && !nn_cpu_has_bf16())
        ftl_log_warn("this CPU has no native bf16 (oneDNN ISA %s): --precision bf16 will be emulated and slower than fp32",
                     nn_cpu_isa_name());
    else if (dev.kind == FTL_DEVICE_CPU) ftl_nn_precision_warn_if_slow(o->precision, FTL_DEVICE_CPU, m->copts.threads);
    ftl_status st = load(m, path, o);
    if (st == FTL_OK && (st = int8_setup(m, o, observe_fn, ctx)) != FTL_OK) ftl_fail_context(st, "%s", path);
    if (st == FTL_OK && m->node_batch) {
        st = m->be->compile(m->g, &m->copts, &m->plan);
        if (st != FTL_OK) { /* e.g. a layout that does not keep images contiguous: one size for all */
            ftl_log_debug("nn: %s: per-layer micro-batches not possible (%s); using one size", path, ftl_last_error());
            free(m->node_batch);
            m->node_batch = NULL;
            m->copts.node_batch = NULL;
            m->copts.batch = m->uniform_batch;
            st = FTL_OK;
        }
    }
    if (st == FTL_OK && !m->plan) {
        st = m->be->compile(m->g, &m->copts, &m->plan);
        if (st != FTL_OK) ftl_fail_context(st, "%s", path);
    }
    /* Measured on an AVX2 EPYC: oneDNN 2.6's int8 kernels there add u8 x s8 pairs in saturating 16-bit
     * lanes (and halve the weights to 7 bits), off from the integer result by up to 30% of the output's
     * range; a wrong int8 is worse than none. */
    if (st == FTL_OK && m->int8_scale && !observe_fn && dev.kind == FTL_DEVICE_CPU && !ftl_nn_cpu_int8_fast())
        st = ftl_fail(FTL_E_UNSUPPORTED, "%s: %s: this CPU has no int8 dot-product instructions (VNNI or AMX), and "
                      "oneDNN's int8 kernels for its ISA (%s) saturate 16-bit sums, which changes the results: ftl "
                      "runs int8 only where they are exact; use --precision fp32 here", path,
                      m->g->quantized ? "a quantized (QDQ) model" : "--precision int8", nn_cpu_isa_name());
    if (st != FTL_OK) {
        ftl_model_free(m);
        if (st == FTL_E_UNSUPPORTED && dev.kind == FTL_DEVICE_CUDA && o->device == FTL_DEVICE_AUTO) {
            /* auto: a graph the GPU backend cannot run yet runs on the CPU, saying why */
            ftl_log_warn("%s: running on the CPU: the GPU backend cannot run it (%s)", path, ftl_last_error());
            ftl_model_options cpu = *o;
            cpu.device = FTL_DEVICE_CPU;
            return model_load(path, &cpu, observe_fn, ctx, model);
        }
        return st;
    }
    const dnnl_version_t *v = dnnl_version();
    if (dev.kind == FTL_DEVICE_CUDA) m->backend_name = ftl_format("%s", dev.description);
    else m->backend_name = ftl_format("cpu (oneDNN %d.%d.%d, %s)", v->major, v->minor, v->patch, nn_cpu_isa_name());
    ftl_model_info *i = &m->info;
    i->path = m->path;
    i->sha256 = m->sha;
    i->identity = m->identity;
    i->input_name = m->input_name;
    i->feature_name = m->feature_name;
    i->precision = o->precision;
    i->conv_algorithm = o->conv_algorithm;
    i->winograd_convs = m->be->winograd_convs ? m->be->winograd_convs(m->plan) : 0;
    for (int k = 0; (o->precision == FTL_NN_INT8 || m->g->quantized) && m->be->step_info && k < m->be->step_count(m->plan); k++) {
        nn_step_info si;
        m->be->step_info(m->plan, k, &si);
        i->int8_convs += si.compute && si.int8 ? (si.also_node >= 0 ? 2 : 1) : 0;
    }
    i->threads = m->copts.threads;
    i->micro_batch = i->micro_batch_min = m->copts.batch;
    for (int k = 0; m->node_batch && k < m->g->n_nodes; k++)
        if (m->node_batch[k] < i->micro_batch_min) i->micro_batch_min = m->node_batch[k];
    i->backend = m->backend_name;
    i->device_kind = dev.kind;
    i->device = m->device_name;
    *model = m;
    return FTL_OK;
}

const ftl_model_info *ftl_model_get_info(const ftl_model *model) { return &model->info; }

/* The plan for a chunk of `rows` (the full batch, or a partial last batch). */
static ftl_status plan_for(ftl_model *m, int rows, nn_plan **plan) {
    if (rows == m->copts.batch) {
        *plan = m->plan;
        return FTL_OK;
    }
    if (!m->tail || m->tail_batch != rows) {
        if (m->tail) m->be->free(m->tail);
        m->tail = NULL;
        nn_compile_opts o = m->copts;
        o.batch = rows;
        free(m->tail_node_batch);
        m->tail_node_batch = m->node_batch ? node_batches_for(m->node_batch, m->g->n_nodes, rows) : NULL;
        o.node_batch = m->tail_node_batch;
        ftl_status st = m->be->compile(m->g, &o, &m->tail);
        if (st != FTL_OK) return ftl_fail_context(st, "%s: batch of %d", m->path, rows);
        m->tail_batch = rows;
    }
    *plan = m->tail;
    return FTL_OK;
}

/* Runs the plan for `rows` images already in its input into features; a graph locked to its batch
 * runs a padded batch (zeros after the last image) and keeps the first `rows` rows. */
static ftl_status run_rows(ftl_model *m, nn_plan *plan, int rows, float *features) {
    if (m->g->batch_locked <= 0 || rows == m->copts.batch) return m->be->run(plan, features);
    size_t per = (size_t)m->info.feature_dim, full = (size_t)m->copts.batch;
    memset(m->be->input(plan) + (size_t)rows * m->input_per_image, 0,
           (full - (size_t)rows) * m->input_per_image * sizeof(float));
    float *all = malloc(full * per * sizeof *all);
    if (!all) return ftl_fail(FTL_E_NOMEM, "out of memory for a padded batch");
    ftl_status st = m->be->run(plan, all);
    if (st == FTL_OK) memcpy(features, all, (size_t)rows * per * sizeof *all);
    free(all);
    return st;
}

ftl_status ftl_model_start_features(ftl_model *m, const ftl_nn_preprocess *pp, const uint8_t *images_hwc, int count,
                                    int image_size, bool *started) {
    *started = false;
    const ftl_model_info *i = &m->info;
    if (!m->be->submit_u8 || count != m->copts.batch || image_size != i->height || image_size != i->width ||
        i->channels != 3 || m->in_flight >= 2)
        return FTL_OK;
    uint8_t *bytes = m->be->input_u8(m->plan);
    if (!bytes) return FTL_OK;
    float table[3][256];
    nn_preprocess_table(pp, table);
    memcpy(bytes, images_hwc, (size_t)count * (size_t)image_size * (size_t)image_size * 3);
    FTL_TRY(m->be->submit_u8(m->plan, (const float(*)[256])table));
    m->in_flight++;
    *started = true;
    return FTL_OK;
}

ftl_status ftl_model_collect_features(ftl_model *m, float *features) {
    if (m->in_flight == 0) return ftl_fail(FTL_E_INVALID_ARG, "%s: no started batch to collect", m->path);
    m->in_flight--;
    return m->be->collect_u8(m->plan, features);
}

ftl_status ftl_model_run(ftl_model *m, const float *input, int count, float *features) {
    if (count < 0) return ftl_fail(FTL_E_INVALID_ARG, "negative image count %d", count);
    if (m->in_flight) return ftl_fail(FTL_E_INVALID_ARG, "%s: %d started batches not collected", m->path, m->in_flight);
    for (int done = 0; done < count;) {
        int rows = count - done < m->copts.batch ? count - done : m->copts.batch;
        nn_plan *plan;
        FTL_TRY(plan_for(m, m->g->batch_locked > 0 ? m->copts.batch : rows, &plan));
        memcpy(m->be->input(plan), input + (size_t)done * m->input_per_image,
               (size_t)rows * (size_t)m->input_per_image * sizeof(float));
        FTL_TRY(run_rows(m, plan, rows, features + (size_t)done * (size_t)m->info.feature_dim));
        done += rows;
    }
    return FTL_OK;
}

ftl_status ftl_model_extract_features(ftl_model *m, const ftl_nn_preprocess *pp, const uint8_t *images_hwc, int count,
                                      int image_size, float *features) {
    const ftl_model_info *i = &m->info;
    if (i->channels != 3 || i->height < 1)
        return ftl_fail(FTL_E_UNSUPPORTED, "%s: the input '%s' is not an RGB image tensor ([N,3,H,W] or [N,H,W,3])",
                        m->path, m->input_name);
    if (image_size < 1 || image_size > 65536) return ftl_fail(FTL_E_INVALID_ARG, "bad image size %d", image_size);
    if (count < 0) return ftl_fail(FTL_E_INVALID_ARG, "negative image count %d", count);
    if (m->in_flight) return ftl_fail(FTL_E_INVALID_ARG, "%s: %d started batches not collected", m->path, m->in_flight);
    bool resize = image_size != i->height || image_size != i->width;
    float table[3][256];
    nn_preprocess_table(pp, table);
    size_t image_bytes = (size_t)image_size * (size_t)image_size * 3;
    for (int done = 0; done < count;) {
        int rows = count - done < m->copts.batch ? count - done : m->copts.batch;
        nn_plan *plan;
        FTL_TRY(plan_for(m, m->g->batch_locked > 0 ? m->copts.batch : rows, &plan));
        uint8_t *bytes = !resize && m->be->input_u8 && (m->g->batch_locked <= 0 || rows == m->copts.batch)
                             ? m->be->input_u8(plan) : NULL;
        if (bytes) { /* the device scales and lays out the bytes itself */
            memcpy(bytes, images_hwc + (size_t)done * image_bytes, (size_t)rows * image_bytes);
            FTL_TRY(m->be->run_u8(plan, (const float(*)[256])table, features + (size_t)done * (size_t)i->feature_dim));
            done += rows;
            continue;
        }
        if (!m->workers) m->workers = ftl_xcalloc((size_t)m->copts.threads, sizeof *m->workers);
        ftl_status st = nn_preprocess_batch((const float(*)[256])table, images_hwc + (size_t)done * image_bytes, rows,
                                            image_size, i->height, i->width, i->channels_last, m->copts.threads,
                                            m->workers, m->be->input(plan));
        if (st != FTL_OK)
            return ftl_fail(st, "%s: preprocessing images %d..%d (%dx%d -> %dx%d) failed", m->path, done, done + rows - 1,
                            image_size, image_size, i->width, i->height);
        FTL_TRY(run_rows(m, plan, rows, features + (size_t)done * (size_t)i->feature_dim));
        done += rows;
    }
    return FTL_OK;
}

void ftl_model_print_plan(const ftl_model *m, FILE *out) { m->be->describe(m->plan, out); }

void nn_model_get_parts(ftl_model *m, nn_model_parts *parts) {
    *parts = (nn_model_parts){.graph = m->g, .backend = m->be, .plan = m->plan, .plan_batch = m->copts.batch,
                              .input_per_image = m->input_per_image};
}
