#include "transport.h"

#include <algorithm>

#include "comm/communicator.h"
#include "misc/check.h"

namespace plexus {

namespace {

// Tags of the bootstrap messages that carry connect info: one per channel and direction of travel.
constexpr int kTagConnectBase = 0x10000;
constexpr int kTagConnected = 0xfffe;
int connectTag(int channel, bool fromSender) { return kTagConnectBase + channel * 2 + (fromSender ? 0 : 1); }

ncclResult_t pickTransport(ncclComm* comm, int peer, const TransportPlugin** out) {
  for (const TransportPlugin* t : comm->transports) {
    int ok = 0;
    NCCLCHECK(t->api->canConnect(t->ctx, &comm->peerInfo[comm->rank], &comm->peerInfo[peer], &ok));
    if (ok) {
      *out = t;
      return ncclSuccess;
    }
  }
  const plexusPeerInfo_v1_t& self = comm->peerInfo[comm->rank];
  const plexusPeerInfo_v1_t& other = comm->peerInfo[peer];
  return setError(comm, ncclSystemError,
                  "rank %d: no transport can connect to rank %d (%s node, %s process, %zu transport(s) loaded). "
                  "Ranks on different nodes need the net transport, which this build does not have yet; "
                  "run all ranks on one node (and unset NCCL_HOSTID).",
                  comm->rank, peer, self.hostHash == other.hostHash ? "same" : "another",
                  self.pidHash == other.pidHash ? "same" : "another", comm->transports.size());
}

}  // namespace

ncclResult_t transportConnect(ncclComm* comm, const std::vector<ConnectRequest>& requests) {
  const size_t first = comm->channels.connections.size();
  std::vector<plexusConnectInfo_v1_t> mine(requests.size()), theirs(requests.size());
  for (size_t i = 0; i < requests.size(); i++) {
    const ConnectRequest& req = requests[i];
    Connection conn;
    conn.isSend = req.isSend;
    conn.channel = req.channel;
    conn.peer = req.peer;
    NCCLCHECK(pickTransport(comm, req.peer, &conn.transport));
    plexusTransportSetup_v1_t setup{};
    setup.self = &comm->peerInfo[comm->rank];
    setup.peer = &comm->peerInfo[req.peer];
    setup.channelId = req.channel;
    setup.buffSizes[PLEXUS_PROTO_SIMPLE] = (int)comm->buffSize;
    setup.buffSizes[PLEXUS_PROTO_LL] = PLEXUS_LL_BUFF_BYTES;
    const plexusTransport_v1_t* api = conn.transport->api;
    ncclResult_t r = req.isSend ? api->sendSetup(conn.transport->ctx, &setup, &mine[i], &conn.resources)
                                : api->recvSetup(conn.transport->ctx, &setup, &mine[i], &conn.resources);
    if (r != ncclSuccess)
      return setError(comm, r, "rank %d: transport %s could not set up the %s connector with rank %d on channel %d",
                      comm->rank, api->name, req.isSend ? "send" : "recv", req.peer, req.channel);
    comm->channels.connections.push_back(conn);
  }
  for (size_t i = 0; i < requests.size(); i++)
    NCCLCHECK(comm->bootstrap->send(requests[i].peer, connectTag(requests[i].channel, requests[i].isSend), &mine[i],
                                    sizeof(mine[i])));
  for (size_t i = 0; i < requests.size(); i++)
    NCCLCHECK(comm->bootstrap->recv(requests[i].peer, connectTag(requests[i].channel, !requests[i].isSend),
                                    &theirs[i], sizeof(theirs[i])));
  for (size_t i = 0; i < requests.size(); i++) {
    const ConnectRequest& req = requests[i];
    Connection& conn = comm->channels.connections[first + i];
    plexusDevChannelPeer_v1_t& peer = comm->channels.peers[req.channel][req.peer];
    plexusDevConnector_v1_t& connector = req.isSend ? peer.send : peer.recv;
    const plexusTransport_v1_t* api = conn.transport->api;
    ncclResult_t r = req.isSend ? api->sendConnect(conn.resources, &theirs[i], &connector.conn)
                                : api->recvConnect(conn.resources, &theirs[i], &connector.conn);
    if (r != ncclSuccess)
      return setError(comm, r, "rank %d: transport %s could not connect the %s connector with rank %d on channel %d",
                      comm->rank, api->name, req.isSend ? "send" : "recv", req.peer, req.channel);
    if (connector.conn.stepSize <= 0)
      return setError(comm, ncclInternalError, "rank %d: transport %s left a step size of %d on channel %d",
                      comm->rank, api->name, connector.conn.stepSize, req.channel);
    connector.connected = 1;
  }
  // Every peer has mapped what it needs before anyone removes names. Only the peers of this round
  // take part, so connections made on demand (point-to-point) involve no other rank.
  std::vector<int> peers;
  for (const ConnectRequest& req : requests)
    if (std::find(peers.begin(), peers.end(), req.peer) == peers.end()) peers.push_back(req.peer);
  const int ack = 1;
  for (int p : peers) NCCLCHECK(comm->bootstrap->send(p, kTagConnected, &ack, sizeof(ack)));
  for (int p : peers) {
    int got = 0;
    NCCLCHECK(comm->bootstrap->recv(p, kTagConnected, &got, sizeof(got)));
  }
  for (size_t i = first; i < comm->channels.connections.size(); i++) {
    Connection& conn = comm->channels.connections[i];
    if (conn.transport->api->connected) NCCLCHECK(conn.transport->api->connected(conn.resources));
  }
  return ncclSuccess;
}

ncclResult_t transportConnectP2p(ncclComm* comm, const std::vector<ConnectRequest>& wanted) {
  std::vector<ConnectRequest> missing;
  for (const ConnectRequest& req : wanted) {
    if (req.peer == comm->rank) continue;  // a rank's messages to itself are copies
    const plexusDevChannelPeer_v1_t& peer = comm->channels.peers[req.channel][req.peer];
    if ((req.isSend ? peer.send : peer.recv).connected) continue;
    bool dup = false;
    for (const ConnectRequest& m : missing) dup |= m.channel == req.channel && m.peer == req.peer && m.isSend == req.isSend;
    if (!dup) missing.push_back(req);
  }
  if (missing.empty()) return ncclSuccess;
  INFO(NCCL_P2P, "rank %d: connecting %zu point-to-point connector(s) on demand", comm->rank, missing.size());
  return transportConnect(comm, missing);
}

void transportFreeAll(ncclComm* comm) {
  for (Connection& conn : comm->channels.connections) {
    if (!conn.resources) continue;
    const plexusTransport_v1_t* api = conn.transport->api;
    (conn.isSend ? api->sendFree : api->recvFree)(conn.resources);
    conn.resources = nullptr;
  }
  comm->channels.connections.clear();
}

}  // namespace plexus
