/* The open-file structure shared by the reader's files (open/accessors, column decoding). */
#ifndef FTL_PARQUET_READER_H
#define FTL_PARQUET_READER_H

#include "ftl/parquet.h"
#include "parquet/format.h"

#include <pthread.h>

typedef struct pq_column {
    ftl_parquet_column_info info;        /* public view; strings point into this struct or md */
    char converted[24];
    char logical[64];
    const pq_schema_element *element;
} pq_column;

struct ftl_parquet_file {
    char *path;
    int fd;
    uint64_t file_size;
    uint8_t *footer;                     /* FileMetaData bytes (statistics point into them) */
    size_t footer_size;
    uint64_t footer_start;               /* file offset of the footer: chunks must end before it */
    pq_file_metadata md;
    int column_count;
    pq_column *columns;
    bool skip_crc;                       /* ftl_parquet_set_verify_crc(f, false) */
    uint64_t open_id;                    /* unique per open in this process: what a cached page is keyed by */
    /* single-value reads: page maps (and dictionaries) of the chunks read so far, one slot per
     * row group x column, allocated on first use; guarded by cache_lock */
    pthread_mutex_t cache_lock;
    struct pq_page_map **page_maps;
};

/* Reads size bytes at offset (retrying short reads); FTL_E_IO / FTL_E_FORMAT (file shrank). */
ftl_status pq_pread_full(const ftl_parquet_file *f, void *buf, size_t size, uint64_t offset);

#endif
