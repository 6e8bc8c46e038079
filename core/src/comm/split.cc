// Communicators made from others and their lifecycle beyond init: ncclCommSplit, ncclCommShrink, ncclCommGrow,
// ncclCommRevoke, ncclCommInitRankScalable (several bootstrap roots), and ncclGroupSimulateEnd.
//
// A child communicator gets a bootstrap of its own: after an exchange over the parent's bootstrap that
// decides who is in it and in which order, its lowest parent rank creates a fresh unique id (with a
// root thread) and sends it to the other members over the parent's point-to-point messages, and every
// member then runs the ordinary init with its new rank. Only the members of a child take part in its
// id's exchange, so a shrink works when an excluded rank is gone for good.
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "comm/communicator.h"
#include "planner/launch.h"
#include "group/group.h"
#include "misc/check.h"
#include "misc/rand.h"

using namespace plexus;

#define NCCL_API(ret, func, ...)                                                                            \
  extern "C" __attribute__((visibility("default"))) __attribute__((alias(#func))) ret p##func(__VA_ARGS__); \
  extern "C" __attribute__((visibility("default"))) __attribute__((weak)) ret func(__VA_ARGS__)

namespace {

// Parent bootstrap tags of the child's id (the transports use 0x10000 + channel and 0xfffe).
constexpr int kTagSplitId = 0x7e5c0001;
constexpr int kTagShrinkId = 0x7e5c0002;

// ncclCommGetUniqueId's id is a bootstrap id with this trailer in its last bytes (which bootstrap ids leave zero):
// the size of the communicator it grows, so that a joining rank checks its rank before it connects anywhere.
struct GrowTrailer {
  uint32_t tag;  // kGrowTag
  int32_t oldRanks;
  uint64_t check;  // a hash of the id's other bytes and oldRanks
};
constexpr uint32_t kGrowTag = 0x576f7247;  // 'GrOW'
constexpr size_t kGrowAt = NCCL_UNIQUE_ID_BYTES - sizeof(GrowTrailer);

uint64_t growCheck(const ncclUniqueId& id, int32_t oldRanks) {
  return hashBytes(id.internal, kGrowAt, 0x67726f77u + (uint32_t)oldRanks);
}

// The bootstrap id inside a grow id, and the size it grows from; false if id is no grow id.
bool growIdParse(const ncclUniqueId& id, ncclUniqueId* bootstrapId, int* oldRanks) {
  GrowTrailer t;
  memcpy(&t, id.internal + kGrowAt, sizeof t);
  if (t.tag != kGrowTag || t.check != growCheck(id, t.oldRanks)) return false;
  *bootstrapId = id;
  memset(bootstrapId->internal + kGrowAt, 0, sizeof t);
  if (!handleValid(*bootstrapId)) return false;
  *oldRanks = t.oldRanks;
  return true;
}

// What a child's leader sends each member: its id, or why there is none.
struct ChildId {
  int32_t result;
  int32_t nranks;
  uint64_t membership;  // a hash of who is in the child, so that members that disagree fail with a message
  ncclUniqueId id;
};

// The leader (lowest parent rank of the child) creates the id and sends it to the other members; the
// others receive it. members: parent ranks, any order.
ncclResult_t shareChildId(ncclComm* parent, const char* api, int tag, const std::vector<int>& members,
                          uint64_t membership, ncclUniqueId* id) {
  const int leader = *std::min_element(members.begin(), members.end());
  ChildId msg{};
  if (parent->rank == leader) {
    ncclResult_t r = bootstrapCreateUniqueId(&msg.id);
    msg.result = r;
    msg.nranks = (int32_t)members.size();
    msg.membership = membership;
    for (int m : members)
      if (m != leader) NCCLCHECK(parent->bootstrap->send(m, tag, &msg, sizeof(msg)));
    if (r != ncclSuccess) return r;
  } else {
    NCCLCHECK(parent->bootstrap->recv(leader, tag, &msg, sizeof(msg)));
    if (msg.result != ncclSuccess)
      return setError(parent, (ncclResult_t)msg.result,
                      "%s: parent rank %d could not create the new communicator's unique id (%s)", api, leader,
                      ncclGetErrorString((ncclResult_t)msg.result));
    if (msg.nranks != (int32_t)members.size() || msg.membership != membership)
      return setError(parent, ncclInvalidUsage,
                      "%s: parent rank %d (the new communicator's first member) counts %d ranks in it, parent rank "
                      "%d counts %zu or other members: every rank must pass the same arguments", api, leader,
                      msg.nranks, parent->rank, members.size());
  }
  *id = msg.id;
  return ncclSuccess;
}

uint64_t membershipHash(const std::vector<int>& ordered) {
  return hashBytes(ordered.data(), ordered.size() * sizeof(int), 0x5b1e7u);
}

// ncclCommSplit's exchange: every parent rank takes part. *childRanks = 0 for NCCL_SPLIT_NOCOLOR.
ncclResult_t splitExchange(ncclComm* parent, int color, int key, int* childRank, int* childRanks, ncclUniqueId* id) {
  debugSetThreadRank(parent->rank);
  parent->launcher->waitIdle();  // no operation of the parent may be in flight
  struct ColorKey {
    int32_t color, key;
  };
  std::vector<ColorKey> all(parent->nRanks);
  all[parent->rank] = ColorKey{color, key};
  NCCLCHECK(parent->bootstrap->allGather(all.data(), sizeof(ColorKey)));
  *childRanks = 0;
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  std::vector<int> members;
  for (int r = 0; r < parent->nRanks; r++)
    if (all[r].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[a].key < all[b].key; });
  *childRank = (int)(std::find(members.begin(), members.end(), parent->rank) - members.begin());
  *childRanks = (int)members.size();
  NCCLCHECK(shareChildId(parent, "ncclCommSplit", kTagSplitId, members, membershipHash(members), id));
  INFO(NCCL_INIT, "ncclCommSplit: parent %p rank %d -> color %d key %d: rank %d of %d", (void*)parent, parent->rank,
       color, key, *childRank, *childRanks);
  return ncclSuccess;
}

// ncclCommShrink's exchange: only the survivors take part.
ncclResult_t shrinkExchange(ncclComm* parent, const std::vector<int>& survivors, int* childRank, int* childRanks,
                            ncclUniqueId* id) {
  debugSetThreadRank(parent->rank);
  *childRank = (int)(std::find(survivors.begin(), survivors.end(), parent->rank) - survivors.begin());
  *childRanks = (int)survivors.size();
  NCCLCHECK(shareChildId(parent, "ncclCommShrink", kTagShrinkId, survivors, membershipHash(survivors), id));
  INFO(NCCL_INIT, "ncclCommShrink: parent %p rank %d -> rank %d of %d", (void*)parent, parent->rank, *childRank,
       *childRanks);
  return ncclSuccess;
}

// ncclCommGrow's exchange among the existing ranks: which of them holds the id (exactly one), and that all
// agree on the new size; every rank sees the same offers, so all fail alike.
ncclResult_t growExchange(ncclComm* parent, int nRanks, const ncclUniqueId* offered, int* childRank, int* childRanks,
                          ncclUniqueId* id) {
  debugSetThreadRank(parent->rank);
  parent->launcher->waitIdle();  // operations in flight on the parent finish first, as for ncclCommSplit
  struct Offer {
    int32_t has, nRanks;
    ncclUniqueId id;
  };
  std::vector<Offer> all(parent->nRanks);
  all[parent->rank] = Offer{offered != nullptr, nRanks, offered ? *offered : ncclUniqueId{}};
  NCCLCHECK(parent->bootstrap->allGather(all.data(), sizeof(Offer)));
  int holder = -1;
  for (int r = 0; r < parent->nRanks; r++) {
    if (all[r].nRanks != nRanks)
      return setError(parent, ncclInvalidUsage,
                      "ncclCommGrow: rank %d grows to %d ranks, rank %d to %d: every rank must pass the same nRanks",
                      r, all[r].nRanks, parent->rank, nRanks);
    if (!all[r].has) continue;
    if (holder >= 0)
      return setError(parent, ncclInvalidUsage,
                      "ncclCommGrow: ranks %d and %d both pass a unique id; only the rank that called "
                      "ncclCommGetUniqueId passes it, the other existing ranks pass NULL", holder, r);
    holder = r;
  }
  if (holder < 0)
    return setError(parent, ncclInvalidUsage,
                    "ncclCommGrow: no existing rank passed the unique id; the rank that called ncclCommGetUniqueId "
                    "passes it (the new ranks get it too), the others pass NULL");
  int oldRanks = 0;
  if (!growIdParse(all[holder].id, id, &oldRanks) || oldRanks != parent->nRanks)
    return setError(parent, ncclInvalidArgument,
                    "ncclCommGrow: rank %d passed an id that ncclCommGetUniqueId of this communicator did not make",
                    holder);
  if (parent->rank == holder) {
    std::lock_guard<std::mutex> lock(parent->growMutex);
    parent->growIdPending = false;  // consumed
  }
  *childRank = parent->rank;
  *childRanks = nRanks;
  INFO(NCCL_INIT, "ncclCommGrow: parent %p rank %d: %d -> %d ranks", (void*)parent, parent->rank, parent->nRanks,
       nRanks);
  return ncclSuccess;
}

using Exchange = std::function<ncclResult_t(int* rank, int* nranks, ncclUniqueId* id)>;

// Refuses a call; inside a group the group's ncclGroupEnd fails as well, as with NCCL.
ncclResult_t refuse(ncclResult_t r) {
  groupRecordError(r);
  return r;
}

// The child's config: the parent's (blocking, options) without one, else the given one as init reads it.
ncclResult_t childConfig(ncclComm* parent, const ncclConfig_t* config, const char* api, int* blocking,
                         CommOptions* options) {
  if (!config) {
    *blocking = parent->blocking;
    *options = parent->options;
    return ncclSuccess;
  }
  *blocking = 1;
  *options = CommOptions{};
  return parseCommConfig(config, api, blocking, options);
}

// Learns the child's rank, size and id through the exchange; false (and the child Failed) if it failed.
bool childExchange(ncclComm* child, const Exchange& exchange, ncclUniqueId* id, ncclResult_t* result) {
  int rank = -1, nranks = 0;
  *result = exchange(&rank, &nranks, id);
  if (*result != ncclSuccess) {
    child->asyncError = *result;
    child->state = ncclComm::State::Failed;
    return false;
  }
  child->rank = rank;
  child->nRanks = nranks;
  return true;
}

// Creates the child and runs exchange + init: at once when blocking outside a group; else on the child's
// init thread, which a group's ncclGroupEnd waits for when the child is blocking (as for
// ncclCommInitRank). A nonblocking child in a group has its exchange finished by ncclGroupEnd (the group
// may also hold operations of the parent, which use the parent's bootstrap) and its init in the background.
ncclResult_t makeChild(ncclComm* parent, int blocking, const CommOptions& options, ncclComm_t* newcomm,
                       Exchange exchange) {
  auto* child = new ncclComm();
  child->device = parent->device;
  child->backend = parent->backend;
  child->runtime = parent->runtime;
  child->blocking = blocking;
  child->options = options;
  commRegister(child, true);
  *newcomm = child;
  if (!blocking && groupDepth() > 0) {
    groupAddJob([child, exchange = std::move(exchange)] {
      ncclUniqueId id;
      ncclResult_t r;
      if (!childExchange(child, exchange, &id, &r)) return r;
      child->initThread = std::thread(commRunInit, child, std::vector<ncclUniqueId>{id});
      return ncclSuccess;
    });
    return ncclInProgress;
  }
  auto run = [child, exchange = std::move(exchange)] {
    ncclUniqueId id;
    ncclResult_t r;
    if (childExchange(child, exchange, &id, &r)) commRunInit(child, {id});
  };
  if (!blocking || groupDepth() > 0) {
    child->initThread = std::thread(std::move(run));
    if (groupDepth() > 0) {
      groupAddInit(child);
      return ncclSuccess;  // blocking: ncclGroupEnd waits for it
    }
    return ncclInProgress;
  }
  run();
  if (child->state != ncclComm::State::Ready) {
    *newcomm = nullptr;
    ncclResult_t r = child->asyncError.load();
    commRegister(child, false);
    commFree(child);
    delete child;
    return r;
  }
  return ncclSuccess;
}

}  // namespace

// Collective over the parent. Ranks of one color form a communicator, ordered by key and then by parent
// rank; NCCL_SPLIT_NOCOLOR gets NULL but takes part. Any other value is a color, negative ones included
// (NCCL itself treats only NCCL_SPLIT_NOCOLOR specially). A NULL config inherits the parent's.
NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  if (newcomm) *newcomm = nullptr;
  ncclResult_t r = checkComm(comm, "ncclCommSplit");
  if (r != ncclSuccess) return refuse(r);
  if (!newcomm) return refuse(setError(comm, ncclInvalidArgument, "ncclCommSplit: newcomm is NULL"));
  *newcomm = nullptr;
  int blocking;
  CommOptions options;
  r = childConfig(comm, config, "ncclCommSplit", &blocking, &options);
  if (r != ncclSuccess) return refuse(r);
  if (color == NCCL_SPLIT_NOCOLOR) {
    auto job = [comm, key] {
      int rank, nranks;
      ncclUniqueId id;
      return splitExchange(comm, NCCL_SPLIT_NOCOLOR, key, &rank, &nranks, &id);
    };
    if (groupDepth() > 0) {
      groupAddJob(job);
      return ncclSuccess;
    }
    return job();
  }
  return makeChild(comm, blocking, options, newcomm, [comm, color, key](int* rank, int* nranks, ncclUniqueId* id) {
    return splitExchange(comm, color, key, rank, nranks, id);
  });
}

// Only the ranks that stay call it, with the same list; they are renumbered in parent order.
// NCCL_SHRINK_ABORT first stops what is in flight on the parent, which is then revoked (it refuses new
// operations and is for destroying); NCCL_SHRINK_DEFAULT waits for the parent's operations to finish.
NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
         ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags) {
  if (newcomm) *newcomm = nullptr;
  ncclResult_t r = checkComm(comm, "ncclCommShrink");
  if (r != ncclSuccess) return refuse(r);
  if (!newcomm) return refuse(setError(comm, ncclInvalidArgument, "ncclCommShrink: newcomm is NULL"));
  *newcomm = nullptr;
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    return refuse(setError(comm, ncclInvalidArgument,
                           "ncclCommShrink: shrinkFlags 0x%x: give NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT",
                           shrinkFlags));
  if (excludeRanksCount <= 0)
    return refuse(setError(comm, ncclInvalidArgument,
                           "ncclCommShrink: excludeRanksCount %d: exclude at least one rank (ncclCommSplit copies a "
                           "communicator)", excludeRanksCount));
  if (!excludeRanksList)
    return refuse(setError(comm, ncclInvalidArgument, "ncclCommShrink: excludeRanksList is NULL with count %d",
                           excludeRanksCount));
  std::vector<bool> excluded(comm->nRanks, false);
  for (int i = 0; i < excludeRanksCount; i++) {
    int x = excludeRanksList[i];
    if (x < 0 || x >= comm->nRanks)
      return refuse(setError(comm, ncclInvalidArgument,
                             "ncclCommShrink: excludeRanksList[%d]=%d is out of range [0, %d)", i, x, comm->nRanks));
    if (excluded[x])
      return refuse(setError(comm, ncclInvalidArgument, "ncclCommShrink: rank %d appears twice in excludeRanksList",
                             x));
    if (x == comm->rank)
      return refuse(setError(comm, ncclInvalidArgument,
                             "ncclCommShrink: rank %d excludes itself; an excluded rank must not call ncclCommShrink",
                             x));
    excluded[x] = true;
  }
  int blocking;
  CommOptions options;
  r = childConfig(comm, config, "ncclCommShrink", &blocking, &options);
  if (r != ncclSuccess) return refuse(r);
  std::vector<int> survivors;
  for (int i = 0; i < comm->nRanks; i++)
    if (!excluded[i]) survivors.push_back(i);

  if (shrinkFlags == NCCL_SHRINK_ABORT) {
    // Stop the parent's operations (waits give up), then reopen its bootstrap for the id exchange; its
    // data path stays closed.
    comm->revoked = true;
    commSetAbort(comm, 1);
    comm->launcher->waitIdle();
    commSetAbort(comm, 0);
  }
  return makeChild(comm, blocking, options, newcomm, [comm, survivors](int* rank, int* nranks, ncclUniqueId* id) {
    comm->launcher->waitIdle();
    return shrinkExchange(comm, survivors, rank, nranks, id);
  });
}

