/* What a run's options say of fine-tuning (phase 2): whether it runs, its cut in words, and where
 * its checkpoints go. */
#include "pipeline/train_run.h"
#include "util/alloc.h"

#include <string.h>

bool fine_tuning(const ftl_train_options *o) {
    return o->fine_tune.last_convs > 0 || (o->fine_tune.from_tensor && o->fine_tune.from_tensor[0]);
}

char *fine_tune_cut_text(const ftl_fine_tune_cut *c) {
    return c->last_convs > 0 ? ftl_format("last %d", c->last_convs) : ftl_format("from %s", c->from_tensor);
}

/* Phase 2's checkpoints sit beside phase 1's, named fine-tune-NAME, so neither overwrites the other. */
char *fine_tune_checkpoint_pattern(const char *pattern) {
    if (!pattern) return NULL;
    const char *slash = strrchr(pattern, '/');
    if (!slash) return ftl_format("fine-tune-%s", pattern);
    return ftl_format("%.*s/fine-tune-%s", (int)(slash - pattern + 1) - 1, pattern, slash + 1);
}
