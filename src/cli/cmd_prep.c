/* ftl prep SRC OUT: image folders -> Parquet dataset. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

int cli_cmd_prep(int argc, char **argv) {
    ftl_prep_options o;
    ftl_prep_options_init(&o);
    int64_t seed = (int64_t)o.seed;
    bool quiet = false;
    double stall_timeout = 60;
    const cli_flag flags[] = {
        {"size", CLI_INT, &o.image_size, "S", "images become S x S x 3 (thumbnail + white padding); default 299"},
        {"val-fraction", CLI_DOUBLE, &o.val_fraction, "F", "validation share when SRC has no train/ and val/ folders; default 0.1"},
        {"seed", CLI_INT64, &seed, "N", "seed of the split and of the row order; default 42"},
        {"stratify", CLI_BOOL, &o.stratify, NULL, "split each class separately (default; --no-stratify: per-image draw like Spark's randomSplit)"},
        {"row-group-bytes", CLI_BYTES, &o.row_group_bytes, "BYTES", "image bytes per Parquet row group; default 8MiB"},
        {"codec", CLI_STRING, &o.codec, "none|snappy|zstd", "compression of the Parquet pages; default none"},
        {"threads", CLI_INT, &o.threads, "N", "worker threads; default: all cores"},
        {"image-col", CLI_STRING, &o.image_column, "NAME", "tables: the image column (a binary column, or a struct with a binary 'bytes' field); default: the one the table has"},
        {"label-col", CLI_STRING, &o.label_column, "NAME", "tables: the label column, integer (names from ftl or Hugging Face metadata) or text; default label"},
        {"label-from", CLI_STRING, &o.label_from, "path", "tables: the label is the parent folder of each row's path (Spark binaryFile, read_blob)"},
        {"split-col", CLI_STRING, &o.split_column, "NAME", "tables: each row's split (train, or val/valid/validation/test), kept instead of drawing one"},
        {"val-source", CLI_STRING, &o.val_source, "SOURCE", "tables, shards: a second source that is all val (e.g. Hugging Face's test file)"},
        {"images-root", CLI_STRING, &o.images_root, "DIR", "tables: rows without image bytes read DIR/path (relative paths under DIR only)"},
        {"keep-encoded", CLI_BOOL, &o.keep_encoded, NULL, "store each image's JPEG/PNG file where it is smaller than its pixels (decoded by every reader to the same pixels)"},
        {"strict", CLI_BOOL, &o.strict, NULL, "stop at the first unreadable image or folder loop instead of skipping it"},
        {"overwrite", CLI_BOOL, &o.overwrite, NULL, "replace an existing OUT"},
        {"stall-timeout", CLI_DOUBLE, &stall_timeout, "S", "under mpirun: abort when a rank waits S s for the others (default 60, 0 = never)"},
        {"quiet", CLI_BOOL, &quiet, NULL, "no progress and no summary"},
    };
    const cli_command cmd = {"prep", "ftl prep SRC OUT [options]",
                             "Turns folders of photos (one folder per class, or train/ and val/ with class folders), a Parquet\n"
                             "table of encoded images (a file or a folder of parts: Spark binaryFile, Hugging Face, DuckDB\n"
                             "read_blob) or WebDataset shards (.tar) into OUT/train.parquet and OUT/val.parquet: label,\n"
                             "image (S*S*3 RGB bytes), path.",
                             2, 2};
    const char *positional[2];
    int npos = 0;
    int rc = cli_parse(&cmd, flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, positional, &npos);
    if (rc != 0) return rc < 0 ? 0 : rc;
    if (seed < 0) {
        fprintf(stderr, "ftl prep: error: --seed must be >= 0\n");
        return 2;
    }
    o.seed = (uint64_t)seed;
    o.split_flags_given = cli_given(argc, argv, "val-fraction") || cli_given(argc, argv, "stratify");
    o.source_dir = positional[0];
    o.output_dir = positional[1];
    if (cli_set_stall_timeout("prep", stall_timeout) != 0) return 2;
    o.collectives = ftl_dist_world();
    bool rank0 = ftl_dist_rank(o.collectives) == 0;
    o.show_progress = !quiet && rank0;
    if (quiet) ftl_log_set_level(FTL_LOG_WARN);
    ftl_prep_summary summary;
    ftl_status st = ftl_prep_run(&o, &summary);
    if (st == FTL_OK && !quiet && rank0) ftl_prep_summary_print(&summary, stdout);
    ftl_prep_summary_free(&summary);
    return cli_report(st);
}