// An id for ncclCommGrow, with a bootstrap root of its own: one unconsumed at a time per communicator, consumed by
// the grow that uses it.
NCCL_API(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  NCCLCHECK(checkComm(comm, "ncclCommGetUniqueId"));
  if (!uniqueId) return setError(comm, ncclInvalidArgument, "ncclCommGetUniqueId: uniqueId is NULL");
  if (comm->revoked) return setError(comm, ncclInvalidUsage, "ncclCommGetUniqueId: the communicator is revoked");
  std::lock_guard<std::mutex> lock(comm->growMutex);
  if (comm->growIdPending)
    return setError(comm, ncclInvalidUsage,
                    "ncclCommGetUniqueId: the id this communicator gave before is not consumed yet; grow with it "
                    "(ncclCommGrow) before asking for another");
  ncclUniqueId id;
  NCCLCHECK(bootstrapCreateUniqueId(&id));
  const GrowTrailer t{kGrowTag, comm->nRanks, growCheck(id, comm->nRanks)};
  memcpy(id.internal + kGrowAt, &t, sizeof t);
  comm->growId = id;
  comm->growIdPending = true;
  *uniqueId = id;
  return ncclSuccess;
}

// Existing ranks keep their numbers (comm, rank -1; the id on the rank that made it, NULL elsewhere) and wait for the
// parent's operations in flight, as ncclCommSplit does; new ranks (comm NULL) take ranks from the old size up. A NULL
// config inherits the parent's on existing ranks. Every rank then runs an ordinary init of nRanks over the id's
// root, so a joining rank that never comes fails everyone's grow after NCCL_BOOTSTRAP_TIMEOUT.
NCCL_API(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
         ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                          ncclConfig_t* config) {
  if (newcomm) *newcomm = nullptr;
  if (!comm) {  // a new rank
    if (!newcomm) return refuse(setError(nullptr, ncclInvalidArgument, "ncclCommGrow: newcomm is NULL"));
    if (!uniqueId)
      return refuse(setError(nullptr, ncclInvalidArgument,
                             "ncclCommGrow: a new rank (comm NULL) needs the id from ncclCommGetUniqueId"));
    ncclUniqueId id;
    int oldRanks = 0;
    if (!growIdParse(*uniqueId, &id, &oldRanks))
      return refuse(setError(nullptr, ncclInvalidArgument,
                             "ncclCommGrow: the id was not made by ncclCommGetUniqueId (an id of ncclGetUniqueId, or "
                             "changed on the way); pass the id an existing rank got from ncclCommGetUniqueId"));
    if (nRanks <= oldRanks)
      return refuse(setError(nullptr, ncclInvalidArgument,
                             "ncclCommGrow: nRanks %d must exceed the communicator's %d ranks", nRanks, oldRanks));
    if (rank < oldRanks || rank >= nRanks)
      return refuse(setError(nullptr, ncclInvalidArgument,
                             "ncclCommGrow: a new rank's rank %d must be in [%d, %d): ranks below %d are the existing "
                             "ones", rank, oldRanks, nRanks, oldRanks));
    return commInitRankIds(newcomm, nRanks, rank, &id, 1, config, "ncclCommGrow");
  }
  ncclResult_t r = checkComm(comm, "ncclCommGrow");
  if (r != ncclSuccess) return refuse(r);
  if (!newcomm) return refuse(setError(comm, ncclInvalidArgument, "ncclCommGrow: newcomm is NULL"));
  if (rank != -1)
    return refuse(setError(comm, ncclInvalidArgument,
                           "ncclCommGrow: an existing rank passes rank -1 (it keeps rank %d), not %d", comm->rank,
                           rank));
  if (nRanks <= comm->nRanks)
    return refuse(setError(comm, ncclInvalidArgument, "ncclCommGrow: nRanks %d must exceed the communicator's %d ranks",
                           nRanks, comm->nRanks));
  if (comm->revoked) return refuse(setError(comm, ncclInvalidUsage, "ncclCommGrow: the communicator is revoked"));
  if (uniqueId) {
    std::lock_guard<std::mutex> lock(comm->growMutex);
    if (!comm->growIdPending || memcmp(uniqueId, &comm->growId, sizeof(ncclUniqueId)) != 0)
      return refuse(setError(comm, ncclInvalidArgument,
                             "ncclCommGrow: uniqueId is not the unconsumed id ncclCommGetUniqueId gave this rank; "
                             "existing ranks other than the one that made the id pass NULL"));
  }
  int blocking;
  CommOptions options;
  r = childConfig(comm, config, "ncclCommGrow", &blocking, &options);
  if (r != ncclSuccess) return refuse(r);
  const std::optional<ncclUniqueId> offered = uniqueId ? std::optional<ncclUniqueId>(*uniqueId) : std::nullopt;
  return makeChild(comm, blocking, options, newcomm, [comm, nRanks, offered](int* rank, int* nranks, ncclUniqueId* id) {
    return growExchange(comm, nRanks, offered ? &*offered : nullptr, rank, nranks, id);
  });
}

