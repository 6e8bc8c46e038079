// The net transport: connections between ranks of different nodes, carried by a net plugin (an
// external ncclNet plugin or the built-in socket net) and moved by the proxy, exactly along NCCL's
// NET + Simple path (nccl-abi.md §5.3, §5.4). It is a transport_v1 like any other, built into the core.
//
// Per connection, each side has a staging buffer of PLEXUS_STEPS slots, registered with the plugin, and
// control words (head, tail, connFifo) in its own memory:
//   sender:   the kernel fills slot s, records its size in connFifo[s] and publishes tail; the proxy
//             sees it, calls isend, tests it, frees the slot (size -1) and returns credit through head;
//   receiver: the proxy posts irecv into each free slot (one the kernel has released through head),
//             tests it and publishes tail; the kernel consumes the slot and advances head.
// LL steps travel in the same slots (PLEXUS_CONN_LL_IN_SLOTS): a proxy moves whole slots, so the
// receiver reads LL lines once tail has them.
#pragma once

#include <plexus/transport_v1.h>

namespace plexus {

extern const plexusTransport_v1_t netTransport;

class ProxyProfile;
// The connection's proxy events (host backend), whose step handles its isend/irecv hand the net plugin (phandle):
// a v10+ plugin's profiler callback hangs NetPlugin events off them.
void netTransportSetProfile(void* resources, ProxyProfile* profile);
// ncclCommSuspend / ncclCommResume of an idle connection: a registration pins the pages it was made on, so it is
// dropped before the slots' pages are released, and made again (conn->mhandles too) once they are back.
ncclResult_t netTransportDeregister(void* resources);
ncclResult_t netTransportReregister(void* resources, plexusConnInfo_v1_t* conn);

}  // namespace plexus
