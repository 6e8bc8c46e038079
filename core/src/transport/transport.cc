#include "transport.h"

#include <plexus/device/arch.h>

#include <algorithm>
#include <chrono>

#include "bootstrap/socket.h"
#include "comm/communicator.h"
#include "device/dev_state.h"
#include "health/health.h"
#include "misc/check.h"
#include "misc/env.h"
#include "proxy/proxy.h"
#include "transport/net/net_transport.h"

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
      INFO(NCCL_INIT | NCCL_P2P, "rank %d: rank %d through transport '%s'", comm->rank, peer, t->name.c_str());
      return ncclSuccess;
    }
  }
  const plexusPeerInfo_v1_t& self = comm->peerInfo[comm->rank];
  const plexusPeerInfo_v1_t& other = comm->peerInfo[peer];
  return setError(comm, ncclSystemError,
                  "rank %d: no transport can connect to rank %d (%s node, %s process, %zu transport(s) loaded); "
                  "check the transport lines of the log (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT)",
                  comm->rank, peer, self.hostHash == other.hostHash ? "same" : "another",
                  self.pidHash == other.pidHash ? "same" : "another", comm->transports.size());
}

void* commCtxOf(ncclComm* comm, const TransportPlugin* t) {
  for (size_t i = 0; i < comm->transports.size(); i++)
    if (comm->transports[i] == t) return comm->transportCommCtx[i];
  return nullptr;
}

// A proxy failure: the communicator's operations fail with it (the proxy also sets the abort flag).
void proxyError(void* owner, const ProxyConnection& conn, ncclResult_t result, const char* why) {
  auto* comm = (ncclComm*)owner;
  // The peer's other partners may wait on ranks that are fine, for ever: tell every rank.
  const std::string where = conn.channel < comm->channels.count ? "on channel " + std::to_string(conn.channel)
                                                                  : std::string("for one-sided puts");
  commFail(comm, result, true, -1, "rank %d: the connection %s %s %s failed: %s", comm->rank,
           conn.isSend ? "to" : "from", describeRank(comm, conn.peer).c_str(), where.c_str(), why);
}

// LL slots of a connection with peer (what its LL buffer holds): host ranks run ahead of their receivers with more
// than NCCL's (comm->llSlots); a CUDA rank, or a host rank with a CUDA peer, with NCCL's.
int llSlotsAsked(const ncclComm* comm, int peer) {
  const bool hostPair = comm->peerInfo[comm->rank].backend == plexusBackendHost &&
                        comm->peerInfo[peer].backend == plexusBackendHost;
  return hostPair ? comm->llSlots : PLEXUS_STEPS;
}

// One call of the connector's connect: ncclInProgress while it waits for the peer. Once connected, a proxy-driven
// connector is handed to the proxy.
ncclResult_t connectStep(ncclComm* comm, Connection& conn, const plexusConnectInfo_v1_t& theirs,
                         plexusDevConnector_v1_t* connector) {
  const plexusTransport_v1_t* api = conn.transport->api;
  const ncclResult_t r = conn.isSend ? api->sendConnect(conn.resources, &theirs, &connector->conn)
                                     : api->recvConnect(conn.resources, &theirs, &connector->conn);
  if (r == ncclInProgress) return r;
  if (r != ncclSuccess)
    return setError(comm, r, "rank %d: transport %s could not connect the %s connector with rank %d on channel %d",
                    comm->rank, api->name, conn.isSend ? "send" : "recv", conn.peer, conn.channel);
  if (connector->conn.stepSize <= 0)
    return setError(comm, ncclInternalError, "rank %d: transport %s left a step size of %d on channel %d",
                    comm->rank, api->name, connector->conn.stepSize, conn.channel);
  const int llSlots = connector->conn.llSlots;
  if (llSlots && (llSlots < PLEXUS_STEPS || (llSlots & (llSlots - 1)) || llSlots > llSlotsAsked(comm, conn.peer)))
    return setError(comm, ncclInternalError,
                    "rank %d: transport %s reported %d LL slots with rank %d on channel %d: llSlots must be 0 or a "
                    "power of two from %d to the %d slots of the LL buffer asked for "
                    "(buffSizes / PLEXUS_LL_SLOT_BYTES)",
                    comm->rank, api->name, llSlots, conn.peer, conn.channel, PLEXUS_STEPS,
                    llSlotsAsked(comm, conn.peer));
  connector->connected = 1;
  if (!api->proxyProgress) return ncclSuccess;
  conn.proxy = std::make_unique<ProxyConnection>();
  ProxyConnection& pc = *conn.proxy;
  pc.api = api;
  pc.resources = conn.resources;
  pc.abortFlag = &comm->abortFlag;
  pc.onError = proxyError;
  pc.owner = comm;
  pc.peer = conn.peer;
  pc.channel = conn.channel;
  pc.isSend = conn.isSend;
  if (comm->backend == plexusBackendHost && conn.channel < comm->channels.count) {
    pc.profile = std::make_unique<ProxyProfile>(comm, &connector->conn, conn.peer, conn.channel, conn.isSend);
    if (api == &netTransport) netTransportSetProfile(conn.resources, pc.profile.get());
    std::lock_guard<std::mutex> lock(comm->proxyProfilesMutex);
    comm->proxyProfiles.resize(comm->channels.count);
    comm->proxyProfiles[conn.channel].push_back(&pc);
  }
  proxyAdd(&pc);
  // The proxy thread needs a core too (within a node this is known only now, a proxy-driven transport having
  // been chosen for a peer): waits that spin long would starve it.
  if (comm->proxyConnections++ == 0)
    __atomic_store_n(&comm->devComm.spinPolls, commSpinPolls(comm), __ATOMIC_RELAXED);
  return ncclSuccess;
}

}  // namespace

