// The communicator (layer 1): identity, membership and everything a rank owns for its lifetime.
#pragma once

#include <nccl.h>
#include <plexus.h>
#include <plexus/algo_v2.h>
#include <plexus/transport_v1.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "channel/channel.h"
#include "fifo/work_fifo.h"
#include "config/config.h"
#include "planner/planner.h"
#include "planner/tuning.h"
#include "plugin/loader.h"
#include "topo/topo.h"
#include "transport/transport.h"

namespace plexus {
class HostExecutor;
class Launcher;
struct Task;
struct CommRegistry;  // comm/memory.cc
struct HealthState;   // health/health.cc
class DeviceRuntime;  // device/runtime.h
struct DeviceState;   // device/dev_state.h
class ProfilerApi;    // plugin/profiler.h
struct RmaState;      // transport/rma.cc

// An operator made by ncclRedOpCreatePreMulSum.
struct UserRedOp {
  bool live;
  ncclDataType_t datatype;
  ncclScalarResidence_t residence;
  uint64_t scalarBits;  // ncclScalarHostImmediate: the scalar, read at creation
  void* scalarPtr;      // ncclScalarDevice: read by the kernel when it runs
};

// What ncclConfig_t sets besides blocking, kept by the communicator (and inherited by its children).
struct CommOptions {
  std::string name;              // commName
  std::string netName;           // the net plugin wanted by name; empty: NCCL_NET, else any
  int trafficClass = -1;         // passed to the net plugin; -1: undefined
  int numRmaCtx = 1;             // one-sided contexts (ncclPutSignal's ctx is below it)
};

// An algorithm plugin as one communicator uses it.
struct AlgoInstance {
  const AlgoPlugin* plugin = nullptr;
  void* ctx = nullptr;
  int maxChannels = 1;  // channels one operation of it may run on (its graph says)
};
}  // namespace plexus

struct ncclComm {
  enum class State { Initializing, Ready, Failed };

  std::atomic<State> state{State::Initializing};
  int rank = -1;
  int nRanks = 0;
  int device = 0;
  plexusBackend_t backend = plexusBackendHost;
  plexus::DeviceRuntime* runtime = nullptr;  // the device seam of the backend
  int blocking = 1;
  plexus::CommOptions options;  // from ncclConfig_t (or the parent's)
  uint64_t commHash = 0;

  std::unique_ptr<plexus::Bootstrap> bootstrap;
  std::vector<plexusPeerInfo_v1_t> peerInfo;
  plexus::Topology topo;

  std::atomic<ncclResult_t> asyncError{ncclSuccess};
  std::mutex errorMutex;
  std::string lastError;
  alignas(64) volatile uint32_t abortFlag = 0;
  // CUDA: the word kernels watch, in host-mapped memory (device/dev_state.h); commSetAbort writes both.
  std::atomic<volatile uint32_t*> abortMirror{nullptr};

  plexus::Channels channels;
  plexusDevComm_v1_t devComm{};
  std::vector<plexus::AlgoInstance> algos;
  std::vector<const plexus::TransportPlugin*> transports;
  std::vector<void*> transportCommCtx;  // per transport: what its commInit made (nullptr: none)
  std::atomic<int> proxyConnections{0};  // connections the proxy progresses: launches wake it
  size_t buffSize = 0;  // Simple protocol bytes per connection
  int llSlots = PLEXUS_LL_HOST_SLOTS;  // LL slots per connection between host-backend ranks (llSlotsInit)

  plexus::PlannerConfig planner;
  plexus::Tuning tuning;
  std::shared_ptr<const plexus::Config> config;  // the configuration file in effect at init
  std::unique_ptr<plexus::WorkFifo> workFifo;
  std::unique_ptr<plexus::Launcher> launcher;
  std::unique_ptr<plexus::HostExecutor> executor;  // host backend: runs the launches
  // What kernels are given as their communicator: &devComm on the host, its copy in device memory on CUDA.
  plexusDevComm_v1_t* devCommForKernels = nullptr;
  std::unique_ptr<plexus::DeviceState> deviceState;  // CUDA: what kernels read (device/dev_state.h)
  bool kernelsStuck = false;  // CUDA: kernels did not stop after an abort; their memory is never freed
  uint64_t opCount = 0;

  // Group state: tasks collected until the outermost ncclGroupEnd.
  std::vector<plexus::Task> tasks;
  std::vector<plexus::Task> plannedTasks;  // the planner's copy of the group being launched
  std::vector<plexusDevWork_v1_t> plannedWorks;  // the works of the launch being planned
  std::vector<plexus::Decision> plannedDecisions;  // the decisions of the group's kept collectives
  std::vector<plexus::ConnectRequest> plannedConnects;  // the point-to-point connectors the group uses
  bool inGroup = false;

