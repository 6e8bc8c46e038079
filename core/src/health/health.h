// Health (layer 5, runtime): failures no wait of the data path can see, and where a stuck job waits.
//
// - A watchdog thread per process looks, every PLEXUS_WATCHDOG_MS (100), at what each channel of each
//   communicator waits on. A wait on a rank whose process is gone (kill -9 leaves shared memory that
//   nobody will write again) fails the communicator at once. Only waits count: a peer that exited after
//   its last operation is not a failure.
// - A fault port per process: the rank that sees a peer die (or a connection fail) tells the process of
//   every other rank, so that ranks which only wait on survivors stop too (the job NCCL's RAS does).
// - Hang reports: what every channel runs and waits on, printed once on a timeout (PLEXUS_TIMEOUT) and
//   for every communicator of the process on SIGUSR1, which does not stop anything.
#pragma once

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/socket.h"

struct ncclComm;

namespace plexus {

// What every rank tells the others about itself at init.
struct RankHealth {
  int32_t pid;
  int32_t pad0;
  uint64_t startTime;  // of the process, in clock ticks since boot (/proc/<pid>/stat): a reused pid differs
  uint64_t pidNs;      // inode of the pid namespace: pids compare only within one
  uint64_t machineHash;
  SocketAddress faultAddr;  // the process's fault port; port 0: none
  char host[64];
};

// A channel's wait on a peer whose process was seen gone (the watchdog's grace before it fails it).
struct Suspect {
  int peer = -1;
  uint64_t waitSince = 0;  // the wait's start: a new wait means the channel progressed meanwhile
  int ticks = 0;
};

struct HealthState {
  std::vector<RankHealth> ranks;
  std::vector<char> watchable;       // [rank]: its process can be looked at from here (same machine)
  std::vector<uint64_t> lastProbe;   // [rank]: when the watchdog last probed its fault port (ns)
  std::vector<Suspect> suspects;     // [channel]
  std::atomic<bool> reported{false};
  std::atomic<int> lostRank{-1};  // the first rank known to be gone
};

// Exchanges what the watchdog needs to know of every rank and starts watching comm (end of init).
ncclResult_t healthInit(ncclComm* comm);
// Stops watching comm; once it returns the watchdog no longer touches it.
void healthFinalize(ncclComm* comm);

// Fails comm for good: the first failure records the message (ncclGetLastError), sets asyncError and
// the abort flag, so that every wait ends, and with notify tells the process of every other rank. Later
// ones are logged only. lost: the rank known to be gone (plexusCommFailedRank), or -1. Any thread.
void commFail(ncclComm* comm, ncclResult_t result, bool notify, int lost, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

// "rank 3 (pid 1234 on host-a)": a rank as a person looking for it needs it.
std::string describeRank(const ncclComm* comm, int rank);
// What each channel of comm runs and waits on, one line per channel, headed by the communicator.
std::string hangReport(const ncclComm* comm);
// Prints hangReport to stderr (and the debug log) once per communicator failure; the first caller wins.
void reportHangOnce(ncclComm* comm, const char* why);

}  // namespace plexus