// Local to the rank: operations in flight give up (their waits return), new ones are refused with
// ncclInvalidUsage; the communicator can still be split, shrunk and destroyed, and its state stays
// ncclSuccess (the revocation is not an error of the communicator). Once only.
NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags);
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  if (!comm) return ncclSuccess;  // as ncclCommDestroy(NULL)
  NCCLCHECK(checkComm(comm, "ncclCommRevoke"));
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return setError(comm, ncclInvalidArgument, "ncclCommRevoke: revokeFlags 0x%x: only NCCL_REVOKE_DEFAULT (0)",
                    revokeFlags);
  if (comm->revoked.exchange(true))
    return setError(comm, ncclInvalidArgument, "ncclCommRevoke: the communicator is already revoked");
  const ncclResult_t before = comm->asyncError.load();
  commSetAbort(comm, 1);
  comm->launcher->waitIdle();
  // Nothing runs any more and nothing new is accepted: the flag can come down again, so that the
  // bootstrap serves ncclCommSplit / ncclCommShrink of the revoked communicator.
  commSetAbort(comm, 0);
  if (before == ncclSuccess) comm->asyncError = ncclSuccess;
  INFO(NCCL_INIT, "ncclCommRevoke: comm %p rank %d revoked", (void*)comm, comm->rank);
  return comm->blocking ? ncclSuccess : ncclInProgress;
}

