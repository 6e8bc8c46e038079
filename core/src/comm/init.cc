// Communicator creation and teardown: bootstrap, peer info, topology, algorithm graphs, channels,
// connections, executor.
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "comm/communicator.h"
#include "device/dev_state.h"
#include "device/runtime.h"
#include "executor/host_executor.h"
#include "group/group.h"
#include "health/health.h"
#include "misc/check.h"
#include "misc/env.h"
#include "misc/rand.h"
#include "planner/launch.h"
#include "planner/planner.h"
#include "plugin/net.h"
#include "profiler/profiler.h"
#include <plexus/device/arch.h>
#include "topo/hw_topo.h"
#include "transport/p2p_host.h"
#include "transport/rma.h"
#include "transport/transport.h"

ncclComm::ncclComm() = default;
ncclComm::~ncclComm() = default;  // here, where every member's type is complete

namespace plexus {

namespace {

// Where this rank sits (HwTopology::place): from its GPU on the CUDA backend, else from its CPUs; 0 where the machine's
// topology is unknown. Loads the process's topology (NCCL_TOPO_FILE, NCCL_TOPO_DUMP_FILE, logged under GRAPH).
uint64_t placeOf(ncclComm* comm, const CpuMask& cpus) {
  const HwTopology* hw = HwTopology::process();
  if (!hw) return 0;
  if (comm->backend == plexusBackendCuda) {
    const HwDevice* gpu = hw->gpuByBusId(cudaBusId(comm->device));
    return gpu ? hw->place(*gpu) : 0;
  }
  std::vector<bool> set(sizeof(cpus.bits) * 8);
  for (size_t c = 0; c < set.size(); c++) set[c] = cpus.bits[c / 64] >> (c % 64) & 1;
  return hw->placeOfCpus(cpuListText(set));
}

ncclResult_t setupAlgorithms(ncclComm* comm) {
  std::vector<const AlgoPlugin*> plugins;
  NCCLCHECK(loadAlgorithms(communicatorAlgorithms(*comm->config), &plugins));
  const plexusAlgoTopo_v1_t topo = algoTopology(comm->topo, comm->rank, comm->channels.count, comm->buffSize);
  const plexusAlgoProtocols_v2_t protocols = algoProtocols(comm->topo, topo);
  bool haveRing = false, haveTree = false;
  std::vector<std::vector<int>> orders(comm->channels.count, std::vector<int>(comm->nRanks, -1));
  std::vector<std::vector<int>> parents(comm->channels.count, std::vector<int>(comm->nRanks, -2));
  std::vector<ConnectRequest> reqs;
  auto want = [&](int channel, int peer, bool isSend) {
    if (peer == comm->rank || peer < 0) return;
    for (const ConnectRequest& r : reqs)
      if (r.channel == channel && r.peer == peer && r.isSend == isSend) return;
    reqs.push_back({channel, peer, isSend});
  };
  for (const AlgoPlugin* p : plugins) {
    AlgoInstance inst{p, nullptr};
    if (p->api->init(&inst.ctx, &topo, debugLog) != ncclSuccess)
      return setError(comm, ncclInternalError, "algorithm plugin '%s' (%s): init failed on rank %d", p->name.c_str(),
                      p->path.c_str(), comm->rank);
    comm->algos.push_back(inst);
    if (p->api->setPlaces(inst.ctx, comm->topo.rankPlace.data()) != ncclSuccess)
      return setError(comm, ncclInternalError, "algorithm plugin '%s' (%s): setPlaces failed on rank %d",
                      p->name.c_str(), p->path.c_str(), comm->rank);
    if (p->api->setProtocols(inst.ctx, &protocols) != ncclSuccess)
      return setError(comm, ncclInternalError, "algorithm plugin '%s' (%s): setProtocols failed on rank %d",
                      p->name.c_str(), p->path.c_str(), comm->rank);
    plexusAlgoGraph_v1_t graph{};
    graph.nChannels = comm->channels.count;
    for (int c = 0; c < graph.nChannels; c++) {
      graph.channels[c].ringOrder = orders[c].data();
      graph.channels[c].treeParents = parents[c].data();
    }
    if (p->api->buildGraph(inst.ctx, &graph) != ncclSuccess)
      return setError(comm, ncclInternalError, "algorithm plugin '%s': buildGraph failed on rank %d", p->name.c_str(),
                      comm->rank);
    if (graph.maxChannels < 0 || graph.maxChannels > comm->channels.count)
      return setError(comm, ncclInternalError, "algorithm plugin '%s': buildGraph set maxChannels %d, outside [0, %d]",
                      p->name.c_str(), graph.maxChannels, comm->channels.count);
    AlgoInstance& added = comm->algos.back();
    added.maxChannels = graph.maxChannels ? graph.maxChannels : comm->channels.count;
    if ((graph.connectMask & PLEXUS_ALGO_CONNECT_RING) && !haveRing) {
      haveRing = true;  // the first ring-building algorithm defines the channels' rings
      NCCLCHECK(channelsSetRings(&comm->channels, comm->rank, comm->nRanks, graph));
      if (comm->rank == 0) {
        std::string ring, places;
        for (int r : orders[0]) ring += " " + std::to_string(r);
        char one[40];
        for (int r = 0; r < comm->nRanks && r < 64; r++) {
          snprintf(one, sizeof one, " %d:%llx", r, (unsigned long long)comm->topo.rankPlace[r]);
          places += one;
        }
        INFO(NCCL_GRAPH, "ring of '%s', channel 0:%s (rank:place%s)", p->name.c_str(), ring.c_str(), places.c_str());
      }
      for (int c = 0; c < comm->channels.count; c++) {
        want(c, comm->channels.dev[c].ring.prev, false);
        want(c, comm->channels.dev[c].ring.next, true);
      }
    }
    if ((graph.connectMask & PLEXUS_ALGO_CONNECT_TREE) && !haveTree) {
      haveTree = true;  // likewise the first tree-building algorithm defines the channels' trees
      NCCLCHECK(channelsSetTrees(&comm->channels, comm->rank, comm->nRanks, graph));
      if (comm->rank == 0) {
        std::string tree;
        for (int r = 0; r < comm->nRanks && r < 64; r++) tree += " " + std::to_string(r) + ":" + std::to_string(parents[0][r]);
        INFO(NCCL_GRAPH, "tree of '%s', channel 0 (rank:parent):%s", p->name.c_str(), tree.c_str());
      }
      for (int c = 0; c < comm->channels.count; c++) {
        const plexusDevTree_v1_t& t = comm->channels.dev[c].tree;
        for (int peer : {t.up, t.down[0], t.down[1], t.down[2]}) {
          want(c, peer, true);
          want(c, peer, false);
        }
      }
    }
    if (graph.connectMask & PLEXUS_ALGO_CONNECT_ALL)
      for (int c = 0; c < added.maxChannels; c++)
        for (int peer = 0; peer < comm->nRanks; peer++) {
          want(c, peer, true);
          want(c, peer, false);
        }
  }
  for (size_t a = 0; a < comm->algos.size() && comm->p2pAlgo < 0; a++)
    if (comm->algos[a].plugin->api->funcMask & (1u << ncclFuncSend)) comm->p2pAlgo = (int)a;
  if (comm->p2pAlgo < 0)
    return setError(comm, ncclInternalError, "rank %d: no algorithm plugin serves point-to-point", comm->rank);
  // Connectors are shared: an algorithm that needs one another already asked for reuses it.
  if (!reqs.empty()) NCCLCHECK(transportConnect(comm, reqs));
  return ncclSuccess;
}

// NCCL's CPU affinity: while a CUDA communicator initializes, its thread runs on the CPUs local to its GPU (within
// the job's affinity unless NCCL_IGNORE_CPU_AFFINITY=1), so that the threads init starts (the proxy) inherit them;
// the caller's affinity comes back after. Only on the live machine: a topology file's CPUs are another machine's.
class InitAffinity {
 public:
  explicit InitAffinity(ncclComm* comm) {
    if (comm->backend != plexusBackendCuda) return;
    const HwTopology* hw = HwTopology::process();
    const HwDevice* gpu = hw && hw->source() == "live" ? hw->gpuByBusId(cudaBusId(comm->device)) : nullptr;
    if (!gpu || pthread_getaffinity_np(pthread_self(), sizeof saved_, &saved_) != 0) return;
    std::vector<bool> job(CPU_SETSIZE);
    for (int c = 0; c < CPU_SETSIZE; c++) job[c] = CPU_ISSET(c, &saved_);
    const std::string jobCpus = cpuListText(job);
    const bool ignore = envInt("IGNORE_CPU_AFFINITY", 0) == 1;
    const std::string want = bindingCpus(gpu, jobCpus, ignore);
    if (want.empty() || want == jobCpus) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    const std::vector<bool> cpus = parseCpuList(want);
    for (size_t c = 0; c < cpus.size() && c < CPU_SETSIZE; c++)
      if (cpus[c]) CPU_SET(c, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
      WARN("rank %d: cannot run on CPUs %s, local to GPU %s: %s; its threads keep CPUs %s", comm->rank, want.c_str(),
           gpu->busId.c_str(), strerror(errno), jobCpus.c_str());
      return;
    }
    restore_ = true;
    INFO(NCCL_INIT | NCCL_GRAPH, "rank %d: threads started at init run on CPUs %s (local to GPU %s: %s%s)", comm->rank,
         want.c_str(), gpu->busId.c_str(), gpu->cpus.c_str(),
         ignore ? "; NCCL_IGNORE_CPU_AFFINITY=1: the job's affinity is ignored" : ", within the job's affinity");
  }
  ~InitAffinity() {
    if (restore_) pthread_setaffinity_np(pthread_self(), sizeof saved_, &saved_);
  }
  InitAffinity(const InitAffinity&) = delete;
  InitAffinity& operator=(const InitAffinity&) = delete;

