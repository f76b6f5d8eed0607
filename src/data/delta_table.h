/* A Delta table's folder keeps removed Parquet parts until they are vacuumed, and only its
 * _delta_log/ says which are live: the loader and prep refuse it rather than read stale rows. */
#ifndef FTL_DATA_DELTA_TABLE_H
#define FTL_DATA_DELTA_TABLE_H

#include "ftl/base.h"
#include <stdbool.h>

bool delta_table_is(const char *folder);
/* FTL_E_INVALID_ARG naming the folder when it is a Delta table (`as` / `then`: "a dataset" /
 * "read", "a table" / "prep"), else FTL_OK. */
ftl_status delta_table_refuse(const char *folder, const char *as, const char *then);

#endif
