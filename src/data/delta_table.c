/* Delta tables refused (see delta_table.h). */
#include "data/delta_table.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <stdlib.h>

bool delta_table_is(const char *folder) {
    char *log = ftl_format("%s/_delta_log", folder);
    bool is = ftl_is_directory(log);
    free(log);
    return is;
}

ftl_status delta_table_refuse(const char *folder, const char *as, const char *then) {
    if (!delta_table_is(folder)) return FTL_OK;
    return ftl_fail(FTL_E_INVALID_ARG, "%s is a Delta table (it has a _delta_log/ folder): its Parquet files may include "
                    "removed ones, so ftl does not read them as %s; export a snapshot (e.g. Spark's df.write.parquet) "
                    "and %s that", folder, as, then);
}