  std::thread initThread;  // nonblocking init runs here
  plexusDecision_t lastDecision{};
  std::mutex userOpsMutex;
  std::vector<plexus::UserRedOp> userOps;

  // One-sided operations' endpoint (transport/rma.h).
  plexus::RmaState* rma = nullptr;
  // ncclCommGetUniqueId's id for ncclCommGrow while it is unconsumed (one at a time, each used once).
  std::mutex growMutex;
  bool growIdPending = false;
  ncclUniqueId growId{};
  // ncclCommSuspend (comm/suspend.cc): its buffers' memory is released and new operations are refused until
  // ncclCommResume.
  std::atomic<bool> suspended{false};
  // ncclCommRevoke: new operations are refused; the communicator can still be split, shrunk, destroyed.
  std::atomic<bool> revoked{false};
  // ncclCommRegister / ncclCommWindowRegister records (comm/memory.cc), made on first use.
  std::shared_ptr<plexus::CommRegistry> registry;
  // Point-to-point's zero-copy through the transports (host backend; transport/p2p_host.h).
  plexusP2pHostOps_v1_t p2pHostOps{};
  int p2pAlgo = -1;  // the algorithm plugin that runs sends and receives
  // plexusCommGetStats: point-to-point bytes received zero-copy, and through slots (host backend).
  std::atomic<uint64_t> p2pZeroCopyBytes{0}, p2pSlotBytes{0};
  // NCCL_PROFILER_PLUGIN (profiler/profiler.h): the process's plugin while this communicator holds it, its context,
  // and each function's count of operations (the descriptors' seqNumber).
  const plexus::ProfilerApi* profiler = nullptr;
  void* profilerContext = nullptr;
  uint64_t profilerSeq[ncclNumFuncs] = {};
  // Each operation's Coll/P2p event by opSeq (a ring larger than the operations that can be in flight): the parent of
  // the KernelCh events the executor emits.
  static constexpr size_t kProfilerOps = 4096;
  void* profilerOps[kProfilerOps] = {};
  // Host backend: each channel's proxy-driven connections, whose proxy events the executor marks at each launch
  // (proxy/proxy_profile.h). Connections made on demand join while launches run, hence the mutex.
  std::mutex proxyProfilesMutex;
  std::vector<std::vector<plexus::ProxyConnection*>> proxyProfiles;  // [channel]
  // What the watchdog knows of every rank (health/health.h); set once init has completed.
  std::unique_ptr<plexus::HealthState> health;

  ncclComm();
  ~ncclComm();
};

namespace plexus {

// Raises (1) or lowers (0) the communicator's abort flag, which every wait of its kernels, proxy and bootstrap
// watches, wherever they run.
inline void commSetAbort(ncclComm* comm, uint32_t value) {
  __atomic_store_n(&comm->abortFlag, value, __ATOMIC_SEQ_CST);
  if (volatile uint32_t* mirror = comm->abortMirror.load()) __atomic_store_n(mirror, value, __ATOMIC_SEQ_CST);
}

// ncclSuccess when comm looks like a live, initialised communicator; else an error naming `api`.
ncclResult_t checkComm(ncclComm* comm, const char* api, bool requireReady = true);

// Live communicators: the API validates handles against this set, so a destroyed or made-up pointer
// is an error, never a read of freed memory.
void commRegister(ncclComm* comm, bool live);
bool commIsLive(const ncclComm* comm);
// Whether a live CUDA communicator of this process has kernels in flight (freeing GPU or pinned memory would wait
// for them).
bool commCudaKernelsBusy();
// How long a device-side wait spins before yielding (NCCL_SPIN, else by whether the node's ranks, their channels
// and, once a proxy-driven connection exists, the proxy thread each have a core): long only where no one waits for a
// core that a spinning wait holds. Set at init, and again when the first proxy-driven connection is added.
uint32_t commSpinPolls(const ncclComm* comm);

// Tears down what init built (channels, connections, executor, plugins' contexts, bootstrap).
void commFree(ncclComm* comm);

// Shared by every way of making a communicator (init.cc; split.cc for ncclCommSplit, ncclCommShrink and
// ncclCommInitRankScalable).
// Validates config as ncclCommInitRankConfig does; leaves *blocking and *options alone for undefined fields.
ncclResult_t parseCommConfig(const ncclConfig_t* config, const char* api, int* blocking, CommOptions* options);
// Creates a communicator of nranks over the roots of ids[0..nIds) (one for ncclCommInitRank), blocking
// or not, deferred inside a group.
ncclResult_t commInitRankIds(ncclComm_t* out, int nranks, int rank, const ncclUniqueId* ids, int nIds,
                             const ncclConfig_t* config, const char* api);
// Runs init on comm (rank, nRanks, device, blocking already set) and sets its state: Ready, or Failed
// with asyncError.
void commRunInit(ncclComm* comm, std::vector<ncclUniqueId> ids);

}  // namespace plexus
