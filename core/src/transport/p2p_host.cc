#include "transport/p2p_host.h"

#include <unistd.h>

#include "comm/communicator.h"
#include "comm/memory.h"
#include "misc/check.h"

namespace plexus {

namespace {

// The connection of (channel, peer, direction) and its transport, when the transport offers zero-copy.
const Connection* zeroCopyConnection(ncclComm* comm, int channel, int peer, bool isSend) {
  for (const Connection& c : comm->channels.connections)
    if (c.channel == channel && c.peer == peer && c.isSend == isSend && c.resources) {
      const plexusTransport_v1_t* api = c.transport->api;
      const bool offers = api->structSize >= sizeof(plexusTransport_v1_t) && api->p2pDescribe && api->p2pWrite;
      return offers ? &c : nullptr;
    }
  return nullptr;
}

ncclResult_t describe(void* ctx, int channel, int peer, void* buff, size_t bytes, plexusPtrExchange_v1_t* x) {
  auto* comm = static_cast<ncclComm*>(ctx);
  const Connection* c = zeroCopyConnection(comm, channel, peer, false);
  if (!c) return ncclInvalidUsage;
  MemAllocation a;
  plexusShareable_v1_t shareable;
  const bool registered = registeredShareable(comm, buff, bytes, &a);
  if (registered)
    shareable = plexusShareable_v1_t{(int64_t)a.fd, (uint64_t)getpid(), (uint64_t)((char*)buff - (char*)a.base),
                                     a.serial};
  return c->transport->api->p2pDescribe(c->resources, buff, bytes, registered ? &shareable : nullptr, x);
}

ncclResult_t write(void* ctx, int channel, int peer, const plexusPtrExchange_v1_t* x, const void* src, size_t bytes) {
  auto* comm = static_cast<ncclComm*>(ctx);
  const Connection* c = zeroCopyConnection(comm, channel, peer, true);
  if (!c) return ncclInvalidUsage;
  return c->transport->api->p2pWrite(c->resources, x, src, bytes);
}

void count(void* ctx, uint64_t zeroCopyBytes, uint64_t slotBytes) {
  auto* comm = static_cast<ncclComm*>(ctx);
  if (zeroCopyBytes) comm->p2pZeroCopyBytes.fetch_add(zeroCopyBytes, std::memory_order_relaxed);
  if (slotBytes) comm->p2pSlotBytes.fetch_add(slotBytes, std::memory_order_relaxed);
}

}  // namespace

void p2pHostOpsInit(ncclComm* comm, plexusP2pHostOps_v1_t* ops) { *ops = plexusP2pHostOps_v1_t{comm, describe, write, count}; }

}  // namespace plexus