ncclResult_t transportCommInit(ncclComm* comm, const plexusTransportComm_v1_t& info) {
  comm->transportCommCtx.assign(comm->transports.size(), nullptr);
  for (size_t i = 0; i < comm->transports.size(); i++) {
    const TransportPlugin* t = comm->transports[i];
    if (!t->api->commInit) continue;
    ncclResult_t r = t->api->commInit(t->ctx, &info, &comm->transportCommCtx[i]);
    if (r != ncclSuccess)
      return setError(comm, r, "rank %d: transport %s could not set up for the communicator", comm->rank,
                      t->api->name);
  }
  return ncclSuccess;
}

void transportCommFinalize(ncclComm* comm) {
  for (size_t i = 0; i < comm->transportCommCtx.size(); i++)
    if (comm->transportCommCtx[i] && comm->transports[i]->api->commFinalize)
      comm->transports[i]->api->commFinalize(comm->transportCommCtx[i]);
  comm->transportCommCtx.clear();
}

ncclResult_t transportSetupOne(ncclComm* comm, int peer, int channel, bool isSend, Connection* conn,
                               plexusConnectInfo_v1_t* mine) {
  conn->isSend = isSend;
  conn->channel = channel;
  conn->peer = peer;
  NCCLCHECK(pickTransport(comm, peer, &conn->transport));
  plexusTransportSetup_v1_t setup{};
  setup.self = &comm->peerInfo[comm->rank];
  setup.peer = &comm->peerInfo[peer];
  setup.channelId = channel;
  setup.commCtx = commCtxOf(comm, conn->transport);
  setup.buffSizes[PLEXUS_PROTO_SIMPLE] = (int)comm->buffSize;
  setup.buffSizes[PLEXUS_PROTO_LL] = llSlotsAsked(comm, peer) * PLEXUS_LL_SLOT_BYTES;
  setup.buffSizes[PLEXUS_PROTO_LL128] = PLEXUS_LL128_BUFF_BYTES;
  const plexusTransport_v1_t* api = conn->transport->api;
  const ncclResult_t r = isSend ? api->sendSetup(conn->transport->ctx, &setup, mine, &conn->resources)
                                : api->recvSetup(conn->transport->ctx, &setup, mine, &conn->resources);
  if (r != ncclSuccess)
    return setError(comm, r, "rank %d: transport %s could not set up the %s connector with rank %d on channel %d",
                    comm->rank, api->name, isSend ? "send" : "recv", peer, channel);
  return ncclSuccess;
}

