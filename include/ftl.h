/* ftl — fast transfer learning: the public C API of libftl.
 *
 * One umbrella header; each concept has its own part under include/ftl/. The `ftl` command
 * line tool uses nothing but this API. Conventions: functions return ftl_status (FTL_OK = 0);
 * on failure ftl_last_error() holds a message naming the file, row, node or flag involved.
 * Objects come in _open/_close or _init/_free pairs. */
#ifndef FTL_H
#define FTL_H

#include "ftl/base.h"
#include "ftl/args.h"
#include "ftl/dist.h"
#include "ftl/parquet.h"
#include "ftl/image.h"
#include "ftl/prep.h"
#include "ftl/device.h"
#include "ftl/nn.h"
#include "ftl/profile.h"
#include "ftl/loader.h"
#include "ftl/embed.h"
#include "ftl/train.h"
#include "ftl/pipeline.h"
#include "ftl/report.h"
#include "ftl/sweep.h"
#include "ftl/export.h"

#endif
