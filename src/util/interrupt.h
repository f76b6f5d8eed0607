/* The cancellation flag's check, for the loops that run batch after batch (ftl/base.h ftl_interrupt). */
#ifndef FTL_UTIL_INTERRUPT_H
#define FTL_UTIL_INTERRUPT_H

#include "ftl/base.h"

/* FTL_OK, or FTL_E_INTERRUPTED with the message "interrupted" once ftl_interrupt() was called. */
ftl_status ftl_interrupt_check(void);

#endif
