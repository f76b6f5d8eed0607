/* MODEL.ftl: the trained head and what is needed to use it (class names, backbone, preprocessing). */
#include "ftl/train.h"
#include "train/train_internal.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

const char *ftl_train_kv_find(const ftl_kv *kv, size_t count, const char *key) {
    for (size_t i = 0; i < count; i++)
        if (kv[i].key && strcmp(kv[i].key, key) == 0) return kv[i].value;
    return NULL;
}

void ftl_train_free_class_names(char **names, size_t count) {
    if (!names) return;
    for (size_t i = 0; i < count; i++) free(names[i]);
    free(names);
}

ftl_status ftl_train_parse_class_names(const char *json, const char *what, char ***names, size_t *count) {
    *names = NULL;
    *count = 0;
    ftl_json *v = NULL;
    ftl_status s = ftl_json_parse(json, strlen(json), &v);
    if (s != FTL_OK) return ftl_fail_context(s, "%s: class names", what);
    if (v->type != FTL_JSON_ARRAY || v->count == 0) {
        ftl_json_free(v);
        return ftl_fail(FTL_E_FORMAT, "%s: class names are not a non-empty JSON array", what);
    }
    char **out = ftl_xcalloc(v->count, sizeof *out);
    for (size_t i = 0; i < v->count; i++) {
        if (v->items[i].type != FTL_JSON_STRING) {
            ftl_train_free_class_names(out, i);
            ftl_json_free(v);
            return ftl_fail(FTL_E_FORMAT, "%s: class name %zu is not a string", what, i);
        }
        out[i] = ftl_strdup(v->items[i].string);
    }
    *names = out;
    *count = v->count;
    ftl_json_free(v);
    return FTL_OK;
}

ftl_status ftl_classifier_save(const char *path, const ftl_head *head, const ftl_kv *meta, size_t meta_count) {
    return ftl_classifier_save_tuned(path, head, meta, meta_count, NULL, 0);
}

ftl_status ftl_classifier_save_tuned(const char *path, const ftl_head *head, const ftl_kv *meta, size_t meta_count,
                                     const ftl_tensor_override *tuned, int n_tuned) {
    return ftl_classifier_write(path, true, head, meta, meta_count, tuned, n_tuned);
}

ftl_status ftl_classifier_write(const char *path, bool replace, const ftl_head *head, const ftl_kv *meta, size_t meta_count,
                                const ftl_tensor_override *tuned, int n_tuned) {
    const char *classes = ftl_train_kv_find(meta, meta_count, FTL_MODEL_META_CLASSES);
    if (!classes) return ftl_fail(FTL_E_INVALID_ARG, "%s: the model needs its class names (%s)", path, FTL_MODEL_META_CLASSES);
    char **names;
    size_t count;
    FTL_TRY(ftl_train_parse_class_names(classes, path, &names, &count));
    ftl_train_free_class_names(names, count);
    if ((int64_t)count != head->classes)
        return ftl_fail(FTL_E_INVALID_ARG, "%s: %zu class names for a head with %lld classes", path, count,
                        (long long)head->classes);
    ftl_safetensors_writer *w = ftl_safetensors_writer_new();
    ftl_safetensors_writer_set_no_replace(w, !replace);
    for (size_t i = 0; i < meta_count; i++) ftl_safetensors_writer_set_metadata(w, meta[i].key, meta[i].value);
    char dim[32];
    snprintf(dim, sizeof dim, "%lld", (long long)head->dim);
    ftl_safetensors_writer_set_metadata(w, FTL_MODEL_META_FORMAT, n_tuned > 0 ? FTL_MODEL_FORMAT_TUNED : FTL_MODEL_FORMAT);
    ftl_safetensors_writer_set_metadata(w, FTL_MODEL_META_VERSION, FTL_VERSION);
    ftl_safetensors_writer_set_metadata(w, FTL_MODEL_META_FEATURE_DIM, dim);
    int64_t kshape[2] = {head->dim, head->classes}, bshape[1] = {head->classes};
    ftl_safetensors_writer_add(w, "head.kernel", FTL_DTYPE_F32, 2, kshape, head->kernel);
    ftl_safetensors_writer_add(w, "head.bias", FTL_DTYPE_F32, 1, bshape, head->bias);
    char **tuned_names = ftl_xcalloc((size_t)n_tuned + 1, sizeof *tuned_names);
    for (int k = 0; k < n_tuned; k++) {
        int64_t shape[1] = {tuned[k].count};
        tuned_names[k] = ftl_format("%s%s", FTL_MODEL_TUNED_PREFIX, tuned[k].name);
        ftl_safetensors_writer_add(w, tuned_names[k], FTL_DTYPE_F32, 1, shape, tuned[k].data);
    }
    if (n_tuned > 0) {
        char n[16];
        snprintf(n, sizeof n, "%d", n_tuned);
        ftl_safetensors_writer_set_metadata(w, FTL_MODEL_META_TUNED_COUNT, n);
    }
    ftl_status s = ftl_safetensors_writer_write(w, path);
    for (int k = 0; k < n_tuned; k++) free(tuned_names[k]);
    free(tuned_names);
    ftl_safetensors_writer_free(w);
    return s;
}

