/* `ftl inspect MODEL.ftl | CHECKPOINT`: what a trained model or a checkpoint holds, as text or JSON;
 * `--verify`: whether its tensors still have the bytes they were written with. */
#include "ftl/train.h"
#include "util/alloc.h"
#include "util/crc32c.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"

#include <stdlib.h>
#include <string.h>

bool ftl_is_safetensors_file(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return false;
    uint8_t head[9];
    size_t n = fread(head, 1, sizeof head, fp);
    fclose(fp);
    if (n != sizeof head) return false;
    uint64_t len = 0;
    for (int i = 7; i >= 0; i--) len = len << 8 | head[i];
    return len >= 2 && len < ((uint64_t)1 << 32) && head[8] == '{';
}

static const char *meta(const ftl_safetensors *st, const char *key) {
    const char *v = ftl_safetensors_metadata(st, key);
    return v ? v : "";
}

/* A metadata value that holds JSON goes in as JSON; anything else as a string. */
static void append_json_value(ftl_strbuf *b, const char *text) {
    ftl_json *v = NULL;
    if (text && *text && ftl_json_parse(text, strlen(text), &v) == FTL_OK) ftl_strbuf_append(b, text, strlen(text));
    else if (text && *text) ftl_json_append_string(b, text);
    else ftl_strbuf_append(b, "null", 4);
    ftl_json_free(v);
}

static void state_numbers(const ftl_safetensors *st, double *epoch, double *step, double *global_batch, double *best) {
    *epoch = *step = *global_batch = *best = -1;
    const char *text = ftl_safetensors_metadata(st, "ftl.train_state");
    ftl_json *v = NULL;
    if (!text || ftl_json_parse(text, strlen(text), &v) != FTL_OK) return;
    ftl_json_get_number(v, "epoch", epoch);
    ftl_json_get_number(v, "step", step);
    if (!ftl_json_get_number(v, "global_batch", global_batch)) ftl_json_get_number(v, "batch_size", global_batch);
    const ftl_json *es = ftl_json_get(v, "early_stopping");
    if (es) ftl_json_get_number(es, "best_epoch", best);
    ftl_json_free(v);
}

