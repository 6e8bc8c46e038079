// One-sided operations (ncclPutSignal, ncclSignal, ncclWaitSignal) on the host backend.
//
// Every rank listens on a socket of the bootstrap's interface (its address travels in init's exchange); an origin
// connects to a target the first time it puts to it and writes each operation's header on that connection, in
// order. The target's service thread, started when the rank first registers a window or uses a one-sided call,
// writes each put's data into its window of the same registration order and then counts the signal: the target's
// program takes no part, and the data is in place before its signal counts. A put's bytes go where the origin can
// put them best: into the window itself (ranks of one process, ncclMemAlloc windows of one node), with the header
// (up to PLEXUS_RMA_INLINE_BYTES), or through a connector of the communicator's transports, made on the first such
// put by the origin and the target's service together (between nodes: the net plugin, moved by the proxy and the
// shared primitives as every collective's data). ncclWaitSignal waits for the counts on the stream, within the
// communicator's timeout.
#pragma once

#include <nccl.h>
#include <plexus/device_v1.h>

#include <functional>

#include "bootstrap/socket.h"

struct ncclComm;

namespace plexus {

struct RmaState;
struct Connection;

// The listening socket, before init's exchange: *addr is what peers connect to.
ncclResult_t rmaInit(ncclComm* comm, SocketAddress* addr);
// Every rank's address, from init's exchange.
void rmaSetPeers(ncclComm* comm, const SocketAddress* addrs);
// Starts the service thread if it is not running (idempotent, cheap once started).
void rmaStart(ncclComm* comm);
// Stops the service thread and closes every connection; false as transportFreeAll (a connector left to a proxy stuck
// in a plugin call).
bool rmaFree(ncclComm* comm);

// ncclCommSuspend's part (comm/suspend.cc). rmaSuspendLinks stops the one-sided connectors, once a transfer in
// progress ends (within `seconds`): until rmaResumeLinks, a put through them waits (within the communicator's
// timeout). rmaForEachLink shows each connector in use with its connection, for suspend to release and resume to
// restore like the collectives' ones.
ncclResult_t rmaSuspendLinks(ncclComm* comm, double seconds);
void rmaResumeLinks(ncclComm* comm);
void rmaForEachLink(ncclComm* comm, const std::function<void(const Connection&, plexusDevConnector_v1_t&)>& f);

}  // namespace plexus
