// One-sided operations (ncclPutSignal, ncclSignal, ncclWaitSignal) on the host backend.
//
// Every rank listens on a socket of the bootstrap's interface (its address travels in init's exchange); an origin
// connects to a target the first time it puts to it and writes each put's data and then its signal, in order, on
// that connection. The target's service thread, started when the rank first registers a window or uses a one-sided
// call, writes the data into its window of the same registration order and counts the signal: the target's program
// takes no part, and the data is in place before its signal counts. ncclWaitSignal waits for the counts on the
// stream, within the communicator's timeout.
#pragma once

#include <nccl.h>

#include "bootstrap/socket.h"

struct ncclComm;

namespace plexus {

struct RmaState;

// The listening socket, before init's exchange: *addr is what peers connect to.
ncclResult_t rmaInit(ncclComm* comm, SocketAddress* addr);
// Every rank's address, from init's exchange.
void rmaSetPeers(ncclComm* comm, const SocketAddress* addrs);
// Starts the service thread if it is not running (idempotent, cheap once started).
void rmaStart(ncclComm* comm);
// Stops the service thread and closes every connection.
void rmaFree(ncclComm* comm);

}  // namespace plexus
