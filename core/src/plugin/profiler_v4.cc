// ncclProfiler_v4 (NCCL 2.27): its own descriptor (8-bit type; Coll and P2p without API parents, their Group as
// parent), init with the mask second and the hash fourth; no API, launch or copy-engine events; states 8-22.
#include <cstring>

#include "plugin/profiler.h"

namespace plexus {

namespace {

constexpr uint64_t kKnown = ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp |
                            ncclProfileProxyStep | ncclProfileProxyCtrl | ncclProfileKernelCh | ncclProfileNetPlugin;

class ProfilerV4 final : public ProfilerApi {
 public:
  explicit ProfilerV4(const ncclProfiler_v4_t* t) : t_(t) {}
  ncclResult_t init(void** ctx, uint64_t commId, int* mask, const char* commName, int nNodes, int nRanks, int rank,
                    ncclDebugLogger_t logger) const override {
    return t_->init(ctx, mask, commName, commId, nNodes, nRanks, rank, logger);
  }
  void startEvent(void* ctx, void** handle, ncclProfilerEventDescr_v6_t* d) const override {
    *handle = nullptr;
    if (!(d->type & kKnown)) return;
    ncclProfilerEventDescr_v4_t e;
    memset(&e, 0, sizeof e);
    e.type = (uint8_t)d->type;
    e.parentObj = d->parentObj;
    e.rank = d->rank;
    switch (d->type) {
      case ncclProfileColl:
        e.parentObj = d->coll.parentGroup;
        e.coll.seqNumber = d->coll.seqNumber;
        e.coll.func = d->coll.func;
        e.coll.sendBuff = d->coll.sendBuff;
        e.coll.recvBuff = d->coll.recvBuff;
        e.coll.count = d->coll.count;
        e.coll.root = d->coll.root;
        e.coll.datatype = d->coll.datatype;
        e.coll.nChannels = d->coll.nChannels;
        e.coll.nWarps = d->coll.nWarps;
        e.coll.algo = d->coll.algo;
        e.coll.proto = d->coll.proto;
        break;
      case ncclProfileP2p:  // NCCL's v4 adapter leaves p2p.nChannels unset
        e.parentObj = d->p2p.parentGroup;
        e.p2p.func = d->p2p.func;
        e.p2p.buff = d->p2p.buff;
        e.p2p.datatype = d->p2p.datatype;
        e.p2p.count = d->p2p.count;
        e.p2p.peer = d->p2p.peer;
        break;
      case ncclProfileProxyOp: memcpy(&e.proxyOp, &d->proxyOp, sizeof e.proxyOp); break;
      case ncclProfileProxyStep: e.proxyStep.step = d->proxyStep.step; break;
      case ncclProfileKernelCh:
        e.kernelCh.channelId = d->kernelCh.channelId;
        e.kernelCh.pTimer = d->kernelCh.pTimer;
        break;
      case ncclProfileNetPlugin:
        e.netPlugin.id = d->netPlugin.id;
        e.netPlugin.data = d->netPlugin.data;
        break;
      default: break;  // Group, ProxyCtrl: no members
    }
    t_->startEvent(ctx, handle, &e);
  }
  void stopEvent(void* handle) const override { t_->stopEvent(handle); }
  void recordEventState(void* handle, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v6_t* a) const override {
    if (profiler::v4State(s)) t_->recordEventState(handle, s, a);  // the same 8-byte args
  }
  void finalize(void* ctx) const override { t_->finalize(ctx); }

 private:
  const ncclProfiler_v4_t* t_;
};

}  // namespace

std::unique_ptr<const ProfilerApi> profilerAdapt_v4(const void* table, std::string* why) {
  auto* t = (const ncclProfiler_v4_t*)table;
  *why = profiler::nullMembers(t);
  if (!why->empty()) return nullptr;
  return std::make_unique<ProfilerV4>(t);
}

}  // namespace plexus
