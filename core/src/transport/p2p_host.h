// Point-to-point zero-copy beyond one address space on the host backend (another process's registered memory,
// process_vm_writev): a capability of the connection's transport (transport_v1's p2pDescribe / p2pWrite), which the
// shared step loop (plexus/device/p2p.h) reaches through plexusP2pHostOps_v1_t. The core adds what only it knows:
// whether a buffer lies in ncclMemAlloc memory registered with the communicator.
#pragma once

#include <plexus/device_v1.h>

struct ncclComm;

namespace plexus {

// The operations for comm's kernels (args.hostOps on the host backend).
void p2pHostOpsInit(ncclComm* comm, plexusP2pHostOps_v1_t* ops);

}  // namespace plexus
