/* What a training run records: its arguments (the model's ftl.training_args), the log's run line,
 * the fit's result (ftl.metrics), and the model file that carries them with the head. */
#include "ftl/pipeline.h"
#include "ftl/dist.h"
#include "nn/device_caps.h"
#include "pipeline/train_run.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
    ftl_strbuf_printf(&b, ", \"tta\": \"%s\"", o->tta_flip ? "flip" : "none");
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
                      nn_device_caps_of(info->device_kind)->name);
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
        {FTL_MODEL_META_TTA, o->tta_flip ? "flip" : "none"},
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