 private:
  cpu_set_t saved_{};
  bool restore_ = false;
};

// LL slots per connection between host-backend ranks (llSlotsAsked): NCCL_LL_BUFFSIZE's, else what the node's cores
// and ranks call for (llHostSlots). Both sides of a connection must ask for the same: the smallest any rank proposes.
ncclResult_t llSlotsInit(ncclComm* comm) {
  const int64_t bytes = envInt("LL_BUFFSIZE", 0);
  constexpr int64_t kMaxBytes = 64ll << 20;
  if (bytes && (bytes < PLEXUS_LL_BUFF_BYTES || bytes > kMaxBytes))
    return setError(comm, ncclInvalidArgument,
                    "NCCL_LL_BUFFSIZE=%lld is out of range [%d, %lld]: the LL buffer holds from %d to %lld slots of %d "
                    "bytes; set it in that range, or unset it for the default",
                    (long long)bytes, PLEXUS_LL_BUFF_BYTES, (long long)kMaxBytes, PLEXUS_STEPS,
                    (long long)(kMaxBytes / PLEXUS_LL_SLOT_BYTES), PLEXUS_LL_SLOT_BYTES);
  int slots = llHostSlots(comm->topo, comm->channels.count);
  if (bytes) {  // a power of two of slots, the most that fit
    slots = PLEXUS_STEPS;
    while ((int64_t)2 * slots * PLEXUS_LL_SLOT_BYTES <= bytes) slots *= 2;
  }
  std::vector<int> all(comm->nRanks);
  all[comm->rank] = slots;
  NCCLCHECK(comm->bootstrap->allGather(all.data(), sizeof(int)));
  comm->llSlots = *std::min_element(all.begin(), all.end());
  return ncclSuccess;
}

ncclResult_t commInitImpl(ncclComm* comm, const std::vector<ncclUniqueId>& ids) {
  debugSetThreadRank(comm->rank);
  if (comm->backend == plexusBackendCuda) {
    // Init may run on a thread of its own (nonblocking, groups): the device's context is made current here.
    if (comm->runtime->setCurrent(comm->device) != ncclSuccess)
      return setError(comm, ncclUnhandledCudaError, "rank %d: cannot use CUDA device %d: %s", comm->rank, comm->device,
                      comm->runtime->lastError().c_str());
    NCCLCHECK(devStateInitAbort(comm));
  }
  const InitAffinity affinity(comm);
  // First, so that the file's knob defaults hold for everything below.
  NCCLCHECK(configLoad(&comm->config));
  NCCLCHECK(Bootstrap::init(ids.data(), (int)ids.size(), comm->rank, comm->nRanks, &comm->abortFlag,
                            &comm->bootstrap));
  comm->commHash = hashBytes(&ids[0], sizeof(ids[0]));
  {
    // What transports see of a peer and, for the core alone, the CPUs it may run on and where it sits: one exchange.
    struct Hello {
      plexusPeerInfo_v1_t info;
      CpuMask cpus;
      uint64_t place;
      SocketAddress rma;  // the one-sided endpoint (transport/rma.h)
    };
    std::vector<Hello> hellos(comm->nRanks);
    const CpuMask mine = localCpuMask();
    SocketAddress rma{};
    NCCLCHECK(rmaInit(comm, &rma));
    hellos[comm->rank] = Hello{localPeerInfo(comm->rank, comm->device, comm->backend), mine, placeOf(comm, mine), rma};
    NCCLCHECK(comm->bootstrap->allGather(hellos.data(), sizeof(Hello)));
    std::vector<CpuMask> cpus(comm->nRanks);
    comm->peerInfo.resize(comm->nRanks);
    std::vector<SocketAddress> rmaAddrs(comm->nRanks);
    for (int r = 0; r < comm->nRanks; r++) {
      comm->peerInfo[r] = hellos[r].info;
      cpus[r] = hellos[r].cpus;
      rmaAddrs[r] = hellos[r].rma;
    }
    rmaSetPeers(comm, rmaAddrs.data());
    comm->topo = computeTopology(comm->peerInfo, cpus, comm->rank);
    comm->topo.rankPlace.resize(comm->nRanks);
    for (int r = 0; r < comm->nRanks; r++) comm->topo.rankPlace[r] = hellos[r].place;
  }
  comm->topo.deviceChannels = comm->backend == plexusBackendCuda;
  profilerCommInit(comm);  // before the proxy starts, as NCCL (it emits events too)

  comm->buffSize = (size_t)envInt("BUFFSIZE", 4 << 20);
  if (comm->buffSize < 4096 * PLEXUS_STEPS || comm->buffSize > (1u << 30))
    return setError(comm, ncclInvalidArgument, "NCCL_BUFFSIZE=%zu is out of range [%d, 1 GiB]", comm->buffSize,
                    4096 * PLEXUS_STEPS);
  comm->buffSize &= ~(size_t)(4096 * PLEXUS_STEPS - 1);  // page-aligned slots
  // Channel count and buffer size must agree on every rank: take the smallest any rank proposes.
  std::vector<int> proposals(comm->nRanks);
  proposals[comm->rank] = channelCount(comm->topo);
  NCCLCHECK(comm->bootstrap->allGather(proposals.data(), sizeof(int)));
  std::vector<size_t> buffs(comm->nRanks);
  buffs[comm->rank] = comm->buffSize;
  NCCLCHECK(comm->bootstrap->allGather(buffs.data(), sizeof(size_t)));
  comm->buffSize = *std::min_element(buffs.begin(), buffs.end());
  channelsInit(&comm->channels, *std::min_element(proposals.begin(), proposals.end()), comm->nRanks);
  NCCLCHECK(llSlotsInit(comm));

  {
    bool none = false;
    const std::vector<std::string> transports = configTransports(*comm->config, &none);
    if (loadTransports(transports, none, &comm->transports) != ncclSuccess)
      return setError(comm, ncclInvalidUsage, "rank %d: %s", comm->rank, lastError(nullptr));
  }
  {
    plexusTransportComm_v1_t info{};
    info.commHash = comm->commHash;
    info.rank = comm->rank;
    info.nRanks = comm->nRanks;
    info.localRank = comm->topo.localRank;
    info.nLocalRanks = comm->topo.nLocalRanks;
    // NCCL's precedence: the config's netName, then NCCL_NET; NCCL_NET_PLUGIN, then the file's plugins.net.
    const std::string netName = !comm->options.netName.empty() ? comm->options.netName : envStr("NET", "");
    const std::string netPlugin = netPluginSpec(comm->config->net);
    info.netName = netName.empty() ? nullptr : netName.c_str();
    info.netPlugin = netPlugin.empty() ? nullptr : netPlugin.c_str();
    info.trafficClass = comm->options.trafficClass;
    NCCLCHECK(transportCommInit(comm, info));
  }
  NCCLCHECK(setupAlgorithms(comm));
  NCCLCHECK(plannerInit(comm));

  comm->devComm.version = PLEXUS_DEVICE_ABI_VERSION;
  comm->devComm.rank = comm->rank;
  comm->devComm.nRanks = comm->nRanks;
  comm->devComm.nChannels = comm->channels.count;
  comm->devComm.abortFlag = &comm->abortFlag;
  comm->devComm.timeoutNs = (uint64_t)std::max<int64_t>(0, envInt("TIMEOUT", 0)) * 1000000000ull;
  comm->devComm.channels = comm->channels.dev.data();
  comm->devComm.spinPolls = commSpinPolls(comm);
  comm->devCommForKernels = &comm->devComm;
  comm->channels.live = comm->channels.dev.data();
  p2pHostOpsInit(comm, &comm->p2pHostOps);
  if (comm->backend == plexusBackendCuda) NCCLCHECK(devStateInit(comm));
  comm->workFifo = std::make_unique<WorkFifo>(1024, comm->runtime);
  if (!comm->workFifo->ok())
    return setError(comm, ncclSystemError, "rank %d: cannot allocate the workFifo: %s", comm->rank,
                    comm->runtime->lastError().c_str());
  comm->launcher = std::make_unique<Launcher>(comm);
  NCCLCHECK(comm->launcher->init());
  if (comm->backend == plexusBackendHost) comm->executor = std::make_unique<HostExecutor>(comm);
  NCCLCHECK(healthInit(comm));

  INFO(NCCL_INIT, "comm %p rank %d nRanks %d nNodes %d localRanks %d device %d backend %s commId 0x%llx - Init COMPLETE"
       " (%d channel(s), %zu B per connection, %d LL slots between host ranks)", (void*)comm, comm->rank, comm->nRanks,
       comm->topo.nNodes, comm->topo.nLocalRanks, comm->device, comm->runtime->name(),
       (unsigned long long)comm->commHash, comm->channels.count, comm->buffSize, comm->llSlots);
  return ncclSuccess;
}

}  // namespace

uint32_t commSpinPolls(const ncclComm* comm) {
  // A spinning wait where the node's threads outnumber its cores would take the core its peer needs to progress.
  const bool shared = comm->topo.coresShared(comm->channels.count, comm->proxyConnections > 0);
  return (uint32_t)envInt("SPIN", shared ? PLEXUS_SPIN_SHARED : 1 << 15);
}

void commRunInit(ncclComm* comm, std::vector<ncclUniqueId> ids) {
  ncclResult_t r = commInitImpl(comm, ids);
  if (r == ncclSuccess) {
    comm->state = ncclComm::State::Ready;
  } else {
    comm->asyncError = r;
    comm->state = ncclComm::State::Failed;
  }
}

namespace {
std::mutex liveMutex;
std::unordered_set<const ncclComm*>& liveComms() {
  static auto* set = new std::unordered_set<const ncclComm*>();
  return *set;
}
// Bumped whenever a communicator leaves the set: a thread's cached "live" answer holds while the epoch
// does, so every API call checks its handle without taking the lock.
std::atomic<uint64_t> liveEpoch{0};
}  // namespace

void commRegister(ncclComm* comm, bool live) {
  std::lock_guard<std::mutex> lock(liveMutex);
  if (live) {
    liveComms().insert(comm);
  } else {
    liveComms().erase(comm);
    liveEpoch.fetch_add(1, std::memory_order_acq_rel);
  }
}

bool commCudaKernelsBusy() {
  std::lock_guard<std::mutex> lock(liveMutex);
  for (const ncclComm* c : liveComms())
    // Only a ready communicator's launcher is safe to look at from here (init may still be building it).
    if (c->backend == plexusBackendCuda && c->state.load() == ncclComm::State::Ready && c->launcher &&
        !c->launcher->waitIdle(0))
      return true;
  return false;
}

bool commIsLive(const ncclComm* comm) {
  // One thread-local: each costs a call to find it.
  thread_local struct {
    const ncclComm* comm;
    uint64_t epoch;
  } cached{nullptr, 0};
  const uint64_t epoch = liveEpoch.load(std::memory_order_acquire);
  if (comm == cached.comm && epoch == cached.epoch) return true;
  std::lock_guard<std::mutex> lock(liveMutex);
  if (!liveComms().count(comm)) return false;
  cached.comm = comm;
  cached.epoch = epoch;
  return true;
}

ncclResult_t checkComm(ncclComm* comm, const char* api, bool requireReady) {
  if (!comm) return setError(nullptr, ncclInvalidArgument, "%s: comm is NULL", api);
  if (!commIsLive(comm))
    return setError(nullptr, ncclInvalidArgument, "%s: %p is not a communicator (destroyed, or never created)", api,
                    (void*)comm);
  if (requireReady) {
    ncclComm::State s = comm->state.load();
    if (s == ncclComm::State::Initializing)
      return setError(comm, ncclInvalidUsage, "%s: the communicator is still initializing; poll "
                      "ncclCommGetAsyncError until it returns ncclSuccess", api);
    if (s == ncclComm::State::Failed)
      return setError(comm, ncclInvalidUsage, "%s: the communicator failed to initialize (%s); destroy it", api,
                      ncclGetErrorString(comm->asyncError.load()));
  }
  return ncclSuccess;
}

void commFree(ncclComm* comm) {
  if (comm->initThread.joinable()) comm->initThread.join();
  DeviceGuard device(comm);  // its memory and events are the device's
  healthFinalize(comm);
  if (comm->kernelsStuck) {  // what running kernels may still read or write stays
    (void)comm->launcher.release();
    (void)comm->workFifo.release();
    (void)comm->deviceState.release();
  }
  comm->launcher.reset();
  comm->executor.reset();
  comm->workFifo.reset();
  devStateFree(comm);
  // A connection left to a stuck proxy still uses its transport's per-communicator state: leak that too.
  const bool oneSidedReleased = rmaFree(comm);
  if (transportFreeAll(comm) && oneSidedReleased) transportCommFinalize(comm);
  for (AlgoInstance& a : comm->algos)
    if (a.ctx) a.plugin->api->finalize(a.ctx);
  comm->algos.clear();
  profilerCommFinalize(comm);
  comm->bootstrap.reset();
}

ncclResult_t parseCommConfig(const ncclConfig_t* config, const char* api, int* blocking, CommOptions* options) {
  if (!config) return ncclSuccess;
  if (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, splitShare))
    return setError(nullptr, ncclInvalidArgument,
                    "%s: config was not initialised with NCCL_CONFIG_INITIALIZER (magic 0x%x, size %zu)", api,
                    config->magic, config->size);
  if (config->blocking != NCCL_CONFIG_UNDEF_INT) {
    if (config->blocking != 0 && config->blocking != 1)
      return setError(nullptr, ncclInvalidArgument, "%s: config.blocking=%d must be 0 or 1", api, config->blocking);
    *blocking = config->blocking;
  }
  // A field is read when the program's config has it: its size covers the field and its version (the
  // NCCL_VERSION_CODE of the header the program was built on) is one that has it, as NCCL decides.
  auto has = [&](size_t offset, size_t size, unsigned since) {
    return config->size >= offset + size && config->version >= since;
  };
  if (has(offsetof(ncclConfig_t, netName), sizeof(char*), 0) && config->netName) options->netName = config->netName;
  if (has(offsetof(ncclConfig_t, commName), sizeof(char*), 22700) && config->commName)
    options->name = config->commName;
  if (has(offsetof(ncclConfig_t, trafficClass), sizeof(int), 22700) && config->trafficClass != NCCL_CONFIG_UNDEF_INT)
    options->trafficClass = config->trafficClass;
  if (has(offsetof(ncclConfig_t, numRmaCtx), sizeof(int), 22900) && config->numRmaCtx != NCCL_CONFIG_UNDEF_INT) {
    if (config->numRmaCtx < 1 || config->numRmaCtx > 64)
      return setError(nullptr, ncclInvalidArgument, "%s: config.numRmaCtx=%d must be in [1, 64]", api,
                      config->numRmaCtx);
    options->numRmaCtx = config->numRmaCtx;
  }
  return ncclSuccess;
}

