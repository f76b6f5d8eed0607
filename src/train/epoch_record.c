/* An epoch's record: the name its checkpoint gets, its place in the trainer's history and its JSON
 * object (the JSONL line and the checkpoint's history), shared by the fit loop and checkpoints. */
#include "train/train_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

#include <stdio.h>
#include <string.h>

char *ftl_train_expand_pattern(const char *pattern, int64_t epoch) {
    ftl_strbuf b = {0};
    ftl_strbuf_append(&b, "", 0);
    for (const char *p = pattern; *p;) {
        if (*p != '{') {
            ftl_strbuf_append(&b, p++, 1);
            continue;
        }
        const char *close = strchr(p, '}');
        int width = 0;
        if (close && strncmp(p, "{epoch}", 7) == 0) {
            ftl_strbuf_printf(&b, "%lld", (long long)epoch);
        } else if (close && strncmp(p, "{epoch:0", 8) == 0 && close[-1] == 'd' &&
                   sscanf(p + 8, "%d", &width) == 1 && width > 0 && width < 20) {
            ftl_strbuf_printf(&b, "%0*lld", width, (long long)epoch);
        } else {
            ftl_fail(FTL_E_INVALID_ARG, "checkpoint pattern \"%s\": unknown field at \"%.20s\" (use {epoch} or {epoch:03d})",
                     pattern, p);
            ftl_strbuf_free(&b);
            return NULL;
        }
        p = close + 1;
    }
    return b.data;
}

void ftl_train_history_append(ftl_trainer *t, const ftl_epoch_log *log) {
    if (t->history_count == t->history_cap) {
        t->history_cap = t->history_cap ? t->history_cap * 2 : 32;
        t->history = ftl_xrealloc(t->history, t->history_cap * sizeof *t->history);
    }
    ftl_epoch_log *h = &t->history[t->history_count++];
    *h = *log;
    h->checkpoint = log->checkpoint ? ftl_strdup(log->checkpoint) : NULL;
}

void ftl_train_append_epoch_json(ftl_strbuf *b, const ftl_epoch_log *l) {
    ftl_strbuf_printf(b, "{\"record\":\"epoch\",\"epoch\":%lld,\"epochs\":%lld,\"steps\":%lld,\"examples\":%lld,\"time_s\":", (long long)l->epoch,
                      (long long)l->epochs, (long long)l->steps, (long long)l->examples);
    ftl_json_append_number(b, l->seconds);
    const char *names[] = {"loss", "acc", "val_loss", "val_acc", "lr", "images_per_s", "gpu_util_percent", "gpu_memory_bytes"};
    double values[] = {l->loss, l->acc, l->val_loss, l->val_acc, l->lr, l->images_per_second, l->gpu_util_percent,
                       l->gpu_memory_bytes};
    for (int i = 0; i < 8; i++) {
        ftl_strbuf_printf(b, ",\"%s\":", names[i]);
        ftl_json_append_number(b, values[i]);
    }
    const char *tn[] = {"data_wait_s", "backbone_s", "head_s", "allreduce_s", "validation_s", "checkpoint_s", "other_s"};
    double tv[] = {l->data_wait_s, l->backbone_s, l->head_s, l->allreduce_s, l->validation_s, l->checkpoint_s, l->other_s};
    ftl_strbuf_append(b, ",\"time\":{", 9);
    for (int i = 0; i < 7; i++) {
        ftl_strbuf_printf(b, "%s\"%s\":", i ? "," : "", tn[i]);
        ftl_json_append_number(b, tv[i]);
    }
    ftl_strbuf_printf(b, "},\"improved\":%s,\"best_epoch\":%lld,\"checkpoint\":", l->improved ? "true" : "false",
                      (long long)l->best_epoch);
    if (l->checkpoint) ftl_json_append_string(b, l->checkpoint);
    else ftl_strbuf_append(b, "null", 4);
    ftl_strbuf_append(b, "}", 1);
}
