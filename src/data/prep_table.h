/* `ftl prep` from a Parquet table of encoded images: a .parquet file or a folder of parts (Spark and
 * Hive layout: `key=value/` partition folders become columns). The image column is a binary column
 * (Spark binaryFile's `content`, DuckDB read_blob's `content`) or a struct with a binary `bytes` field
 * (Hugging Face's image feature, its `path` beside it); labels come from an integer column (names from
 * ftl.classes or Hugging Face's ClassLabel metadata), a string column or the path's parent folder. The
 * table's cells are read one at a time, each from the page that holds it, so the rows may be taken in
 * any order at the cost of a page read, never of a row group's. */
#ifndef FTL_DATA_PREP_TABLE_H
#define FTL_DATA_PREP_TABLE_H

#include "data/prep_source.h"

/* Whether `folder` holds Parquet parts (directly or in key=value/ folders) or a Delta log. */
bool prep_table_folder_is_table(const char *folder);
/* Fills *source from the table at options->source_dir (and options->val_source). */
ftl_status prep_table_open(const ftl_prep_options *options, prep_source *source);
/* The item's encoded bytes. FTL_E_NOT_FOUND: the row has no image (skipped, as an unreadable file
 * is); FTL_E_INVALID_ARG: a path that would leave --images-root (refused); others: a damaged table. */
ftl_status prep_table_read(const prep_table *table, const prep_item *item, uint8_t **data, size_t *size);
char *prep_table_item_name(const prep_table *table, const prep_item *item);
/* prep_source_stage for a table: the items' cells in storage order into `spill_path`; then
 * prep_table_read reads the copy. A damaged table fails here; a row without an image is recorded
 * and reported when its item is read. */
ftl_status prep_table_stage(prep_table *table, prep_item *items, int64_t count, const char *spill_path);
void prep_table_unstage(prep_table *table);
void prep_table_free(prep_table *table);

#endif
