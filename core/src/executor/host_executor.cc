#include "host_executor.h"

#include <plexus/device/arch.h>
#include <plexus/device/kernel.h>
#include <plexus/device/p2p.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/communicator.h"
#include "health/health.h"
#include "misc/check.h"
#include "misc/env.h"
#include "planner/planner.h"
#include "profiler/profiler.h"
#include "proxy/proxy.h"

namespace plexus {

static_assert(HostJoin::kMaxWorks <= PLEXUS_P2P_MAX_WORKS, "a pass of joined launches outgrows the step loop");

HostExecutor::HostExecutor(ncclComm* comm)
    : comm_(comm),
      kernel_{&HostExecutor::runKernel, this, &HostExecutor::joinKernel},
      joins_(envInt("P2P_JOIN", 1) != 0) {
  workers_.resize(comm->channels.count);
  activity_ = std::make_unique<Activity[]>(comm->channels.count);
  // Channel 0, when a launch has it, is always its lowest: it runs on the stream's thread, never on a worker.
  for (int c = 1; c < comm->channels.count; c++) {
    workers_[c] = std::make_unique<Worker>();
    workers_[c]->thread = std::thread([this, c] { workerLoop(c); });
  }
}

HostExecutor::~HostExecutor() {
  for (auto& wk : workers_) {
    if (!wk) continue;
    {
      std::lock_guard<std::mutex> lock(wk->mu);
      wk->stop = true;
    }
    wk->cv.notify_one();
    wk->thread.join();
  }
}

ncclResult_t HostExecutor::runKernel(void* self, const void* args, size_t, unsigned) {
  return static_cast<HostExecutor*>(self)->run(static_cast<const plexusDevKernelArgs_v1_t*>(args));
}

bool HostExecutor::joinKernel(void* self, HostJoin* pass, const void* args) {
  return static_cast<HostExecutor*>(self)->join(pass, static_cast<const plexusDevKernelArgs_v1_t*>(args));
}

namespace {

struct Range {
  uintptr_t begin, end;
  bool writes;  // a receive
  int peer;
};

Range rangeOf(const plexusDevWork_v1_t& w) {
  const bool recv = w.func == ncclFuncRecv;
  const uintptr_t p = (uintptr_t)(recv ? w.recvbuff : w.sendbuff);
  return Range{p, p + (uintptr_t)(w.count * typeSize((ncclDataType_t)w.datatype)), recv, w.peer};
}

}  // namespace

// A launch joins the ones before it on the stream where running them as one pass of the point-to-point step loop
// cannot change what any computes. That loop keeps each (peer, direction)'s messages in order, and nothing else: so
// all are sends and receives alone, of one algorithm, on the same channels, and no receive of one may write memory
// that another reads or writes, save a receive from the same peer into the same bytes (the same queue, in order: a
// benchmark's repeated operation). Not under a profiler, whose events are per launch; not for works in the workFifo,
// which a launch's completion frees.
bool HostExecutor::join(HostJoin* pass, const plexusDevKernelArgs_v1_t* next) {
  if (!joins_ || profilerMask() != 0 || next->storage != PLEXUS_WORK_STORAGE_ARGS || next->nWorks == 0) return false;
  plexusDevKernelArgs_v1_t& acc = pass->args;
  const int algorithm = acc.nWorks ? acc.works[0].algorithm : next->inlineWorks[0].algorithm;
  for (uint32_t j = 0; j < next->nWorks; j++) {
    const plexusDevWork_v1_t& w = next->inlineWorks[j];
    if ((w.func != ncclFuncSend && w.func != ncclFuncRecv) || w.algorithm != algorithm) return false;
  }
  if (acc.nWorks == 0) {  // the pass's first launch
    memcpy(&acc, next, offsetof(plexusDevKernelArgs_v1_t, inlineWorks));
    acc.storage = PLEXUS_WORK_STORAGE_PERSISTENT;
    acc.works = pass->works;
    memcpy(pass->works, next->inlineWorks, next->nWorks * sizeof(plexusDevWork_v1_t));
    acc.nWorks = next->nWorks;
    return true;
  }
  if (acc.channelMask != next->channelMask || acc.hostOps != next->hostOps || acc.comm != next->comm ||
      acc.nWorks + next->nWorks > HostJoin::kMaxWorks)
    return false;
  for (uint32_t j = 0; j < next->nWorks; j++) {
    const Range b = rangeOf(next->inlineWorks[j]);
    if (b.begin == b.end) continue;
    for (uint32_t i = 0; i < acc.nWorks; i++) {
      const Range a = rangeOf(pass->works[i]);
      if (!(a.writes || b.writes) || a.end <= b.begin || b.end <= a.begin) continue;
      if (a.writes && b.writes && a.peer == b.peer && a.begin == b.begin && a.end == b.end) continue;
      return false;
    }
  }
  memcpy(&pass->works[acc.nWorks], next->inlineWorks, next->nWorks * sizeof(plexusDevWork_v1_t));
  acc.nWorks += next->nWorks;
  joined_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

ncclResult_t HostExecutor::runChannel(int channel, const plexusDevKernelArgs_v1_t* args) {
  debugSetThreadRank(comm_->rank);
  const plexusDevWork_v1_t* w = nullptr;
  int more = 0;
  uint64_t lastOpSeq = 0;
  for (uint32_t i = 0; i < args->nWorks; i++) {
    const plexusDevWork_v1_t* x = dev::kernelWork(args, i);
    if (!dev::workOnChannel(x, channel)) continue;
    if (w) more++;
    else w = x;
    lastOpSeq = std::max(lastOpSeq, x->opSeq);
  }
  if (!w) return ncclSuccess;
  Activity& act = activity_[channel];
  act.func.store(w->func, std::memory_order_relaxed);
  act.datatype.store(w->datatype, std::memory_order_relaxed);
  act.algorithm.store(w->algorithm, std::memory_order_relaxed);
  act.opSeq.store(w->opSeq, std::memory_order_relaxed);
  act.lastOpSeq.store(lastOpSeq, std::memory_order_relaxed);
  act.count.store(w->count, std::memory_order_relaxed);
  act.more.store(more, std::memory_order_relaxed);
  act.running.store(true, std::memory_order_release);
  const AlgoInstance& algo = comm_->algos[w->algorithm];
  // The profiler's KernelCh event: this channel's part of the launch, under its first operation's Coll/P2p event.
  void* kernelCh = nullptr;
  if (profilerMask() & ncclProfileKernelCh) [[unlikely]] {
    ncclProfilerEventDescr_v6_t d{};
    d.type = ncclProfileKernelCh;
    d.rank = comm_->rank;
    d.parentObj = comm_->profilerOps[w->opSeq % ncclComm::kProfilerOps];
    d.kernelCh.channelId = (uint8_t)channel;
    d.kernelCh.pTimer = profilerNowNs();
    kernelCh = profilerStart(comm_, &d);
  }
  std::vector<ProxyConnection*> proxied;
  if (profilerMask() & kProfileProxyTree) [[unlikely]]
    proxied = markProxySteps(channel, args);
  const ncclResult_t r = algo.plugin->api->runHost(algo.ctx, args, channel);
  for (ProxyConnection* pc : proxied) pc->profile->launchEnds(connStep(channel, *pc));
  if (kernelCh) {
    ncclProfilerEventStateArgs_v6_t stop{};
    stop.kernelCh.pTimer = profilerNowNs();
    profilerRecord(comm_, kernelCh, ncclProfilerKernelChStop, &stop);
    profilerStop(comm_, kernelCh);
  }
  const char* who = algo.plugin->name.c_str();
  act.running.store(false, std::memory_order_release);
  if (r == ncclSuccess) return ncclSuccess;
  const plexusDevChannel_v1_t& ch = comm_->channels.live[channel];
  // A connection that failed under the proxy aborted the communicator and said why already.
  const ncclResult_t async = comm_->asyncError.load();
  if (ch.status == PLEXUS_CHANNEL_ABORTED && async != ncclSuccess) return async;
  // Its launch's other works, or in a pass of joined launches the later launches' too: their operations' range.
  const std::string launch = more ? " (and " + std::to_string(more) + " more work(s), up to opSeq " +
                                        std::to_string(lastOpSeq) + ")"
                                  : "";
  if (ch.status == PLEXUS_CHANNEL_TIMEOUT) {
    // Keep the channel's wait for the report; the first channel to time out prints it.
    act.running.store(true, std::memory_order_release);
    commFail(comm_, ncclTimeout, false, -1,
             "rank %d: %s opSeq %llu (%llu x %s)%s timed out after %.1f s on channel %d (%s) waiting to %s %s. Every "
             "rank printed a hang report: the rank that is not waiting on anyone, or that every chain of waits ends "
             "at, is the stuck one. Raise PLEXUS_TIMEOUT (seconds; 0: wait forever) if it is only slow",
             comm_->rank, funcName((ncclFunc_t)w->func), (unsigned long long)w->opSeq, (unsigned long long)w->count,
             typeName((ncclDataType_t)w->datatype), launch.c_str(), comm_->devComm.timeoutNs / 1e9, channel, who,
             ch.waitIsSend ? "send to" : "receive from", describeRank(comm_, ch.waitPeer).c_str());
    reportHangOnce(comm_, "timeout");
    act.running.store(false, std::memory_order_release);
    return ncclTimeout;
  }
  char op[512];
  snprintf(op, sizeof op, "rank %d: %s opSeq %llu (%llu elements)%s", comm_->rank, funcName((ncclFunc_t)w->func),
           (unsigned long long)w->opSeq, (unsigned long long)w->count, launch.c_str());
  const std::string waiting = ch.waitPeer >= 0 ? ", waiting on " + describeRank(comm_, ch.waitPeer) : "";
  if (ch.status == PLEXUS_CHANNEL_ERROR || ch.status == PLEXUS_CHANNEL_ABORTED) {
    // An operation that cannot run as called is a local verdict, as NCCL's argument checks are; an abort is the
    // application's (ncclCommAbort, ncclCommRevoke), which its other ranks make too.
    const bool wrong = ch.status == PLEXUS_CHANNEL_ERROR;
    return setError(comm_, wrong ? ncclInvalidUsage : r, "%s %s on channel %d (%s%s)", op,
                    wrong ? "is wrong (see the algorithm's message above)" : "was aborted", channel, who,
                    waiting.c_str());
  }
  // Peers of this rank may wait on it for ever: the communicator fails under them too.
  commFail(comm_, r, true, -1, "%s failed on channel %d (%s%s)", op, channel, who, waiting.c_str());
  return r;
}

uint64_t HostExecutor::connStep(int channel, const ProxyConnection& pc) const {
  const plexusDevChannelPeer_v1_t& peer = comm_->channels.peers[channel][pc.peer];
  return (pc.isSend ? peer.send : peer.recv).conn.step;
}

std::vector<ProxyConnection*> HostExecutor::markProxySteps(int channel, const plexusDevKernelArgs_v1_t* args) {
  std::vector<ProxyConnection*> proxied;
  {
    std::lock_guard<std::mutex> lock(comm_->proxyProfilesMutex);
    if ((size_t)channel < comm_->proxyProfiles.size()) proxied = comm_->proxyProfiles[channel];
  }
  for (ProxyConnection* pc : proxied) {
    // The work that can use the connection: a send or receive to its peer, else the first collective.
    const plexusDevWork_v1_t* mine = nullptr;
    for (uint32_t i = 0; i < args->nWorks && !mine; i++) {
      const plexusDevWork_v1_t* x = dev::kernelWork(args, i);
      if (!dev::workOnChannel(x, channel)) continue;
      const bool send = x->func == ncclFuncSend, recv = x->func == ncclFuncRecv;
      if (send || recv ? x->peer == pc->peer && send == pc->isSend : true) mine = x;
    }
    if (mine) pc->profile->launchBegins(mine->opSeq, connStep(channel, *pc));
  }
  return proxied;
}

void HostExecutor::workerLoop(int channel) {
  Worker& wk = *workers_[channel];
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(wk.mu);
      wk.cv.wait(lock, [&] { return wk.stop || wk.generation != seen; });
      if (wk.stop) return;
      seen = wk.generation;
    }
    ncclResult_t r = runChannel(channel, cur_);
    if (r != ncclSuccess) {
      int expected = ncclSuccess;
      channelError_.compare_exchange_strong(expected, r);
    }
    if (pending_.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(doneMu_);
      doneCv_.notify_all();
    }
  }
}

