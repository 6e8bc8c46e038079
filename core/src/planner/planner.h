// The planner (layer 2): for each task takes tuning's decision (tuning.h: algorithm, protocol,
// channels, chunk), writes work descriptors into the workFifo and launches them on the task's stream.
#pragma once

#include <nccl.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

struct ncclComm;

namespace plexus {

// What the planner chose for one operation.
struct Decision {
  int algo = -1;  // index into the communicator's algorithms
  int proto = -1;
  int nChannels = 1;
  size_t chunkBytes = 0;
  float timeUs = 0;
  const char* reason = "";  // why: a rule, the tuner plugin, or the cost model (interned, stays valid)
};

// The planner's own knobs, read once per communicator.
struct PlannerConfig {
  bool checkArgs = false;  // PLEXUS_CHECK_MODE: cross-check collectives' arguments across ranks
  // PLEXUS_P2P_COLLECTIVES (default: where the node's ranks share one process): a large AllGather within one node
  // (and a Broadcast of 64 to 512 KiB between two ranks) as grouped point-to-point, whose messages cross once
  // (zero-copy) instead of twice through slots.
  bool p2pCollectives = true;
  // Sends and receives of at most this many bytes go as LL lines where their connection allows (NCCL_P2P_LL_THRESHOLD).
  size_t p2pLLThreshold = 0;
};

// Sets up tuning (tuning.h) and the planner's own knobs; a malformed value or rule fails init with a message.
ncclResult_t plannerInit(ncclComm* comm);

struct Task;

// Launches the communicator's tasks (its group) and empties them.
ncclResult_t planAndLaunch(ncclComm* comm);
// Launches one operation made outside any group (the communicator has no tasks): planAndLaunch's result for it.
ncclResult_t planAndLaunchOne(ncclComm* comm, const Task& task);
// Whether ncclAlltoAll of bytesPerPeer per rank runs as one collective (an algorithm serves it: algo-direct within a
// node) rather than as NCCL runs it, grouped sends and receives. The same answer on every rank.
bool alltoAllAsCollective(ncclComm* comm, size_t bytesPerPeer);

// Estimated time in microseconds of one task under the decision the planner would make
// (ncclGroupSimulateEnd); point-to-point, which no algorithm prices, as 2 us + bytes at 6 GB/s.
float plannerEstimate(ncclComm* comm, const Task& task);

// Bytes a collective moves per rank as NCCL counts them for tuning (AllReduce: count * size).
size_t collectiveBytes(ncclFunc_t func, size_t count, ncclDataType_t type, int nRanks);
// Inline: every operation's argument checks ask it.
inline size_t typeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}
const char* typeName(ncclDataType_t type);
const char* funcName(ncclFunc_t func);
const char* protoName(int proto);

}  // namespace plexus