ncclResult_t transportConnect(ncclComm* comm, const std::vector<ConnectRequest>& requests) {
  const size_t first = comm->channels.connections.size();
  std::vector<plexusConnectInfo_v1_t> mine(requests.size()), theirs(requests.size());
  for (size_t i = 0; i < requests.size(); i++) {
    Connection conn;
    NCCLCHECK(transportSetupOne(comm, requests[i].peer, requests[i].channel, requests[i].isSend, &conn, &mine[i]));
    comm->channels.connections.push_back(std::move(conn));
  }
  for (size_t i = 0; i < requests.size(); i++)
    NCCLCHECK(comm->bootstrap->send(requests[i].peer, connectTag(requests[i].channel, requests[i].isSend), &mine[i],
                                    sizeof(mine[i])));
  for (size_t i = 0; i < requests.size(); i++)
    NCCLCHECK(comm->bootstrap->recv(requests[i].peer, connectTag(requests[i].channel, !requests[i].isSend),
                                    &theirs[i], sizeof(theirs[i])));
  // Connects may have to wait for the peer's side (ncclInProgress): poll every one of the round in turn
  // until all are done, so that no two ranks wait on each other. Sends first in each pass, as NCCL: a
  // plugin's connect may complete only once the peer accepts, and the peer's accept only once it sees
  // the connect.
  std::vector<bool> done(requests.size(), false);
  std::vector<size_t> order;
  for (int sends = 1; sends >= 0; sends--)
    for (size_t i = 0; i < requests.size(); i++)
      if (requests[i].isSend == (sends == 1)) order.push_back(i);
  const Deadline deadline = Deadline::after(bootstrapTimeout());
  for (size_t left = requests.size(), iter = 0; left > 0; iter++) {
    for (size_t i : order) {
      if (done[i]) continue;
      const ConnectRequest& req = requests[i];
      Connection& conn = comm->channels.connections[first + i];
      plexusDevChannelPeer_v1_t& peer = comm->channels.peers[req.channel][req.peer];
      const ncclResult_t r = connectStep(comm, conn, theirs[i], req.isSend ? &peer.send : &peer.recv);
      if (r == ncclInProgress) continue;
      NCCLCHECK(r);
      done[i] = true;
      left--;
    }
    if (!left) break;
    if (dev::loadRelaxed(&comm->abortFlag))
      return setError(comm, ncclInternalError, "rank %d: connecting was aborted", comm->rank);
    if (deadline.expired()) {
      std::string waiting;
      for (size_t i = 0; i < requests.size(); i++)
        if (!done[i])
          waiting += (waiting.empty() ? "" : ", ") + std::string(requests[i].isSend ? "send to " : "recv from ") +
                     std::to_string(requests[i].peer) + " on channel " + std::to_string(requests[i].channel);
      return setError(comm, ncclSystemError,
                      "rank %d: connections still not established after %.0f s (%s): the peers did not answer "
                      "through the net plugin; check that they run and can reach this node (NCCL_SOCKET_IFNAME, "
                      "firewall), or raise PLEXUS_TIMEOUT (or PLEXUS_BOOTSTRAP_TIMEOUT for setup alone)", comm->rank, deadline.seconds(), waiting.c_str());
    }
    dev::backoff((uint32_t)iter);
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
  if (const ncclResult_t r = transportConnect(comm, missing); r != ncclSuccess) {
    // The peers whose side of a connection came up go on to wait on this rank: the communicator fails under them too.
    commFail(comm, r, true, -1, "%s", lastError(nullptr));
    return r;
  }
  if (comm->deviceState) {  // CUDA kernels read the connectors from device memory
    for (const ConnectRequest& req : missing) NCCLCHECK(devStateSyncConnectors(comm, req.channel, {req.peer}));
  }
  return ncclSuccess;
}

ncclResult_t transportConnectOne(ncclComm* comm, Connection& conn, const plexusConnectInfo_v1_t& theirs,
                                 plexusDevConnector_v1_t* connector, const Deadline& deadline) {
  for (uint32_t iter = 0;; iter++) {
    const ncclResult_t r = connectStep(comm, conn, theirs, connector);
    if (r != ncclInProgress) return r;
    if (dev::loadRelaxed(&comm->abortFlag))
      return setError(comm, ncclInternalError, "rank %d: connecting was aborted", comm->rank);
    if (deadline.expired())
      return setError(comm, ncclSystemError,
                      "rank %d: the %s connector with rank %d (channel %d) still not established after %.0f s: the "
                      "peer did not answer through the %s transport; check that it runs and can reach this node, or "
                      "raise PLEXUS_TIMEOUT", comm->rank, conn.isSend ? "send" : "recv", conn.peer, conn.channel,
                      deadline.seconds(), conn.transport->api->name);
    dev::backoff(iter);
  }
}

bool transportFree(ncclComm* comm, std::vector<Connection>& connections) {
  // What kernels handed the proxy leaves before its connections close (peers may still be receiving).
  std::vector<ProxyConnection*> proxied;
  for (Connection& conn : connections)
    if (conn.proxy) proxied.push_back(conn.proxy.get());
  if (!proxied.empty() && !proxyDrain(proxied, bootstrapTimeout(), &comm->abortFlag))
    WARN("rank %d: closing connections with data not yet delivered to their peers (aborted, or not delivered "
         "within %d s)", comm->rank, bootstrapTimeout());
  // One deadline for all: a plugin call that blocks the proxy must not hold up an abort per connection.
  const auto removeBy = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  bool released = true;
  for (Connection& conn : connections) {
    if (conn.proxy) {
      comm->proxyConnections--;
      if (!proxyRemove(conn.proxy.get(), removeBy)) {
        WARN("rank %d: the net plugin has not returned from a call for the connection %s rank %d (channel %d) "
             "within 0.5 s; leaving the connection open and its memory allocated so the call can finish safely",
             comm->rank, conn.isSend ? "to" : "from", conn.peer, conn.channel);
        (void)conn.proxy.release();
        conn.resources = nullptr;
        released = false;
        continue;
      }
      conn.proxy.reset();
    }
    if (!conn.resources) continue;
    const plexusTransport_v1_t* api = conn.transport->api;
    (conn.isSend ? api->sendFree : api->recvFree)(conn.resources);
    conn.resources = nullptr;
  }
  connections.clear();
  return released;
}

bool transportFreeAll(ncclComm* comm) {
  {
    std::lock_guard<std::mutex> lock(comm->proxyProfilesMutex);
    comm->proxyProfiles.clear();
  }
  return transportFree(comm, comm->channels.connections);
}

}  // namespace plexus