ftl_status ftl_trained_file_describe(const char *path, FILE *out, bool json) {
    ftl_safetensors *st;
    FTL_TRY(ftl_safetensors_open(path, &st));
    const char *format = meta(st, FTL_MODEL_META_FORMAT);
    bool is_model = strcmp(format, FTL_MODEL_FORMAT) == 0 || strcmp(format, FTL_MODEL_FORMAT_TUNED) == 0;
    bool is_ckpt = strstr(format, "ftl-checkpoint-") == format;
    if (!is_model && !is_ckpt) {
        ftl_safetensors_close(st);
        return ftl_fail(FTL_E_FORMAT, "%s: a safetensors file, but not an ftl model or checkpoint (ftl.format is \"%s\")", path,
                        format);
    }
    /* What is described must be what eval and resume would load: a damaged tensor is refused here too. */
    ftl_status verified = ftl_safetensors_verify_all(st);
    if (verified != FTL_OK) {
        ftl_safetensors_close(st);
        return verified;
    }
    const ftl_safetensors_tensor *k = ftl_safetensors_find(st, "head.kernel");
    long long dim = k && k->ndim == 2 ? (long long)k->shape[0] : -1, classes = k && k->ndim == 2 ? (long long)k->shape[1] : -1;
    double epoch, step, global_batch, best;
    state_numbers(st, &epoch, &step, &global_batch, &best);
    long long tuned = 0, tuned_values = 0; /* fine-tuned backbone tensors */
    for (size_t i = 0; i < ftl_safetensors_tensor_count(st); i++) {
        const ftl_safetensors_tensor *t = ftl_safetensors_tensor_at(st, i);
        if (strncmp(t->name, FTL_MODEL_TUNED_PREFIX, strlen(FTL_MODEL_TUNED_PREFIX)) == 0)
            tuned++, tuned_values += (long long)t->element_count;
    }
    const ftl_safetensors_tensor *top = ftl_safetensors_find(st, "top.params"); /* a fine-tuning checkpoint */
    const char *cut = meta(st, FTL_MODEL_META_FINE_TUNE_CUT);
    ftl_strbuf b = {0};
    if (json) {
        ftl_strbuf_printf(&b, "{\"path\": ");
        ftl_json_append_string(&b, path);
        ftl_strbuf_printf(&b, ", \"kind\": \"%s\", \"format\": ", is_model ? "model" : "checkpoint");
        ftl_json_append_string(&b, format);
        ftl_strbuf_printf(&b, ", \"ftl_version\": ");
        ftl_json_append_string(&b, meta(st, FTL_MODEL_META_VERSION));
        ftl_strbuf_printf(&b, ", \"classes\": ");
        append_json_value(&b, meta(st, FTL_MODEL_META_CLASSES));
        ftl_strbuf_printf(&b, ", \"feature_dim\": %lld, \"class_count\": %lld, \"backbone\": {\"path\": ", dim, classes);
        ftl_json_append_string(&b, meta(st, FTL_MODEL_META_BACKBONE_PATH));
        ftl_strbuf_printf(&b, ", \"sha256\": ");
        ftl_json_append_string(&b, meta(st, FTL_MODEL_META_BACKBONE_SHA256));
        ftl_strbuf_printf(&b, ", \"feature_tensor\": ");
        ftl_json_append_string(&b, meta(st, FTL_MODEL_META_FEATURE_TENSOR));
        ftl_strbuf_printf(&b, ", \"fine_tuned_tensors\": %lld, \"fine_tuned_values\": %lld, \"fine_tune_cut\": ", tuned,
                          tuned_values);
        if (*cut) ftl_json_append_string(&b, cut);
        else ftl_strbuf_append(&b, "null", 4);
        if (top) ftl_strbuf_printf(&b, ", \"fine_tuning_values\": %lld", (long long)top->element_count);
        ftl_strbuf_printf(&b, "}, \"input_size\": ");
        append_json_value(&b, meta(st, FTL_MODEL_META_INPUT_SIZE));
        ftl_strbuf_printf(&b, ", \"preprocessing\": ");
        append_json_value(&b, meta(st, FTL_MODEL_META_INPUT_SCALING));
        ftl_strbuf_printf(&b, ", \"precision\": ");
        ftl_json_append_string(&b, meta(st, "ftl.precision"));
        ftl_strbuf_printf(&b, ", \"conv_algorithm\": ");
        ftl_json_append_string(&b, meta(st, "ftl.conv_algorithm"));
        ftl_strbuf_printf(&b, ", \"device\": ");
        ftl_json_append_string(&b, meta(st, "ftl.device"));
        if (is_model) {
            ftl_strbuf_printf(&b, ", \"training_args\": ");
            append_json_value(&b, meta(st, FTL_MODEL_META_TRAINING_ARGS));
            ftl_strbuf_printf(&b, ", \"metrics\": ");
            append_json_value(&b, meta(st, FTL_MODEL_META_METRICS));
        } else {
            ftl_strbuf_printf(&b, ", \"resumes_after_epoch\": %.0f, \"step\": %.0f, \"global_batch\": %.0f, \"best_epoch\": %.0f, "
                                  "\"world_size\": ", epoch, step, global_batch, best);
            append_json_value(&b, meta(st, "ftl.world_size"));
            ftl_strbuf_printf(&b, ", \"position_kind\": ");
            ftl_json_append_string(&b, meta(st, "ftl.position_kind"));
            ftl_strbuf_printf(&b, ", \"optimizer\": ");
            append_json_value(&b, meta(st, "ftl.optimizer"));
        }
        ftl_strbuf_printf(&b, "}\n");
    } else {
        ftl_strbuf_printf(&b, "%s: ftl %s (%s), written by ftl %s\n", path, is_model ? "model" : "checkpoint", format,
                          meta(st, FTL_MODEL_META_VERSION));
        ftl_strbuf_printf(&b, "  head: dense %lld features -> %lld classes %s\n", dim, classes, meta(st, FTL_MODEL_META_CLASSES));
        ftl_strbuf_printf(&b, "  backbone: %s\n    sha256 %s, features from '%s'\n", meta(st, FTL_MODEL_META_BACKBONE_PATH),
                          meta(st, FTL_MODEL_META_BACKBONE_SHA256), meta(st, FTL_MODEL_META_FEATURE_TENSOR));
        if (tuned)
            ftl_strbuf_printf(&b, "    fine-tuned: %lld tensors (%lld values) replace the backbone's initializers (cut: %s)\n",
                              tuned, tuned_values, *cut ? cut : "?");
        if (top)
            ftl_strbuf_printf(&b, "    fine-tuning (phase 2): the cut '%s' trains %lld backbone values with the head\n", cut,
                              (long long)top->element_count);
        const char *size = meta(st, FTL_MODEL_META_INPUT_SIZE);
        ftl_strbuf_printf(&b, "  preprocessing: %s%s%s, precision %s, convolutions %s\n", *size ? size : "", *size ? " px, " : "",
                          meta(st, FTL_MODEL_META_INPUT_SCALING), meta(st, "ftl.precision"), meta(st, "ftl.conv_algorithm"));
        if (*meta(st, "ftl.device")) ftl_strbuf_printf(&b, "  features computed on: %s\n", meta(st, "ftl.device"));
        if (is_model) {
            ftl_strbuf_printf(&b, "  training: %s\n  final metrics: %s\n", meta(st, FTL_MODEL_META_TRAINING_ARGS),
                              meta(st, FTL_MODEL_META_METRICS));
        } else {
            const char *kind = meta(st, "ftl.position_kind");
            ftl_strbuf_printf(&b, "  resumes after epoch %.0f (step %.0f), global batch %.0f on %s rank(s); best epoch so far %.0f\n",
                              epoch, step, global_batch, meta(st, "ftl.world_size"), best);
            ftl_strbuf_printf(&b, "  data position: %s\n  optimizer: %s\n",
                              strcmp(kind, "per-rank") == 0 ? "one per rank (--no-feature-cache): resume with the same number of ranks"
                                                            : "global (the feature cache): resumes under any number of ranks",
                              meta(st, "ftl.optimizer"));
        }
    }
    ftl_status s = ftl_write_all(out, b.data, b.len, "stdout");
    ftl_strbuf_free(&b);
    ftl_safetensors_close(st);
    return s;
}