// Ranks are spread over nId roots in contiguous blocks (Bootstrap::init); every rank passes the same ids
// in the same order.
NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
         ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config) {
  const char* api = "ncclCommInitRankScalable";
  if (!newcomm) return setError(nullptr, ncclInvalidArgument, "%s: newcomm is NULL", api);
  *newcomm = nullptr;
  if (nranks < 1) return setError(nullptr, ncclInvalidArgument, "%s: nranks %d must be at least 1", api, nranks);
  if (myrank < 0 || myrank >= nranks)
    return setError(nullptr, ncclInvalidArgument, "%s: myrank %d is out of range [0, %d)", api, myrank, nranks);
  if (nId < 1 || nId > nranks)
    return setError(nullptr, ncclInvalidArgument, "%s: nId %d must be in [1, nranks=%d]", api, nId, nranks);
  if (!commIds) return setError(nullptr, ncclInvalidArgument, "%s: commIds is NULL", api);
  for (int i = 0; i < nId; i++)
    for (int j = 0; j < i; j++)
      if (memcmp(&commIds[i], &commIds[j], sizeof(ncclUniqueId)) == 0)
        return setError(nullptr, ncclInvalidArgument,
                        "%s: commIds[%d] and commIds[%d] are the same id; each root needs an id of its own (one "
                        "ncclGetUniqueId call per id; NCCL_COMM_ID gives every call the same one)", api, j, i);
  return commInitRankIds(newcomm, nranks, myrank, commIds, nId, config, api);
}

