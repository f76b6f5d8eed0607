/* A build without MPI: only the single-process group exists. */
#include "parallel/transport.h"
#include "util/error.h"

bool dist_transport_available(void) { return false; }
const char *dist_transport_name(void) { return "single process (built without MPI)"; }

ftl_status dist_transport_start(const ftl_dist_options *options, ftl_collectives *table) {
    (void)options, (void)table;
    return ftl_fail(FTL_E_UNSUPPORTED, "this ftl was built without MPI");
}

void dist_transport_set_stall_timeout(ftl_collectives *table, double seconds) { (void)table, (void)seconds; }
ftl_status dist_transport_finalize(ftl_collectives *table) {
    (void)table;
    return FTL_OK;
}
