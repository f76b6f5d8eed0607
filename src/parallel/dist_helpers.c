/* The ftl_dist_* helpers: single-process fallbacks, blobs of any size, and the start-time
 * checks that all ranks run the same command on the same data. */
#include "ftl/dist.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ftl_status ftl_dist_allreduce_f32(const ftl_collectives *c, float *data, size_t count) {
    return ftl_dist_active(c) && c->allreduce_f32 ? c->allreduce_f32(c->ctx, data, count) : FTL_OK;
}
ftl_status ftl_dist_allreduce_f64(const ftl_collectives *c, double *data, size_t count) {
    return ftl_dist_active(c) && c->allreduce_f64 ? c->allreduce_f64(c->ctx, data, count) : FTL_OK;
}
ftl_status ftl_dist_allreduce_i64(const ftl_collectives *c, int64_t *data, size_t count) {
    return ftl_dist_active(c) && c->allreduce_i64 ? c->allreduce_i64(c->ctx, data, count) : FTL_OK;
}
ftl_status ftl_dist_broadcast(const ftl_collectives *c, void *data, size_t bytes, int root) {
    return ftl_dist_active(c) && c->broadcast ? c->broadcast(c->ctx, data, bytes, root) : FTL_OK;
}
ftl_status ftl_dist_barrier(const ftl_collectives *c) {
    return ftl_dist_active(c) && c->barrier ? c->barrier(c->ctx) : FTL_OK;
}
void ftl_dist_set_context(const ftl_collectives *c, int64_t step, const char *what) {
    if (ftl_dist_active(c) && c->set_context) c->set_context(c->ctx, step, what);
}
void ftl_dist_phase_begin(const ftl_collectives *c, const char *what) {
    if (ftl_dist_active(c) && c->phase_begin) c->phase_begin(c->ctx, what);
}
void ftl_dist_phase_end(const ftl_collectives *c) {
    if (ftl_dist_active(c) && c->phase_end) c->phase_end(c->ctx);
}

ftl_status ftl_dist_broadcast_blob(const ftl_collectives *c, uint8_t **data, size_t *bytes, int root) {
    if (!ftl_dist_active(c)) return FTL_OK;
    int64_t n = ftl_dist_rank(c) == root ? (int64_t)*bytes : 0;
    FTL_TRY(ftl_dist_broadcast(c, &n, sizeof n, root));
    if (ftl_dist_rank(c) != root) {
        *data = ftl_xmalloc(n > 0 ? (size_t)n : 1);
        *bytes = (size_t)n;
    }
    return n > 0 ? ftl_dist_broadcast(c, *data, (size_t)n, root) : FTL_OK;
}

ftl_status ftl_dist_gather(const ftl_collectives *c, const void *data, size_t bytes, int root, uint8_t **out,
                           size_t *sizes) {
    if (ftl_dist_active(c) && c->gather) return c->gather(c->ctx, data, bytes, root, out, sizes);
    if (out) {
        *out = ftl_xmalloc(bytes ? bytes : 1);
        if (bytes) memcpy(*out, data, bytes);
    }
    if (sizes) sizes[0] = bytes;
    return FTL_OK;
}

ftl_status ftl_dist_allgather(const ftl_collectives *c, const void *data, size_t bytes, uint8_t **out, size_t *sizes) {
    if (ftl_dist_active(c) && c->allgather) return c->allgather(c->ctx, data, bytes, out, sizes);
    return ftl_dist_gather(c, data, bytes, 0, out, sizes);
}

ftl_status ftl_dist_any_failed(const ftl_collectives *c, bool failed_here, bool *any) {
    int64_t v = failed_here ? 1 : 0;
    FTL_TRY(ftl_dist_allreduce_i64(c, &v, 1));
    *any = v > 0;
    return FTL_OK;
}

ftl_status ftl_dist_check_same(const ftl_collectives *c, const char *what, const char *value) {
    if (!ftl_dist_active(c)) return FTL_OK;
    size_t n = strlen(value) + 1;
    uint8_t *theirs = (uint8_t *)(ftl_dist_rank(c) == 0 ? ftl_strdup(value) : NULL);
    ftl_status st = ftl_dist_broadcast_blob(c, &theirs, &n, 0);
    bool differs = st == FTL_OK && strcmp((const char *)theirs, value) != 0;
    ftl_status result = st;
    if (differs)
        result = ftl_fail(FTL_E_INVALID_ARG, "rank %d has %s \"%.200s\" but rank 0 has \"%.200s\": every rank must see the same",
                          ftl_dist_rank(c), what, value, (const char *)theirs);
    free(theirs);
    return result;
}

/* The option an argv position belongs to: itself when it is one, else the option before it. */
static const char *option_at(int argc, char **argv, int i, char *buf, size_t cap) {
    if (i < argc && argv[i][0] == '-') {
        const char *eq = strchr(argv[i], '=');
        snprintf(buf, cap, "%.*s", eq ? (int)(eq - argv[i]) : (int)strlen(argv[i]), argv[i]);
        return buf;
    }
    if (i > 0 && i - 1 < argc && argv[i - 1][0] == '-' && !strchr(argv[i - 1], '=')) {
        snprintf(buf, cap, "%s", argv[i - 1]);
        return buf;
    }
    snprintf(buf, cap, "argument %d", i);
    return buf;
}

ftl_status ftl_dist_check_arguments(const ftl_collectives *c, int argc, char **argv) {
    if (!ftl_dist_active(c)) return FTL_OK;
    /* argv joined with NUL separators, rank 0's broadcast to all. */
    size_t len = 0;
    for (int i = 0; i < argc; i++) len += strlen(argv[i]) + 1;
    uint8_t *mine = ftl_xmalloc(len + 1), *theirs = NULL;
    size_t at = 0;
    for (int i = 0; i < argc; i++) {
        size_t n = strlen(argv[i]) + 1;
        memcpy(mine + at, argv[i], n);
        at += n;
    }
    size_t tlen = len;
    if (ftl_dist_rank(c) == 0) {
        theirs = ftl_xmalloc(len + 1);
        memcpy(theirs, mine, len);
    }
    ftl_status st = ftl_dist_broadcast_blob(c, &theirs, &tlen, 0);
    if (st == FTL_OK && (tlen != len || memcmp(mine, theirs, len) != 0)) {
        int targc = 0;
        char **targv = ftl_xcalloc(tlen + 1, sizeof *targv);
        for (size_t p = 0; p < tlen; p += strlen((char *)theirs + p) + 1) targv[targc++] = (char *)theirs + p;
        int i = 0;
        while (i < argc && i < targc && strcmp(argv[i], targv[i]) == 0) i++;
        char name[128];
        const char *opt = option_at(i < argc ? argc : targc, i < argc ? argv : targv, i, name, sizeof name);
        st = ftl_fail(FTL_E_INVALID_ARG,
                      "rank %d was started with other arguments than rank 0: %s is \"%s\" here but \"%s\" on rank 0; "
                      "every rank must run the same command",
                      ftl_dist_rank(c), opt, i < argc ? argv[i] : "(absent)", i < targc ? targv[i] : "(absent)");
        free(targv);
    }
    free(mine);
    free(theirs);
    return st;
}
