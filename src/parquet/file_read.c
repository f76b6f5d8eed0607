/* Whole reads of an open Parquet file's bytes, below every reader that fetches a chunk or page. */
#include "parquet/reader.h"
#include "util/error.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

ftl_status pq_pread_full(const ftl_parquet_file *f, void *buf, size_t size, uint64_t offset) {
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread(f->fd, (uint8_t *)buf + got, size - got, (off_t)(offset + got));
        if (n < 0) {
            if (errno == EINTR) continue;
            return ftl_fail(FTL_E_IO, "%s: cannot read %zu bytes at offset %llu: %s", f->path, size, (unsigned long long)offset,
                            strerror(errno));
        }
        if (n == 0)
            return ftl_fail(FTL_E_FORMAT, "%s: file ends at %llu, wanted %zu bytes at offset %llu (truncated while open?)",
                            f->path, (unsigned long long)(offset + got), size, (unsigned long long)offset);
        got += (size_t)n;
    }
    return FTL_OK;
}
