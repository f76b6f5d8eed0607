/* ftl train TRAIN --val VAL --backbone MODEL.onnx --out MODEL.ftl: the article's recipe. */
#include "cli.h"

#include <stdio.h>

static const cli_command train_command = {
    "train", "ftl train TRAIN --val VAL --backbone MODEL.onnx --out MODEL.ftl [options]",
    "Trains a softmax head (optional dropout + dense) on a frozen backbone's features, with early\n"
    "stopping, learning-rate scaling and warmup, checkpoints and exact resume. With --fine-tune-last\n"
    "or --fine-tune-from, a phase 2 then trains the backbone's top with the head (Keras' two-phase\n"
    "recipe) on cached boundary tensors, never ending worse on val than phase 1.\n"
    "Across ranks and hosts: mpirun -np N ftl train ...; for -H/--hostfile add Open MPI's keepalive\n"
    "settings (--mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 --mca\n"
    "oob_tcp_keepalive_probes 3) so that a lost host ends the job; see docs/DIST.md.",
    1, 1};

int cli_train_parse_error(ftl_status st) {
    if (st == FTL_E_INVALID_ARG) return cli_usage_error(&train_command);
    return cli_report(st);
}

/* ftl train's command line into options (pointing into argv) and its --report (NULL: none): 0, an
 * exit status after printing the error, or -1 after printing --help. */
static int cli_train_parse(int argc, char **argv, ftl_train_options *out, const char **report_out) {
    ftl_train_args extra;
    ftl_status st = ftl_train_args_parse(argc, argv, out, &extra);
    if (st == FTL_OK && extra.help_asked) {
        int n;
        const ftl_arg *table = ftl_train_arg_table(&n);
        cli_print_help(&train_command, table, n);
        return -1;
    }
    if (st != FTL_OK) return cli_train_parse_error(st);
    if (extra.quiet) ftl_log_set_level(FTL_LOG_WARN);
    *report_out = extra.report_path;
    return 0;
}

int cli_cmd_train(int argc, char **argv) {
    ftl_train_options o;
    const char *report = NULL;
    int rc = cli_train_parse(argc, argv, &o, &report);
    if (rc != 0) return rc < 0 ? 0 : rc;
    ftl_train_summary s;
    ftl_status st = ftl_train_run(&o, &s);
    if (st == FTL_OK) st = ftl_train_write_report(&o, report);
    if (st == FTL_OK && ftl_dist_rank(ftl_dist_world()) == 0 && s.fine_tuned && !o.fine_tune_only && s.head_phase.epochs_run > 0)
        printf("train: phase 1 (head): %lld epochs, best epoch %lld: val_acc %.4f, val_loss %.4f\n",
               (long long)s.head_phase.epochs_run, (long long)s.head_phase.best_epoch, s.head_phase.final_val_acc,
               s.head_phase.final_val_loss);
    if (st == FTL_OK && ftl_dist_rank(ftl_dist_world()) == 0) {
        const ftl_fit_result *r = &s.fit;
        /* best epoch 0 of phase 2: no fine-tuning epoch beat phase 1, whose model is kept */
        char best[64];
        if (r->best_epoch > 0) snprintf(best, sizeof best, "best epoch %lld", (long long)r->best_epoch);
        else snprintf(best, sizeof best, "%s", s.fine_tuned ? "no epoch beat phase 1" : "no best epoch");
        printf("train: %s%lld epochs in %.1f s (features %.1f s%s); %s; model %s: val_acc %.4f, val_loss %.4f, "
               "acc %.4f%s\n",
               s.fine_tuned ? "phase 2 (fine-tuning): " : "", (long long)r->epochs_run, s.seconds, s.features_seconds,
               !s.features_cached ? ", recomputed every batch" : s.train_cache_reused ? ", from the cache" : "", best,
               o.out_path, r->final_val_acc, r->final_val_loss, r->final_acc, r->stopped_early ? " (stopped early)" : "");
    }
    return cli_report(st);
}