ncclResult_t commInitRankIds(ncclComm_t* out, int nranks, int rank, const ncclUniqueId* ids, int nIds,
                             const ncclConfig_t* config, const char* api) {
  if (!out) return setError(nullptr, ncclInvalidArgument, "%s: comm is NULL", api);
  *out = nullptr;
  if (const ncclResult_t r = envPluginCheck(); r != ncclSuccess)
    return setError(nullptr, r, "%s: the env plugin's init failed (NCCL_ENV_PLUGIN); fix it or set "
                    "NCCL_ENV_PLUGIN=none", api);
  if (nranks < 1) return setError(nullptr, ncclInvalidArgument, "%s: nranks %d must be at least 1", api, nranks);
  if (rank < 0 || rank >= nranks)
    return setError(nullptr, ncclInvalidArgument, "%s: rank %d is out of range [0, %d)", api, rank, nranks);
  for (int i = 0; i < nIds; i++)
    if (!handleValid(ids[i]))
      return setError(nullptr, ncclInvalidArgument,
                      "%s: the unique id%s was not made by ncclGetUniqueId (bad magic or checksum); pass the id "
                      "rank 0 got from ncclGetUniqueId, unchanged, to every rank",
                      api, nIds > 1 ? (" commIds[" + std::to_string(i) + "]").c_str() : "");
  int blocking = 1;
  CommOptions options;
  NCCLCHECK(parseCommConfig(config, strcmp(api, "ncclCommInitRank") == 0 ? "ncclCommInitRankConfig" : api, &blocking,
                            &options));
  plexusBackend_t backend;
  int device;
  NCCLCHECK(chooseBackend(&backend, &device));
  auto* comm = new ncclComm();
  comm->rank = rank;
  comm->nRanks = nranks;
  comm->backend = backend;
  comm->device = device;
  deviceRuntime(backend, &comm->runtime);
  comm->blocking = blocking;
  comm->options = options;
  if (envGet("COMM_ID") && rank == 0 && nIds == 1) {
    // With NCCL_COMM_ID every rank computed the same id; rank 0 serves it.
    ncclResult_t r = bootstrapCreateRoot(ids[0], true);
    if (r != ncclSuccess) {
      delete comm;
      return r;
    }
  }
  std::vector<ncclUniqueId> idList(ids, ids + nIds);
  commRegister(comm, true);
  if (!blocking || groupDepth() > 0) {
    comm->initThread = std::thread(commRunInit, comm, std::move(idList));
    *out = comm;
    if (groupDepth() > 0) {
      groupAddInit(comm);
      return blocking ? ncclSuccess : ncclInProgress;
    }
    return ncclInProgress;
  }
  commRunInit(comm, std::move(idList));
  if (comm->state != ncclComm::State::Ready) {
    ncclResult_t r = comm->asyncError.load();
    commRegister(comm, false);
    commFree(comm);
    delete comm;
    return r;
  }
  *out = comm;
  return ncclSuccess;
}

ncclResult_t commInitRank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, const ncclConfig_t* config) {
  return commInitRankIds(out, nranks, rank, &id, 1, config, "ncclCommInitRank");
}


}  // namespace plexus