static void free_tuned(ftl_classifier *model) {
    for (int k = 0; k < model->n_tuned; k++) {
        free((char *)model->tuned[k].name);
        free((float *)model->tuned[k].data);
    }
    free(model->tuned);
    model->tuned = NULL;
    model->n_tuned = 0;
}

/* The fine-tuned backbone tensors: every tensor named FTL_MODEL_TUNED_PREFIX + name, as many as the
 * metadata says (a file that lost some, or gained some, is refused). */
static ftl_status read_tuned(const ftl_safetensors *st, const char *path, ftl_classifier *model) {
    const char *format = ftl_safetensors_metadata(st, FTL_MODEL_META_FORMAT);
    const char *count = ftl_safetensors_metadata(st, FTL_MODEL_META_TUNED_COUNT);
    bool tuned_format = format && strcmp(format, FTL_MODEL_FORMAT_TUNED) == 0;
    size_t prefix = strlen(FTL_MODEL_TUNED_PREFIX), n = ftl_safetensors_tensor_count(st);
    int found = 0;
    for (size_t i = 0; i < n; i++) found += strncmp(ftl_safetensors_tensor_at(st, i)->name, FTL_MODEL_TUNED_PREFIX, prefix) == 0;
    char *end = NULL;
    long want = count ? strtol(count, &end, 10) : 0;
    if ((count && (*end || want < 1)) || want != found || (found > 0) != tuned_format)
        return ftl_fail(FTL_E_FORMAT, "%s: %d fine-tuned backbone tensors, but the file says %s (format %s)", path, found,
                        count ? count : "none", format ? format : "?");
    model->tuned = ftl_xcalloc((size_t)found + 1, sizeof *model->tuned);
    for (size_t i = 0; i < n; i++) {
        const ftl_safetensors_tensor *t = ftl_safetensors_tensor_at(st, i);
        if (strncmp(t->name, FTL_MODEL_TUNED_PREFIX, prefix) != 0) continue;
        if (t->ndim != 1 || t->shape[0] < 1)
            return ftl_fail(FTL_E_FORMAT, "%s: tensor \"%s\" should be one-dimensional", path, t->name);
        float *data = ftl_xmalloc((size_t)t->shape[0] * sizeof *data);
        int64_t shape[1] = {t->shape[0]};
        ftl_status s = ftl_safetensors_read(st, t->name, FTL_DTYPE_F32, 1, shape, data, (size_t)t->shape[0] * sizeof *data);
        if (s != FTL_OK) {
            free(data);
            return s;
        }
        model->tuned[model->n_tuned++] = (ftl_tensor_override){ftl_strdup(t->name + prefix), data, t->shape[0]};
    }
    return FTL_OK;
}

