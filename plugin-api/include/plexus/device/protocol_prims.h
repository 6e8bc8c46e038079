/*
 * The primitives over the protocol a work item names (Simple, LL, LL128), chosen at run time when a step
 * loop starts: what step loops construct, with the recv and send peers they talk to (a ring's prev and
 * next, a tree's parent and children, every other rank).
 *
 * Both backends: each protocol's function (SimpleProtocol::run, LLProtocol::run, LL128Protocol::run) is
 * compiled once per (T, F), out of line, and every named operation of every step loop calls one of them
 * with the operation's flags. Inlining a dozen reduce-copy loops into every call site for 72 (type,
 * operator) pairs would take the compilers many minutes and gigabytes; the cost is one call per chunk.
 */
#ifndef PLEXUS_DEVICE_PROTOCOL_PRIMS_H_
#define PLEXUS_DEVICE_PROTOCOL_PRIMS_H_

#include "primitives.h"
#include "primitives_ll.h"
#include "primitives_ll128.h"
#include "work.h"

namespace plexus::dev {

/* A primitive kept out of line (see arch.h's PLEXUS_HD_OUTLINE). */
#define PLEXUS_PRIM_OP PLEXUS_HD_OUTLINE

template <typename T, typename F>
class ProtocolPrims : public PrimitiveOps<ProtocolPrims<T, F>> {
 public:
  PLEXUS_HD ProtocolPrims(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, int tid, int nthreads, int proto,
                          const int* recvPeers, int nrecv, const int* sendPeers, int nsend, const void* input,
                          void* output, uint64_t redOpArg)
      : s_(comm, ch, tid, nthreads, recvPeers, nrecv, sendPeers, nsend, input, output, redOpArg), proto_(proto) {}
  PLEXUS_HD ~ProtocolPrims() { s_.finish(); }
  ProtocolPrims(const ProtocolPrims&) = delete;
  ProtocolPrims& operator=(const ProtocolPrims&) = delete;

  PLEXUS_HD bool ok() const { return s_.ok(); }
  /* This rank only sends in this operation and waits for no peer (a Broadcast's root, the first rank of a
   * Reduce's chain): it runs ahead of its receivers, and the host's LL fetches its next slots early. */
  PLEXUS_HD void setLeads(bool leads) { s_.leads = leads; }
  PLEXUS_HD void run(unsigned flags, size_t inOff, size_t outOff, size_t n, bool postOp, int selfPos) {
    if (proto_ == PLEXUS_PROTO_LL) LLProtocol::run<T, F>(s_, flags, inOff, outOff, n, postOp, selfPos);
    else if (proto_ == PLEXUS_PROTO_LL128) LL128Protocol::run<T, F>(s_, flags, inOff, outOff, n, postOp, selfPos);
    else SimpleProtocol::run<T, F>(s_, flags, inOff, outOff, n, postOp, selfPos);
  }

 private:
  PrimState<T, F> s_;
  int proto_;
};

/* One rank, no peers: dst = post(pre(src)) where the collective reduces (Reduce, ReduceScatter,
 * AllReduce), a plain copy otherwise (skipped when in place). */
template <typename T, typename F>
PLEXUS_PRIM_OP void localCopy(const plexusDevWork_v1_t* w, int tid, int nthreads, const T* src, T* dst, size_t n,
                              bool reduces) {
  if (n == 0 || (!reduces && src == dst)) return;
  F f(reduces ? workRedOpArg<T>(w) : 0);
  reduceCopy<T, F>(tid, nthreads, f, &src, 1, reduces, &dst, 1, reduces, n);
}

}  // namespace plexus::dev

#endif /* PLEXUS_DEVICE_PROTOCOL_PRIMS_H_ */
