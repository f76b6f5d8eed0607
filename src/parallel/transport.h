/* The transports behind ftl_collectives: Open MPI (transport_mpi.c, built when mpicc is found)
 * or none (transport_none.c). dist_world.c picks one at start. */
#ifndef FTL_PARALLEL_TRANSPORT_H
#define FTL_PARALLEL_TRANSPORT_H

#include "ftl/dist.h"

/* Whether this build has a transport, and its name ("Open MPI 4.1.4"). */
bool dist_transport_available(void);
const char *dist_transport_name(void);
/* Initialises the transport (MPI_Init) and fills the table. */
ftl_status dist_transport_start(const ftl_dist_options *options, ftl_collectives *table);
void dist_transport_set_stall_timeout(ftl_collectives *table, double seconds);
ftl_status dist_transport_finalize(ftl_collectives *table);

#endif