ftl_status ftl_classifier_load(const char *path, ftl_classifier *model) {
    memset(model, 0, sizeof *model);
    ftl_safetensors *st;
    FTL_TRY(ftl_safetensors_open(path, &st));
    model->file = st;
    ftl_status s = FTL_OK;
    const char *format = ftl_safetensors_metadata(st, FTL_MODEL_META_FORMAT);
    const char *classes = ftl_safetensors_metadata(st, FTL_MODEL_META_CLASSES);
    const ftl_safetensors_tensor *k = ftl_safetensors_find(st, "head.kernel");
    size_t class_count = 0;
    if (!format)
        s = ftl_fail(FTL_E_FORMAT, "%s: not an ftl model (a safetensors file without %s metadata)", path,
                     FTL_MODEL_META_FORMAT);
    else if (strcmp(format, FTL_MODEL_FORMAT) != 0 && strcmp(format, FTL_MODEL_FORMAT_TUNED) != 0 &&
             strcmp(format, FTL_CHECKPOINT_FORMAT) != 0)
        s = ftl_fail(FTL_E_UNSUPPORTED, "%s: format \"%s\" is not %s (written by a newer ftl?)", path, format,
                     FTL_MODEL_FORMAT);
    else if (!classes)
        s = ftl_fail(FTL_E_FORMAT, "%s: no class names (%s metadata)", path, FTL_MODEL_META_CLASSES);
    else if (!k)
        s = ftl_fail(FTL_E_FORMAT, "%s: tensor \"head.kernel\" is missing", path);
    if (s == FTL_OK) s = ftl_train_parse_class_names(classes, path, &model->class_names, &class_count);
    if (s == FTL_OK && (k->ndim != 2 || k->shape[0] < 1 || k->shape[1] != (int64_t)class_count))
        s = ftl_fail(FTL_E_FORMAT, "%s: tensor \"head.kernel\" should be [D, %zu] for %zu classes", path, class_count,
                     class_count);
    if (s == FTL_OK) s = ftl_head_init(&model->head, k->shape[0], (int64_t)class_count);
    if (s == FTL_OK) {
        int64_t kshape[2] = {k->shape[0], (int64_t)class_count}, bshape[1] = {(int64_t)class_count};
        s = ftl_safetensors_read(st, "head.kernel", FTL_DTYPE_F32, 2, kshape, model->head.kernel,
                                 (size_t)k->shape[0] * class_count * sizeof(float));
        if (s == FTL_OK)
            s = ftl_safetensors_read(st, "head.bias", FTL_DTYPE_F32, 1, bshape, model->head.bias, class_count * sizeof(float));
    }
    if (s == FTL_OK) s = read_tuned(st, path, model);
    const char *dim = ftl_safetensors_metadata(st, FTL_MODEL_META_FEATURE_DIM);
    if (s == FTL_OK && dim && strtoll(dim, NULL, 10) != model->head.dim)
        s = ftl_fail(FTL_E_FORMAT, "%s: %s says %s features but head.kernel has %lld rows", path,
                     FTL_MODEL_META_FEATURE_DIM, dim, (long long)model->head.dim);
    if (s != FTL_OK) {
        if (!model->class_names) class_count = 0;
        ftl_train_free_class_names(model->class_names, class_count);
        model->class_names = NULL;
        ftl_head_free(&model->head);
        free_tuned(model);
        ftl_safetensors_close(st);
        memset(model, 0, sizeof *model);
    }
    return s;
}

void ftl_classifier_free(ftl_classifier *model) {
    if (!model) return;
    ftl_train_free_class_names(model->class_names, model->class_names ? (size_t)model->head.classes : 0);
    ftl_head_free(&model->head);
    free_tuned(model);
    ftl_safetensors_close(model->file);
    memset(model, 0, sizeof *model);
}

const char *ftl_classifier_metadata(const ftl_classifier *model, const char *key) {
    return model->file ? ftl_safetensors_metadata(model->file, key) : NULL;
}