// Ends the group as ncclGroupEnd does but launches nothing: simInfo->estimatedTime gets the cost
// models' estimate (microseconds) of what the group collected, which is then dropped. A simInfo not
// made with NCCL_SIM_INFO_INITIALIZER is ncclInvalidArgument and the group is dropped too.
NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo);
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  if (groupDepth() == 0)
    return setError(nullptr, ncclInvalidUsage, "ncclGroupSimulateEnd: no matching ncclGroupStart on this thread");
  const char* bad = !simInfo                          ? "simInfo is NULL"
                    : simInfo->magic != 0x74685283u   ? "simInfo was not initialised with NCCL_SIM_INFO_INITIALIZER"
                    : simInfo->size < offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float)
                        ? "simInfo->size is smaller than ncclSimInfo_t"
                        : nullptr;
  if (bad) {
    groupRecordError(ncclInvalidArgument);
    float ignored;
    groupSimulateEnd(&ignored);
    return setError(nullptr, ncclInvalidArgument, "ncclGroupSimulateEnd: %s; the group is dropped", bad);
  }
  const bool outermost = groupDepth() == 1;  // an inner end only closes its level
  float us = 0;
  ncclResult_t r = groupSimulateEnd(&us);
  if (r == ncclSuccess && outermost) simInfo->estimatedTime = us;
  return r;
}
