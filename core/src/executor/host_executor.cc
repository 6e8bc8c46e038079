#include "host_executor.h"

#include <plexus/device/arch.h>

#include <vector>

#include "comm/communicator.h"
#include "executor/p2p.h"
#include "health/health.h"
#include "misc/check.h"
#include "planner/planner.h"
#include "proxy/proxy.h"
#include "stream/host_stream.h"

namespace plexus {

HostExecutor::HostExecutor(ncclComm* comm) : comm_(comm) {
  workers_.resize(comm->channels.count);
  activity_ = std::make_unique<Activity[]>(comm->channels.count);
  for (int c = 1; c < comm->channels.count; c++) {
    workers_[c] = std::make_unique<Worker>();
    workers_[c]->thread = std::thread([this, c] { workerLoop(c); });
  }
}

HostExecutor::~HostExecutor() {
  waitIdle();
  for (int c = 1; c < (int)workers_.size(); c++) {
    {
      std::lock_guard<std::mutex> lock(workers_[c]->mu);
      workers_[c]->stop = true;
    }
    workers_[c]->cv.notify_one();
    workers_[c]->thread.join();
  }
}

void HostExecutor::launch(HostStream* stream, uint32_t first, uint32_t n) {
  inflight_++;
  stream->enqueue([this, first, n] {
    ncclResult_t r = run(first, n);
    inflight_--;
    return r;
  });
}

void HostExecutor::waitIdle() {
  for (uint32_t iter = 0; inflight_.load() > 0; iter++) dev::backoff(iter < 4096 ? iter : 4096);
}

ncclResult_t HostExecutor::runChannel(int channel, uint32_t first, uint32_t n) {
  debugSetThreadRank(comm_->rank);
  for (uint32_t i = 0; i < n; i++) {
    const plexusDevWork_v1_t& w = comm_->workFifo.at(first + i);
    if (w.nChannels == 0 || channel < w.channelLo || channel >= w.channelLo + w.nChannels) continue;
    Activity& act = activity_[channel];
    act.func.store(w.func, std::memory_order_relaxed);
    act.datatype.store(w.datatype, std::memory_order_relaxed);
    act.algorithm.store(w.algorithm, std::memory_order_relaxed);
    act.opSeq.store(w.opSeq, std::memory_order_relaxed);
    act.count.store(w.count, std::memory_order_relaxed);
    act.running.store(true, std::memory_order_release);
    ncclResult_t r;
    const char* who;
    if (w.algorithm == kAlgoCoreP2p) {
      // Consecutive point-to-point items progress together.
      std::vector<const plexusDevWork_v1_t*> p2p;
      for (; i < n && comm_->workFifo.at(first + i).algorithm == kAlgoCoreP2p; i++)
        p2p.push_back(&comm_->workFifo.at(first + i));
      i--;
      r = runP2p(comm_, p2p.data(), (int)p2p.size());
      who = "point-to-point";
    } else {
      const AlgoInstance& algo = comm_->algos[w.algorithm];
      r = algo.plugin->api->runHost(&comm_->devComm, channel, &w);
      who = algo.plugin->name.c_str();
    }
    act.running.store(false, std::memory_order_release);
    if (r != ncclSuccess) {
      const plexusDevChannel_v1_t& ch = comm_->channels.dev[channel];
      // A connection that failed under the proxy aborted the communicator and said why already.
      const ncclResult_t async = comm_->asyncError.load();
      if (ch.status == PLEXUS_CHANNEL_ABORTED && async != ncclSuccess) return async;
      if (ch.status == PLEXUS_CHANNEL_TIMEOUT) {
        // Keep the channel's wait for the report; the first channel to time out prints it.
        act.running.store(true, std::memory_order_release);
        commFail(comm_, ncclTimeout, false, -1,
                 "rank %d: %s opSeq %llu (%llu x %s) timed out after %.1f s on channel %d (%s) waiting to %s %s. "
                 "Every rank printed a hang report: the rank that is not waiting on anyone, or that every chain of "
                 "waits ends at, is the stuck one. Raise PLEXUS_TIMEOUT (seconds; 0: wait forever) if it is "
                 "only slow",
                 comm_->rank, funcName((ncclFunc_t)w.func), (unsigned long long)w.opSeq,
                 (unsigned long long)w.count, typeName((ncclDataType_t)w.datatype), comm_->devComm.timeoutNs / 1e9,
                 channel, who, ch.waitIsSend ? "send to" : "receive from", describeRank(comm_, ch.waitPeer).c_str());
        reportHangOnce(comm_, "timeout");
        act.running.store(false, std::memory_order_release);
        return ncclTimeout;
      }
      const char* why = ch.status == PLEXUS_CHANNEL_ABORTED ? "was aborted" : "failed";
      setError(comm_, r, "rank %d: %s opSeq %llu (%llu elements) %s on channel %d (%s, waiting on %s)",
               comm_->rank, funcName((ncclFunc_t)w.func), (unsigned long long)w.opSeq, (unsigned long long)w.count,
               why, channel, who, describeRank(comm_, ch.waitPeer).c_str());
      return r;
    }
  }
  return ncclSuccess;
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
    ncclResult_t r = runChannel(channel, curFirst_, curN_);
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

ncclResult_t HostExecutor::run(uint32_t first, uint32_t n) {
  // Connections moved by the proxy (across nodes) need it running while the kernels do.
  ProxyActivity proxy(comm_->proxyConnections.load(std::memory_order_relaxed) > 0);
  // Launches from several streams run in workFifo order: each waits until every earlier one has
  // consumed its entries, which it does last, so one launch at a time owns the channel workers.
  for (uint32_t iter = 0; comm_->workFifo.consumed() != first; iter++) {
    if (dev::loadRelaxed(&comm_->abortFlag)) break;
    dev::backoff(iter);
  }
  int maxChannel = 0;
  for (uint32_t i = 0; i < n; i++) {
    const plexusDevWork_v1_t& w = comm_->workFifo.at(first + i);
    if (w.nChannels) maxChannel = std::max(maxChannel, w.channelLo + w.nChannels - 1);
  }
  ncclResult_t result = ncclSuccess;
  if (!dev::loadRelaxed(&comm_->abortFlag)) {
    curFirst_ = first;
    curN_ = n;
    channelError_ = ncclSuccess;
    pending_ = maxChannel;
    for (int c = 1; c <= maxChannel; c++) {
      Worker& wk = *workers_[c];
      {
        std::lock_guard<std::mutex> wl(wk.mu);
        wk.generation++;
      }
      wk.cv.notify_one();
    }
    result = runChannel(0, first, n);
    if (maxChannel > 0) {
      std::unique_lock<std::mutex> dl(doneMu_);
      doneCv_.wait(dl, [&] { return pending_.load() == 0; });
    }
    if (result == ncclSuccess) result = (ncclResult_t)channelError_.load();
  } else {
    result = ncclRemoteError;
  }
  comm_->workFifo.consume(n);
  if (result != ncclSuccess) {
    ncclResult_t expected = ncclSuccess;
    comm_->asyncError.compare_exchange_strong(expected, result);
  }
  return result;
}

}  // namespace plexus
