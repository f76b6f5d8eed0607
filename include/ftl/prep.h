/* ftl public API: `ftl prep`, image folders to a Parquet dataset. */
#ifndef FTL_PREP_H
#define FTL_PREP_H
#include "ftl/base.h"
#endif
