#include "planner.h"

#include <plexus/device/p2p.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <set>
#include <string>

#include "comm/communicator.h"
#include "device/runtime.h"
#include "group/group.h"
#include "misc/check.h"
#include "misc/env.h"
#include "misc/rand.h"
#include "planner/launch.h"
#include "plugin/loader.h"
#include "plugin/net.h"
#include "profiler/profiler.h"
#include "transport/transport.h"

namespace plexus {

const char* funcName(ncclFunc_t func) {
  static const char* names[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", "SendRecv",
                                "Send",      "Recv",   "AlltoAll",  "Scatter",       "Gather"};
  return func >= 0 && func < ncclNumFuncs ? names[func] : "Unknown";
}

const char* typeName(ncclDataType_t type) {
  // NCCL's enum order.
  static const char* names[] = {"int8",    "uint8",   "int32",   "uint32",   "int64",      "uint64",
                                "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return type >= 0 && type < (int)(sizeof names / sizeof names[0]) ? names[type] : "unknown";
}

const char* protoName(int proto) {
  static const char* names[] = {"LL", "LL128", "Simple"};
  return proto >= 0 && proto < PLEXUS_NUM_PROTOCOLS ? names[proto] : "Unknown";
}

size_t collectiveBytes(ncclFunc_t func, size_t count, ncclDataType_t type, int nRanks) {
  size_t bytes = count * typeSize(type);
  switch (func) {
    case ncclFuncAllGather:
    case ncclFuncReduceScatter:
    case ncclFuncAlltoAll:
      return bytes * nRanks;
    default:
      return bytes;
  }
}

namespace {

bool isP2p(ncclFunc_t func) { return func == ncclFuncSend || func == ncclFuncRecv; }

}  // namespace

namespace {

// Step 3 of tuning: the tuner plugin NCCL_TUNER_PLUGIN, else the configuration's plugins.tuner, else
// the default name, names. Ranks must decide alike, so it runs only if every rank started the same
// one; otherwise no rank uses it.
ncclResult_t startTuner(ncclComm* comm) {
  std::string spec, source = "default";
  if (auto env = envGet("TUNER_PLUGIN")) {
    spec = *env;
    source = "NCCL_TUNER_PLUGIN=" + spec;
  } else if (!comm->config->tuner.empty()) {
    spec = comm->config->tuner;
    source = "plugins.tuner of " + comm->config->path;
  }
  const TunerPlugin* plugin = loadTuner(spec, source, nullptr, netPluginSpec(comm->config->net));
  // NVLink domains: Plexus's are its nodes.
  ncclNvlDomainInfo_v6_t nvl{comm->topo.nNodes, comm->nRanks, 0};
  for (int n = 0; n < comm->topo.nNodes; n++) {
    const int ranks = (int)std::count(comm->topo.rankNode.begin(), comm->topo.rankNode.end(), n);
    nvl.minRanksPerNvlDomain = std::min(nvl.minRanksPerNvlDomain, ranks);
    nvl.maxRanksPerNvlDomain = std::max(nvl.maxRanksPerNvlDomain, ranks);
  }
  bool started = false;
  NCCLCHECK(tuningStartTuner(&comm->tuning, plugin, comm->commHash, nvl, &started));
  std::vector<uint64_t> ids(comm->nRanks);
  const uint64_t mine = started ? hashCombine(hashBytes(plugin->name.data(), plugin->name.size()), plugin->version) : 0;
  ids[comm->rank] = mine;
  NCCLCHECK(comm->bootstrap->allGather(ids.data(), sizeof(uint64_t)));
  std::string others;
  for (int r = 0; r < comm->nRanks; r++)
    if (ids[r] != mine) others += (others.empty() ? "" : ",") + std::to_string(r);
  if (others.empty()) return ncclSuccess;
  if (started)
    WARN(
        "%s: not used: rank(s) %s run without it or with another tuner, and every rank must choose alike; load "
        "the same tuner plugin on every rank (NCCL_TUNER_PLUGIN)",
        plugin->label.c_str(), others.c_str());
  tuningStopTuner(&comm->tuning);
  return ncclSuccess;
}

// Each rank decides every operation alone; ranks whose decisions rest on different inputs would run different
// algorithms for one collective and hang. Compared across ranks once, at init: a difference fails init on every
// rank, naming both inputs.
ncclResult_t checkInputsAlike(ncclComm* comm) {
  struct Inputs {
    uint64_t hash;
    char text[504];
  };
  std::vector<Inputs> all(comm->nRanks);
  std::string mine = tuningInputs(comm->tuning);
  mine += "; NCCL_P2P_LL_THRESHOLD=";
  mine += std::to_string(comm->planner.p2pLLThreshold);
  Inputs& me = all[comm->rank];
  me.hash = hashBytes(mine.data(), mine.size());
  snprintf(me.text, sizeof me.text, "%s", mine.c_str());
  NCCLCHECK(comm->bootstrap->allGather(all.data(), sizeof(Inputs)));
  for (int r = 0; r < comm->nRanks; r++)
    if (all[r].hash != me.hash)
      return setError(comm, ncclInvalidUsage,
                      "rank %d and rank %d would choose algorithms differently: rank %d has %s; rank %d has %s. Set "
                      "NCCL_ALGO, NCCL_PROTO, PLEXUS_P2P_COLLECTIVES, PLEXUS_MIN_CHANNEL_BYTES, NCCL_P2P_LL_THRESHOLD, "
                      "PLEXUS_ALGORITHMS and the configuration file's tuning rules alike on every rank",
                      comm->rank, r, comm->rank, me.text, r, all[r].text);
  return ncclSuccess;
}

}  // namespace

// NCCL_P2P_LL_THRESHOLD's default. NCCL's is 16 KiB; between CPU cores LL lines double the cache lines a message
// takes, which from 128 B on costs more than the one LL saves (2 ranks, sendrecv, us: 64 B 0.83 -> 0.79, 128 B
// 0.84 -> 0.89, 512 B 0.93 -> 1.25; 8 B 0.83 -> 0.64).
constexpr int64_t kP2pLLThreshold = 64;

ncclResult_t plannerInit(ncclComm* comm) {
  comm->tuning.comm = comm;
  NCCLCHECK(tuningInit(&comm->tuning, &comm->algos, comm->config, comm->rank, comm->nRanks, comm->topo.nNodes,
                       comm->channels.count, comm->buffSize / PLEXUS_STEPS));
  comm->planner.checkArgs = envInt("CHECK_MODE", 0) != 0;
  // Unset: where the node's ranks are threads of one process (or GPUs), whose parts cross by a plain copy into the
  // receiver's buffer. Not between host processes: there a part crosses by process_vm_writev or through the slots,
  // and on the CI machine both lose to the ring's pipeline (2 ranks, malloc'ed buffers, busbw against Open MPI's:
  // AllGather 1 MiB 1.08 -> 1.52, 64 MiB 1.22 -> 1.84, Broadcast 256 KiB 0.91 -> 1.55; 4 ranks AllGather 1 MiB 1.12
  // -> 2.26). A peer's registered buffer (mapped, as fast as a thread's) would win, but no rank knows whether its
  // peers' buffers are registered, and all must decide alike.
  const int64_t p2pCollectives = envInt("P2P_COLLECTIVES", -1);
  comm->planner.p2pCollectives =
      p2pCollectives < 0 ? comm->topo.deviceChannels || comm->topo.machineProcs == 1 : p2pCollectives != 0;
  comm->planner.p2pLLThreshold = (size_t)std::max<int64_t>(0, envInt("P2P_LL_THRESHOLD", kP2pLLThreshold));
  // PLEXUS_P2P_COLLECTIVES=0 keeps collectives off algo-p2p (its sends and receives stay).
  if (!comm->planner.p2pCollectives && comm->p2pAlgo >= 0) comm->tuning.algoAllowed[comm->p2pAlgo] = false;
  NCCLCHECK(checkInputsAlike(comm));
  NCCLCHECK(startTuner(comm));
  return ncclSuccess;
}

namespace {

// Debug mode (PLEXUS_CHECK_MODE=1): every rank compares the collectives of the group with every other
// rank's before launching anything, so a mismatch is an error naming rank and argument, not a hang
// or garbage.
ncclResult_t crossCheck(ncclComm* comm, const std::vector<Task>& tasks) {
  struct Sig {
    int32_t func, datatype, redop, root;
    uint64_t count;
  };
  std::vector<const Task*> colls;
  for (const Task& t : tasks)
    if (!isP2p(t.func)) colls.push_back(&t);
  const int n = comm->nRanks;
  std::vector<int32_t> counts(n);
  counts[comm->rank] = (int32_t)colls.size();
  NCCLCHECK(comm->bootstrap->allGather(counts.data(), sizeof(int32_t)));
  for (int r = 0; r < n; r++)
    if (counts[r] != counts[comm->rank])
      return setError(comm, ncclInvalidUsage,
                      "check mode: rank %d has %d collective(s) in this group, rank %d has %d: every rank must call "
                      "the same collectives in the same order",
                      r, counts[r], comm->rank, counts[comm->rank]);
  for (size_t k = 0; k < colls.size(); k++) {
    const Task& t = *colls[k];
    std::vector<Sig> sigs(n);
    sigs[comm->rank] = Sig{(int32_t)t.func, (int32_t)t.datatype, (int32_t)t.devOp, (int32_t)t.root, (uint64_t)t.count};
    NCCLCHECK(comm->bootstrap->allGather(sigs.data(), sizeof(Sig)));
    const Sig& me = sigs[comm->rank];
    for (int r = 0; r < n; r++) {
      const Sig& o = sigs[r];
      const char* what = o.func != me.func           ? "collective"
                         : o.datatype != me.datatype ? "datatype"
                         : o.redop != me.redop       ? "reduction op"
                         : o.root != me.root         ? "root"
                         : o.count != me.count       ? "count"
                                                     : nullptr;
      if (what)
        return setError(comm, ncclInvalidUsage,
                        "check mode: collective #%zu of the group differs in its %s: rank %d calls %s(count %llu, "
                        "datatype %d, op %d, root %d), rank %d calls %s(count %llu, datatype %d, op %d, root %d)",
                        k, what, r, funcName((ncclFunc_t)o.func), (unsigned long long)o.count, o.datatype, o.redop,
                        o.root, comm->rank, funcName((ncclFunc_t)me.func), (unsigned long long)me.count, me.datatype,
                        me.redop, me.root);
    }
  }
  return ncclSuccess;
}

}  // namespace

namespace {

ncclResult_t decide(ncclComm* comm, const Task& task, Decision* d) {
  const size_t bytes = collectiveBytes(task.func, task.count, task.datatype, comm->nRanks);
  return tuningDecide(comm->tuning, task.func, bytes, d);
}

// A collective the tuner gave to algo-p2p (an AllGather, or a Broadcast between two ranks, large enough to go
// zero-copy within one node: its cost model) runs as that rank's sends and receives. Every rank decides alike from
// the same inputs (plannerInit checks that they are the same on every rank).
bool lowersToP2p(ncclComm* comm, const Task& t, const Decision& d) {
  return (t.func == ncclFuncAllGather || t.func == ncclFuncBroadcast) && comm->p2pAlgo >= 0 && d.algo == comm->p2pAlgo;
}

// Appends the sends and receives that do t (lowersToP2p), this rank's own part as a send to itself.
void lowerToP2p(ncclComm* comm, const Task& t, uint32_t unit, const char* why, std::vector<Task>* out) {
  const size_t bytes = t.count * typeSize(t.datatype);
  auto add = [&](ncclFunc_t func, int peer, const void* buf) {
    Task p = t;
    p.unit = unit;
    p.loweredBy = why;
    p.func = func;
    p.peer = peer;
    p.root = -1;
    p.devOp = plexusDevSum;
    p.sendbuff = func == ncclFuncSend ? buf : nullptr;
    p.recvbuff = func == ncclFuncRecv ? const_cast<void*>(buf) : nullptr;
    out->push_back(p);
  };
  if (t.func == ncclFuncBroadcast) {  // two ranks
    if (comm->rank == t.root) {
      add(ncclFuncSend, 1 - t.root, t.sendbuff);
      add(ncclFuncSend, t.root, t.sendbuff);
      add(ncclFuncRecv, t.root, t.recvbuff);
    } else {
      add(ncclFuncRecv, t.root, t.recvbuff);
    }
    return;
  }
  for (int k = 0; k < comm->nRanks; k++) {  // from this rank on, so that ranks start on different peers
    const int p = (comm->rank + k) % comm->nRanks;
    add(ncclFuncSend, p, t.sendbuff);
    add(ncclFuncRecv, p, (char*)t.recvbuff + (size_t)p * bytes);
  }
}

}  // namespace

// From PLEXUS_P2P_ZERO_COPY_MIN_BYTES on, a send crosses once (zero-copy) where a collective's step loop copies into
// slots and out again. Below, one collective is one work where grouped sends and receives are two per rank, and it
// takes LL where the blocks are small (2 ranks, us: 64 B 0.58 -> 0.48, 512 B 0.77 -> 0.63, 2 KiB 1.01 -> 0.75, 16 KiB
// 2.03 -> 1.22; alike from 32 KiB blocks on). Where the node's ranks share cores, grouped sends and receives serve
// whichever peer has run, where the collective waits for each in turn (4 ranks on 2 cores, us: 64 B 15.1 against
// 16.2, 4 KiB 9.7 against 11.7). The CUDA backend keeps them too until a GPU has run the one-shot kernel.
bool alltoAllAsCollective(ncclComm* comm, size_t bytesPerPeer) {
  return comm->backend == plexusBackendHost && !comm->topo.coresShared(comm->channels.count) &&
         bytesPerPeer < PLEXUS_P2P_ZERO_COPY_MIN_BYTES &&
         tuningServes(comm->tuning, ncclFuncAlltoAll, bytesPerPeer * comm->nRanks);
}

float plannerEstimate(ncclComm* comm, const Task& task) {
  Decision d;
  if (!isP2p(task.func) && decide(comm, task, &d) == ncclSuccess) return d.timeUs;
  return 2.0f + (float)collectiveBytes(task.func, task.count, task.datatype, comm->nRanks) / 6e3f;
}

namespace {

// The profiler's Group event around one communicator's launches (no parent; its Coll and P2p events name it as
// parentGroup).
struct ProfiledGroup {
  ncclComm* comm;
  void* handle = nullptr;
  ProfiledGroup(ncclComm* c, int mask) : comm(c) {
    if (!(mask & kProfileGroupTree)) return;
    ncclProfilerEventDescr_v6_t d{};
    d.type = ncclProfileGroup;
    handle = profilerStart(comm, &d);
  }
  ~ProfiledGroup() { profilerStop(comm, handle); }
};

// NCCL's algorithm names for ours ("RING", "TREE", ...), kept for the process: plugins may keep the pointers.
const char* profilerAlgoName(const std::string& name) {
  static std::mutex mu;
  static std::set<std::string>* names = new std::set<std::string>();
  std::string upper = name;
  for (char& c : upper) c = (char)toupper((unsigned char)c);
  std::lock_guard<std::mutex> lock(mu);
  return names->insert(upper).first->c_str();
}

// A Coll or P2p event: started and stopped at once, as NCCL's mean "handed to the device" (its children, where
// there are any, come later and name it as parent).
void profileEnqueued(ncclComm* comm, const Task& t, const Decision& d, uint64_t opSeq, void* group) {
  ncclProfilerEventDescr_v6_t e{};
  e.rank = comm->rank;
  e.parentObj = t.profApi;
  if (isP2p(t.func)) {
    e.type = ncclProfileP2p;
    e.p2p.func = funcName(t.func);
    e.p2p.buff = t.func == ncclFuncSend ? const_cast<void*>(t.sendbuff) : t.recvbuff;
    e.p2p.datatype = profilerTypeName(t.datatype);
    e.p2p.count = t.count;
    e.p2p.peer = t.peer;
    e.p2p.nChannels = (uint8_t)d.nChannels;
    e.p2p.parentGroup = group;
  } else {
    e.type = ncclProfileColl;
    e.coll.seqNumber = comm->profilerSeq[t.func]++;
    e.coll.func = funcName(t.func);
    e.coll.sendBuff = t.sendbuff;
    e.coll.recvBuff = t.recvbuff;
    e.coll.count = t.count;
    e.coll.root = t.root;
    e.coll.datatype = profilerTypeName(t.datatype);
    e.coll.nChannels = (uint8_t)d.nChannels;
    e.coll.nWarps = (uint8_t)(comm->backend == plexusBackendCuda ? comm->launcher->threads() / 32 : 1);
    e.coll.algo = profilerAlgoName(comm->algos[d.algo].plugin->name);
    e.coll.proto = profilerProtoName(d.proto);
    e.coll.parentGroup = group;
  }
  void* handle = profilerStart(comm, &e);
  comm->profilerOps[opSeq % ncclComm::kProfilerOps] = handle;
  profilerStop(comm, handle);
}

}  // namespace

namespace {

// The fields of t's work that the task sets and the decision does not: what a repeat of a launch changes
// (Launcher::repeatable).
void fillTaskFields(ncclComm* comm, const Task& t, plexusDevWork_v1_t* w) {
  w->redop = (uint8_t)t.devOp;
  w->root = t.root;
  w->peer = t.peer;
  w->redOpArg = t.redOpArg;
  w->flags = t.redOpArgIsPtr ? PLEXUS_WORK_REDOP_ARG_PTR : 0;
  w->sendbuff = t.sendbuff;
  w->recvbuff = t.recvbuff;
  w->opSeq = comm->opCount++;
  TRACE(NCCL_COLL,
        "%s opSeq %llu count %zu datatype %d op %d root %d sendbuff %p recvbuff %p -> %s/%s on %d channel(s), chunk "
        "%zu B",
        funcName(t.func), (unsigned long long)w->opSeq, t.count, (int)t.datatype, (int)t.userOp, t.root, t.sendbuff,
        t.recvbuff, comm->lastDecision.algorithm, comm->lastDecision.protocol, comm->lastDecision.nChannels,
        comm->lastDecision.chunkBytes);
}

// A work descriptor for task t as decided (d).
void fillWork(ncclComm* comm, const Task& t, const Decision& d, plexusDevWork_v1_t* w) {
  w->func = (uint8_t)t.func;
  w->datatype = (uint8_t)t.datatype;
  w->proto = (uint8_t)d.proto;
  w->channelLo = 0;
  w->nChannels = (uint8_t)d.nChannels;
  w->algorithm = (uint8_t)d.algo;
  w->count = t.count;
  w->chunkCount = std::max<size_t>(d.chunkBytes / typeSize(t.datatype), 1);
  comm->lastDecision = plexusDecision_t{isP2p(t.func) ? "p2p" : comm->algos[d.algo].plugin->name.c_str(),
                                        protoName(d.proto), d.nChannels, d.chunkBytes, d.reason};
  fillTaskFields(comm, t, w);
}

// Connects the peers of tasks' sends and receives, then launches tasks: kept collectives first (tasks[k] decided as
// decisions[k] for k < kept), then the lowered collectives' and the application's sends and receives.
ncclResult_t launchTasks(ncclComm* comm, std::vector<Task>& tasks, const std::vector<Decision>& decisions,
                         size_t kept) {
  if (!tasks.empty() && isP2p(tasks.back().func)) {
    std::vector<ConnectRequest>& p2pConnectors = comm->plannedConnects;  // kept: no allocation once grown
    p2pConnectors.clear();
    for (const Task& t : tasks)
      if (isP2p(t.func)) p2pConnectors.push_back({0, t.peer, t.func == ncclFuncSend});
    NCCLCHECK(transportConnectP2p(comm, p2pConnectors));
  }
  const int profMask = profilerMask();
  ProfiledGroup group(comm, profMask);
  size_t i = 0;
  std::vector<plexusDevWork_v1_t>& works = comm->plannedWorks;
  while (i < tasks.size()) {
    // One launch per run of consecutive tasks on the same stream, bounded by half the workFifo, and by what the
    // point-to-point step loop holds on a channel where its sends and receives begin.
    size_t j = i;
    size_t limit = comm->workFifo->capacity() / 2;
    while (j < tasks.size() && tasks[j].stream == tasks[i].stream && j - i < limit) {
      if (isP2p(tasks[j].func)) limit = std::min<size_t>(limit, j - i + PLEXUS_P2P_MAX_WORKS);
      j++;
    }
    if (j < tasks.size() && tasks[j].unit && tasks[j].unit == tasks[j - 1].unit) {
      size_t start = j - 1;  // a lowered collective's unit is not split over two launches
      while (start > i && tasks[start - 1].unit == tasks[j].unit) start--;
      if (start > i) j = start;
    }
    works.assign(j - i, plexusDevWork_v1_t{});
    for (size_t k = 0; k < j - i; k++) {
      const Task& t = tasks[i + k];
      const Decision d = i + k < kept ? decisions[i + k]
                                      : Decision{comm->p2pAlgo,
                                                 t.count * typeSize(t.datatype) <= comm->planner.p2pLLThreshold
                                                     ? PLEXUS_PROTO_LL
                                                     : PLEXUS_PROTO_SIMPLE,
                                                 1,
                                                 comm->buffSize / PLEXUS_STEPS,
                                                 0,
                                                 t.unit && t.loweredBy ? t.loweredBy : "p2p"};
      fillWork(comm, t, d, &works[k]);
      if (profMask & (isP2p(t.func) ? kProfileP2pTree : kProfileCollTree)) [[unlikely]]
        profileEnqueued(comm, t, d, works[k].opSeq, group.handle);
    }
    void* launch = nullptr;
    if (profMask & ncclProfileKernelLaunch) [[unlikely]] {
      ncclProfilerEventDescr_v6_t e{};
      e.type = ncclProfileKernelLaunch;
      e.parentObj = groupApiEvent();
      e.kernelLaunch.stream = tasks[i].stream;
      launch = profilerStart(comm, &e);
    }
    const ncclResult_t launched = comm->launcher->launch(tasks[i].stream, works.data(), (uint32_t)works.size());
    profilerStop(comm, launch);
    NCCLCHECK(launched);
    i = j;
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t planAndLaunch(ncclComm* comm) {
  // Connections made on demand and the launches belong to the communicator's device.
  DeviceGuard device(comm);
  NCCLCHECK(device.result());
  // The two vectors trade places, so neither allocates once both have grown to the usual group size.
  std::vector<Task>& tasks = comm->plannedTasks;
  tasks.clear();
  tasks.swap(comm->tasks);
  // Collectives first, then point-to-point, each in call order: ranks may interleave their sends
  // and receives differently, and every rank must see the collectives in the same order.
  auto isColl = [](const Task& t) { return !isP2p(t.func); };
  if (!std::is_partitioned(tasks.begin(), tasks.end(), isColl))
    std::stable_partition(tasks.begin(), tasks.end(), isColl);
  if (comm->planner.checkArgs) NCCLCHECK(crossCheck(comm, tasks));
  // Lowered collectives go after the kept ones and before the application's sends and receives (whose
  // number may differ between ranks), so that their units sit at the same places on every rank.
  const size_t nColl = std::partition_point(tasks.begin(), tasks.end(), isColl) - tasks.begin();
  // Each kept collective's decision, made once: decisions[k] for tasks[k].
  std::vector<Decision>& decisions = comm->plannedDecisions;
  decisions.resize(nColl);
  std::vector<Task> lowered;
  uint32_t unit = 0;
  size_t kept = 0;
  for (size_t k = 0; k < nColl; k++) {
    Decision d;
    NCCLCHECK(decide(comm, tasks[k], &d));
    if (lowersToP2p(comm, tasks[k], d)) {
      lowerToP2p(comm, tasks[k], ++unit, d.reason, &lowered);
      continue;
    }
    decisions[kept] = d;
    if (kept++ != k) tasks[kept - 1] = tasks[k];  // behind a lowered one only: the usual launch keeps every task where it is
  }
  if (unit) {
    tasks.erase(tasks.begin() + kept, tasks.begin() + nColl);
    tasks.insert(tasks.begin() + kept, lowered.begin(), lowered.end());
  }
  return launchTasks(comm, tasks, decisions, kept);
}

ncclResult_t planAndLaunchOne(ncclComm* comm, const Task& t) {
  // Sends and receives connect on demand, check mode exchanges signatures, and the profiler's events want the
  // group's: the general path. A lone collective is most calls, and launches here without the group's vectors.
  if (isP2p(t.func) || comm->planner.checkArgs || profilerMask()) {
    comm->tasks.push_back(t);
    return planAndLaunch(comm);
  }
  // The host backend's streams need no current device.
  if (plexusDevWork_v1_t* w = comm->launcher->repeatable(t.stream, t.func, t.datatype, t.count)) {
    fillTaskFields(comm, t, w);
    return comm->launcher->relaunch();
  }
  DeviceGuard device(comm);
  NCCLCHECK(device.result());
  Decision d;
  NCCLCHECK(decide(comm, t, &d));
  if (lowersToP2p(comm, t, d)) [[unlikely]] {
    std::vector<Task>& tasks = comm->plannedTasks;
    tasks.clear();
    lowerToP2p(comm, t, 1, d.reason, &tasks);
    return launchTasks(comm, tasks, comm->plannedDecisions, 0);
  }
  plexusDevWork_v1_t w{};
  fillWork(comm, t, d, &w);
  return comm->launcher->launch(t.stream, &w, 1);
}

}  // namespace plexus
