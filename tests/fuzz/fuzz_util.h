/* Shared by the fuzz targets: the path-based parsers read a file, so each input is written to a
 * per-process scratch file first. Logging is silenced (errors are the expected outcome). */
#ifndef FTL_FUZZ_UTIL_H
#define FTL_FUZZ_UTIL_H

#include <ftl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline const char *fuzz_write_input(const uint8_t *data, size_t size, const char *suffix) {
    static char path[256];
    if (!path[0]) {
        const char *dir = getenv("FUZZ_TMPDIR");
        snprintf(path, sizeof path, "%s/ftl-fuzz-%d%s", dir ? dir : "/tmp", (int)getpid(), suffix);
        ftl_log_set_level(FTL_LOG_ERROR);
    }
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    return path;
}

#endif
