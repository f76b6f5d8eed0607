/* Cooperative cancellation: a process-wide flag that long loops check between batches, so a host
 * program (the Python package on Ctrl-C) can stop ftl's work and get FTL_E_INTERRUPTED back with
 * every partial output removed by the usual error paths, instead of the CLI's exit from the handler. */
#include "util/interrupt.h"
#include "util/error.h"

#include <signal.h>
#include <stdatomic.h>

/* lock-free, so setting it from a signal handler is safe */
static volatile atomic_int interrupt_requested;

void ftl_interrupt(void) { atomic_store_explicit(&interrupt_requested, 1, memory_order_relaxed); }

void ftl_interrupt_clear(void) { atomic_store_explicit(&interrupt_requested, 0, memory_order_relaxed); }

bool ftl_interrupt_requested(void) { return atomic_load_explicit(&interrupt_requested, memory_order_relaxed) != 0; }

ftl_status ftl_interrupt_check(void) {
    if (!ftl_interrupt_requested()) return FTL_OK;
    return ftl_fail(FTL_E_INTERRUPTED, "interrupted");
}
