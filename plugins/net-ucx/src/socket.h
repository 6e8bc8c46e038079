// net-ucx: the TCP socket that introduces two UCX workers (the SDK's plexus/socket.h). listen() hands out its
// address (the 128-byte handle cannot hold a UCX worker address, which over tcp is larger); the sender connects,
// the receiver answers with its worker address, and the socket then stays open as a liveness signal.
#pragma once

#include <plexus/socket.h>

namespace plexus::net_ucx {
using namespace ::plexus::sdk;
}  // namespace plexus::net_ucx
