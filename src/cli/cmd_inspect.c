/* ftl inspect FILE: describe a Parquet dataset or an ONNX model. The file type is decided by
 * its magic bytes (then its extension), so a misnamed file still gets the right reader. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

typedef enum inspect_kind { INSPECT_UNKNOWN, INSPECT_PARQUET, INSPECT_ONNX } inspect_kind;

static bool has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

/* Parquet files start with "PAR1"; ONNX files are protobuf (no magic), so by extension. */
static inspect_kind detect_kind(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (fp) {
        char magic[4] = {0};
        size_t n = fread(magic, 1, 4, fp);
        fclose(fp);
        if (n == 4 && memcmp(magic, "PAR1", 4) == 0) return INSPECT_PARQUET;
    }
    if (has_suffix(path, ".parquet") || has_suffix(path, ".pq")) return INSPECT_PARQUET;
    if (has_suffix(path, ".onnx")) return INSPECT_ONNX;
    return INSPECT_UNKNOWN;
}

int cli_cmd_inspect(int argc, char **argv) {
    for (int i = 1; i < argc; i++) /* the first positional argument decides: ONNX model or dataset */
        if (argv[i][0] != '-') {
            if (ftl_model_path_is_onnx(argv[i])) return cli_cmd_inspect_model(argc, argv);
            break;
        }
    static const cli_command cmd = {
        "inspect", "ftl inspect FILE [--json] [--checksums] [--pages] [--verify]",
        "Describe a Parquet file (schema, rows, row groups, codecs, metadata; class names and counts for ftl datasets),\n"
        "a trained model or checkpoint (MODEL.ftl: classes, backbone, preprocessing, training, metrics),\n"
        "or an ONNX model (its own options: ftl inspect MODEL.onnx --help).",
        1, 1};
    bool json = false, checksums = false, pages = false, verify = false;
    const cli_flag flags[] = {
        {"json", CLI_BOOL, &json, NULL, "print one JSON document instead of text"},
        {"checksums", CLI_BOOL, &checksums, NULL, "Parquet: read every column and print its checksum (interop colhash v1)"},
        {"pages", CLI_BOOL, &pages, NULL, "Parquet: count the pages of each column chunk by type and encoding"},
        {"verify", CLI_BOOL, &verify, NULL, "model or checkpoint: check every tensor against the CRC32C it was written "
                                            "with (exit 1 when one differs)"},
    };
    const char *pos[1];
    int npos = 0;
    int rc = cli_parse(&cmd, flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, pos, &npos);
    if (rc == -1) return 0;
    if (rc != 0) return rc;
    const char *path = pos[0];
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "ftl: error: cannot open %s: %s\n", path, strerror(errno));
        return errno == ENOENT ? 2 : 1;
    }
    if (S_ISDIR(st.st_mode)) {
        fprintf(stderr, "ftl: error: %s is a folder; inspect takes a .parquet file or an .onnx model\n", path);
        return 2;
    }

    if (ftl_is_safetensors_file(path))
        return cli_report(verify ? ftl_trained_file_verify(path, stdout, json) : ftl_trained_file_describe(path, stdout, json));
    if (verify) {
        fprintf(stderr, "ftl inspect: error: --verify checks a model file or checkpoint; %s is neither (for a Parquet "
                        "file, --checksums reads every page and checks its CRC)\n", path);
        return 2;
    }
    switch (detect_kind(path)) {
    case INSPECT_PARQUET: {
        ftl_parquet_describe_options opts = {.json = json, .checksums = checksums, .pages = pages};
        return cli_report(ftl_parquet_describe(path, stdout, &opts));
    }
    case INSPECT_ONNX:
        return cli_cmd_inspect_model(argc, argv);
    case INSPECT_UNKNOWN: break;
    }
    fprintf(stderr, "ftl: error: %s: not a Parquet file (no PAR1 magic), not an ftl model or checkpoint, and not an .onnx model\n", path);
    return 1;
}
