// The planner (layer 2): for each task picks algorithm, protocol and channels (environment first,
// then the algorithms' cost models), cuts the buffer into per-channel chunks, writes work descriptors
// into the workFifo and launches them on the task's stream.
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
  int algo = -1;  // index into the communicator's algorithms, or kAlgoCoreP2p
  int proto = -1;
  int nChannels = 1;
  size_t chunkBytes = 0;
  float timeUs = 0;
};

// What the environment says about tuning, read once per communicator.
struct PlannerConfig {
  uint32_t protoMask = 0;          // NCCL_PROTO
  std::vector<bool> algoAllowed;   // NCCL_ALGO, per algorithm of the communicator
  size_t minChannelBytes = 0;      // PLEXUS_MIN_CHANNEL_BYTES: smallest share worth a channel
  bool checkArgs = false;          // PLEXUS_CHECK_MODE: cross-check collectives' arguments across ranks
  // Decisions already made, by (collective, bytes): an application repeats the same few operations,
  // and asking every algorithm's cost model each time would cost more than the launch itself.
  struct Cached {
    int func = -1;
    size_t bytes = 0;
    Decision decision;
  };
  std::array<Cached, 64> cache{};
};

// Reads NCCL_PROTO / NCCL_ALGO and friends; a malformed value fails init with a message.
ncclResult_t plannerInit(ncclComm* comm);

ncclResult_t planAndLaunch(ncclComm* comm);

struct Task;
// Estimated time in microseconds of one task under the decision the planner would make
// (ncclGroupSimulateEnd); point-to-point, which no algorithm prices, as 2 us + bytes at 6 GB/s.
float plannerEstimate(ncclComm* comm, const Task& task);

// Bytes a collective moves per rank as NCCL counts them for tuning (AllReduce: count * size).
size_t collectiveBytes(ncclFunc_t func, size_t count, ncclDataType_t type, int nRanks);
size_t typeSize(ncclDataType_t type);
const char* funcName(ncclFunc_t func);
const char* protoName(int proto);

}  // namespace plexus