ftl_status ftl_trained_file_verify(const char *path, FILE *out, bool json) {
    ftl_safetensors *st;
    FTL_TRY(ftl_safetensors_open(path, &st));
    size_t count = ftl_safetensors_tensor_count(st);
    unsigned long long bytes = 0;
    for (size_t i = 0; i < count; i++) bytes += ftl_safetensors_tensor_at(st, i)->byte_size;
    bool checked = ftl_safetensors_has_checksums(st);
    const ftl_safetensors_tensor *damaged = NULL;
    ftl_status s = FTL_OK;
    char *why = NULL;
    for (size_t i = 0; checked && i < count && !damaged; i++) {
        s = ftl_safetensors_verify(st, ftl_safetensors_tensor_at(st, i));
        if (s != FTL_OK) {
            damaged = ftl_safetensors_tensor_at(st, i);
            why = ftl_strdup(ftl_last_error());
        }
    }
    uint32_t expected = 0, found = 0;
    if (damaged) {
        ftl_safetensors_checksum(st, damaged, &expected);
        found = ftl_crc32c(0, damaged->data, (size_t)damaged->byte_size);
    }
    ftl_strbuf b = {0};
    if (json) {
        ftl_strbuf_printf(&b, "{\"path\": ");
        ftl_json_append_string(&b, path);
        ftl_strbuf_printf(&b, ", \"tensors\": %zu, \"bytes\": %llu, \"checksums\": %s, \"ok\": %s, \"damaged\": ", count,
                          bytes, checked ? "true" : "false", !checked ? "null" : damaged ? "false" : "true");
        if (damaged) {
            ftl_strbuf_printf(&b, "{\"tensor\": ");
            ftl_json_append_string(&b, damaged->name);
            ftl_strbuf_printf(&b, ", \"crc32c_recorded\": \"%08x\", \"crc32c_found\": \"%08x\"}", expected, found);
        } else {
            ftl_strbuf_append(&b, "null", 4);
        }
        ftl_strbuf_printf(&b, "}\n");
    } else {
        ftl_strbuf_printf(&b, "%s: %zu tensors, %llu bytes: ", path, count, bytes);
        if (!checked)
            ftl_strbuf_printf(&b, "NOT VERIFIED: the file carries no tensor checksums (written before ftl recorded "
                                  "them, or by another program)\n");
        else if (damaged)
            ftl_strbuf_printf(&b, "DAMAGED: tensor \"%s\" has CRC32C %08x, the file recorded %08x\n", damaged->name,
                              found, expected);
        else
            ftl_strbuf_printf(&b, "ok, every tensor's CRC32C matches\n");
    }
    ftl_status w = ftl_write_all(out, b.data, b.len, "stdout");
    ftl_strbuf_free(&b);
    ftl_safetensors_close(st);
    if (damaged) s = ftl_fail(FTL_E_FORMAT, "%s", why);
    /* --verify answers "is this file intact?": a file that cannot say is not a yes */
    else if (!checked && s == FTL_OK)
        s = ftl_fail(FTL_E_FORMAT, "%s cannot be verified: it carries no tensor checksums", path);
    free(why);
    return s != FTL_OK ? s : w;
}
