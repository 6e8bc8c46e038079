// The adapters of NCCL's first three profiler ABIs (v1 2.23, v2 2.24-2.25, v3 2.26) share their shape: init with the
// mask alone, an 8-bit type, Coll/P2p with their Group as parent and a NULL name and hash, states 8-18 with 16-byte
// args. Each profiler_vN.cc instantiates it with its descriptor.
#pragma once

#include <cstring>
#include <type_traits>

#include "plugin/profiler.h"

namespace plexus::profiler {

// Numbers: v1 takes func, datatype, algo and proto as NCCL's enum values; v2+ as strings.
template <class Table, class Descr, class Args, bool Numbers, bool KernelCh>
class ProfilerOld final : public ProfilerApi {
 public:
  explicit ProfilerOld(const Table* t) : t_(t) {}
  ncclResult_t init(void** ctx, uint64_t, int* mask, const char*, int, int, int, ncclDebugLogger_t) const override {
    return t_->init(ctx, mask);
  }
  void startEvent(void* ctx, void** handle, ncclProfilerEventDescr_v6_t* d) const override {
    *handle = nullptr;
    constexpr uint64_t known = ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp |
                               ncclProfileProxyStep | ncclProfileProxyCtrl |
                               (KernelCh ? ncclProfileKernelCh | ncclProfileNetPlugin : 0);
    if (!(d->type & known)) return;
    Descr e;
    memset(&e, 0, sizeof e);
    e.type = (uint8_t)d->type;
    e.parentObj = d->parentObj;
    e.rank = d->rank;
    switch (d->type) {
      case ncclProfileColl:
        e.parentObj = d->coll.parentGroup;
        e.coll.seqNumber = d->coll.seqNumber;
        e.coll.sendBuff = d->coll.sendBuff;
        e.coll.recvBuff = d->coll.recvBuff;
        e.coll.count = d->coll.count;
        e.coll.root = d->coll.root;
        e.coll.nMaxChannels = d->coll.nChannels;
        e.coll.nWarps = d->coll.nWarps;
        if constexpr (Numbers) {
          e.coll.func = funcNumber(d->coll.func);
          e.coll.datatype = typeNumber(d->coll.datatype);
          e.coll.algo = algoNumber(d->coll.algo);
          e.coll.proto = protoNumber(d->coll.proto);
        } else {
          e.coll.func = d->coll.func;
          e.coll.datatype = d->coll.datatype;
          e.coll.algo = d->coll.algo;
          e.coll.proto = d->coll.proto;
        }
        break;
      case ncclProfileP2p:
        e.parentObj = d->p2p.parentGroup;
        e.p2p.buff = d->p2p.buff;
        e.p2p.count = d->p2p.count;
        e.p2p.peer = d->p2p.peer;
        if constexpr (Numbers) {
          e.p2p.func = funcNumber(d->p2p.func);
          e.p2p.datatype = typeNumber(d->p2p.datatype);
        } else {
          e.p2p.func = d->p2p.func;
          e.p2p.datatype = d->p2p.datatype;
        }
        break;
      case ncclProfileProxyOp: memcpy(&e.proxyOp, &d->proxyOp, sizeof e.proxyOp); break;
      case ncclProfileProxyStep: e.proxyStep.step = d->proxyStep.step; break;
      default:
        if constexpr (KernelCh) {
          if (d->type == ncclProfileKernelCh) e.kernelCh.channelId = d->kernelCh.channelId;
          if (d->type == ncclProfileNetPlugin) {
            e.netPlugin.id = d->netPlugin.id;
            e.netPlugin.data = d->netPlugin.data;
          }
        }
        break;  // Group, ProxyCtrl: no members
    }
    t_->startEvent(ctx, handle, &e);
  }
  void stopEvent(void* handle) const override { t_->stopEvent(handle); }
  void recordEventState(void* handle, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v6_t* a) const override {
    if (!v1State(s)) return;
    Args args;
    memset(&args, 0, sizeof args);
    if (s >= ncclProfilerProxyCtrlIdle && a) args.proxyCtrl.appendedProxyOps = a->proxyCtrl.appendedProxyOps;
    t_->recordEventState(handle, s, &args);
  }
  void finalize(void* ctx) const override { t_->finalize(ctx); }

 private:
  const Table* t_;
};

}  // namespace plexus::profiler
