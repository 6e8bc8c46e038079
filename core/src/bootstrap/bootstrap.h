// Bootstrap (NCCL's bootstrap.cc): the out-of-band TCP network that ranks use to find each other before any
// transport exists. ncclGetUniqueId starts a root that collects every rank's address; ranks then form a ring,
// allgather their addresses, and can afterwards exchange small messages with any rank directly.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "bootstrap/socket.h"
#include "bootstrap/wire.h"
#include "nccl.h"

namespace plexus {

constexpr uint64_t NCCL_MAGIC = 0x0280028002800280ull;  // the magic of ids built from NCCL_COMM_ID, as NCCL's
constexpr uint32_t kBootstrapTag = 0x504c5853;          // 'PLXS'

// What ncclUniqueId carries; magic and addr sit where NCCL's ncclBootstrapHandle has them. `check` (a hash of
// magic and addr) lets handleValid reject an id that ncclGetUniqueId never produced.
struct BootstrapHandle {
  uint64_t magic;
  SocketAddress addr;  // the root
  uint32_t tag;        // kBootstrapTag
  uint32_t check;
};
static_assert(sizeof(BootstrapHandle) <= NCCL_UNIQUE_ID_BYTES, "BootstrapHandle must fit in ncclUniqueId");

BootstrapHandle handleFromId(const ncclUniqueId& id);
// False for ids from nowhere (all zeros, random bytes, corrupted in transit): the caller returns ncclInvalidArgument.
bool handleValid(const ncclUniqueId& id);

// With NCCL_COMM_ID=host:port: the id of that address with NCCL_MAGIC, and no root (rank 0 creates it at init
// through bootstrapCreateRoot). Otherwise a random magic and a root listening on an ephemeral port of the
// bootstrap interface, served by a detached thread until every rank has registered.
ncclResult_t bootstrapGetUniqueId(ncclUniqueId* id);
// Rank 0's root for an id built from NCCL_COMM_ID: listens on exactly the id's address. idFromEnv only words
// errors (whether to blame NCCL_COMM_ID or the unique id).
ncclResult_t bootstrapCreateRoot(const ncclUniqueId& id, bool idFromEnv);
// A fresh id with a root of its own, whatever NCCL_COMM_ID says: for communicators made from another one
// (ncclCommSplit, ncclCommShrink), whose ids travel over the parent's bootstrap.
ncclResult_t bootstrapCreateUniqueId(ncclUniqueId* id);

// ncclCommInitRankScalable: root i of nIds serves ranks [first, first + count); the first nranks % nIds
// roots serve nranks / nIds + 1 ranks, the others nranks / nIds.
struct RootBlock {
  int first, count;
};
RootBlock rootBlock(int nranks, int nIds, int i);

// One communicator's bootstrap network. One thread uses an object at a time (the communicator serialises);
// the communicator's abortFlag, set from any thread, stops it.
class Bootstrap {
 public:
  // Registers with the root, forms the ring and allgathers every rank's address. abortFlag (may be null) is the
  // communicator's: when set, blocked calls return within ~100 ms.
  static ncclResult_t init(const ncclUniqueId& id, int rank, int nranks, volatile uint32_t* abortFlag,
                           std::unique_ptr<Bootstrap>* out);
  // The same over nIds roots (ncclCommInitRankScalable): each rank registers with the root of its block
  // (rootBlock), and the first rank of a block also with the previous block's root, so that no root sees
  // every rank. ids[0]'s magic is the communicator's.
  static ncclResult_t init(const ncclUniqueId* ids, int nIds, int rank, int nranks, volatile uint32_t* abortFlag,
                           std::unique_ptr<Bootstrap>* out);
  ~Bootstrap() = default;
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  // data holds nranks slots of `size` bytes, this rank's filled; ring algorithm, nranks-1 steps.
  ncclResult_t allGather(void* data, size_t size);
  // Point-to-point over direct connections (opened on first use). Messages match on (peer, tag); others that
  // arrive meanwhile are queued. A sender does not wait for the receiver unless the socket buffers fill.
  ncclResult_t send(int peer, int tag, const void* data, size_t size);
  ncclResult_t recv(int peer, int tag, void* data, size_t size);
  ncclResult_t barrier();

  int rank() const { return rank_; }
  // Where this rank listens (the bootstrap's interface), for endpoints of its own on the same interface.
  const SocketAddress& address() const { return listen_.addr(); }
  int nranks() const { return nranks_; }

 private:
  Bootstrap(int rank, int nranks, uint64_t magic, volatile uint32_t* abortFlag)
      : rank_(rank), nranks_(nranks), magic_(magic), external_(abortFlag) {}
  AbortFlag abortFlag() { return AbortFlag(external_); }
  // Registration with a root, then its answer (the next rank's address, or why the communicator failed).
  ncclResult_t registerRoot(const BootstrapHandle& handle, const RootBlock& block, bool neighbor, Socket* root);
  ncclResult_t rootReply(const BootstrapHandle& handle, Socket& root, SocketAddress* next);
  // Accepts on listen_ until a connection of `type` from `peer` arrives. P2P connections from other ranks are
  // kept for later; anything else (wrong magic, garbage, silence) is dropped. Hellos are read as they come, so
  // that no connection holds up the others.
  ncclResult_t acceptPeer(int type, int peer, const Deadline& deadline, Socket* out);
  ncclResult_t connectPeer(int type, int peer, const SocketAddress& addr, Socket* out);

  int rank_, nranks_;
  uint64_t magic_;
  volatile uint32_t* external_;
  Socket listen_;               // where the previous rank and P2P senders connect
  Socket ringNext_, ringPrev_;  // allGather
  std::vector<SocketAddress> peerAddrs_;
  std::vector<Socket> sendSocks_, recvSocks_;  // P2P, per peer: we connected / they connected
  std::map<std::pair<int, int>, std::deque<std::vector<char>>> unexpected_;  // (peer, tag) -> payloads
  struct PendingPeer {  // accepted, its hello not all in yet (it may be a rank's that a later acceptPeer takes)
    Socket sock;
    Deadline deadline;
    char hello[sizeof(wire::PeerHello)];
    size_t got;
  };
  std::vector<PendingPeer> pendingPeers_;
};

}  // namespace plexus
