// Connection setup (layer 5): every connector is set up through transport_v1 alone, whichever
// transport serves the pair of ranks (p2p-nvlink today; the net transport joins the same list).
#pragma once

#include <nccl.h>
#include <plexus/transport_v1.h>

#include <vector>

#include "bootstrap/socket.h"

struct ncclComm;

namespace plexus {

struct ConnectRequest {
  int channel;
  int peer;
  bool isSend;
};

// Sets up, exchanges (through the bootstrap) and connects every requested connector. Each request
// must be mirrored on the peer (my send to p on channel c is p's recv from me on channel c).
ncclResult_t transportConnect(ncclComm* comm, const std::vector<ConnectRequest>& requests);
// Connects what the given point-to-point tasks need and is not connected yet (channel 0).
ncclResult_t transportConnectP2p(ncclComm* comm, const std::vector<ConnectRequest>& wanted);
// One connector made outside a round (one-sided puts: the target's side is made by its one-sided service when an
// origin asks, the connect infos travelling on their one-sided connection). Setup fills *mine for the peer; connect
// polls until connected (a proxy-driven one is then handed to the proxy) or the deadline. channel only names the
// connector to the transport. The caller calls the transport's connected(), if any, once both sides are connected,
// and frees it with transportFree.
struct Connection;
ncclResult_t transportSetupOne(ncclComm* comm, int peer, int channel, bool isSend, Connection* conn,
                               plexusConnectInfo_v1_t* mine);
ncclResult_t transportConnectOne(ncclComm* comm, Connection& conn, const plexusConnectInfo_v1_t& theirs,
                                 plexusDevConnector_v1_t* connector, const Deadline& deadline);
// Frees the connections, after the proxy has delivered what they hold; false as transportFreeAll.
bool transportFree(ncclComm* comm, std::vector<Connection>& connections);
// Frees every connection; false when some were left to a proxy stuck in a plugin call (they keep pointing at
// the transports' per-communicator state, which must then outlive them).
bool transportFreeAll(ncclComm* comm);
// Per-communicator transport state (transport_v1's commInit / commFinalize), around every connection.
ncclResult_t transportCommInit(ncclComm* comm, const plexusTransportComm_v1_t& info);
void transportCommFinalize(ncclComm* comm);

}  // namespace plexus