ncclResult_t HostExecutor::run(const plexusDevKernelArgs_v1_t* args) {
  // Connections moved by the proxy (across nodes) need it running while the kernels do.
  ProxyActivity proxy(comm_->proxyConnections.load(std::memory_order_relaxed) > 0);
  ncclResult_t result = ncclRemoteError;
  const uint64_t mask = args->channelMask & ((comm_->channels.count >= 64 ? 0 : 1ull << comm_->channels.count) - 1);
  if (!dev::loadRelaxed(&comm_->abortFlag) && mask) {
    // The lowest channel runs on this thread, the others on their workers.
    const int self = __builtin_ctzll(mask);
    // Relaxed: a worker reads them after taking its mutex, which this thread releases after writing them (and a
    // launch on one channel has no worker to tell); a seq_cst store is a locked exchange on x86.
    cur_ = args;
    channelError_.store(ncclSuccess, std::memory_order_relaxed);
    pending_.store(dev::popcount64(mask) - 1, std::memory_order_relaxed);
    for (int c = self + 1; c < comm_->channels.count; c++) {
      if (!(mask >> c & 1)) continue;
      Worker& wk = *workers_[c];
      {
        std::lock_guard<std::mutex> wl(wk.mu);
        wk.generation++;
      }
      wk.cv.notify_one();
    }
    result = runChannel(self, args);
    if (pending_.load() > 0) {
      std::unique_lock<std::mutex> dl(doneMu_);
      doneCv_.wait(dl, [&] { return pending_.load() == 0; });
    }
    if (result == ncclSuccess) result = (ncclResult_t)channelError_.load();
  } else if (mask) {
    result = ncclRemoteError;
  } else {
    result = ncclSuccess;
  }
  if (result != ncclSuccess) {
    ncclResult_t expected = ncclSuccess;
    comm_->asyncError.compare_exchange_strong(expected, result);
  }
  return result;
}

}  // namespace plexus
