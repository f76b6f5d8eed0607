/* ftl public API: Parquet files (reader and writer). Filled in by src/parquet/. */
#ifndef FTL_PARQUET_H
#define FTL_PARQUET_H
#include "ftl/base.h"
#endif
