/*
 * The primitives over the protocol a work item names, chosen when a step loop starts: what step loops
 * construct, with the recv and send peers they talk to (a ring's prev and next, a tree's parent and
 * children, every other rank).
 *
 * Host: each operation is compiled once per (T, F), out of line, and shared by every step loop of the
 * plugin (the protocols' primitives are force-inlined, and inlining a dozen reduce-copy loops into
 * every call site for 72 (type, operator) pairs would take the compiler many minutes and gigabytes);
 * the cost is one call per chunk. CUDA: Simple, inline (each kernel is compiled on its own); LL work
 * is not given to CUDA kernels yet.
 */
#ifndef PLEXUS_DEVICE_PROTOCOL_PRIMS_H_
#define PLEXUS_DEVICE_PROTOCOL_PRIMS_H_

#include "primitives.h"
#include "primitives_ll.h"
#include "work.h"

#if !defined(__CUDACC__)
#include <new>
#endif

namespace plexus::dev {

#if defined(__CUDACC__)
#define PLEXUS_PRIM_OP PLEXUS_HD

template <typename T, typename F>
class ProtocolPrims : public Primitives<T, F> {
  using P = Primitives<T, F>;

 public:
  PLEXUS_HD ProtocolPrims(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, int tid, int nthreads, int proto,
                          const int* recvPeers, int nrecv, const int* sendPeers, int nsend, const void* input,
                          void* output, uint64_t redOpArg)
      : P(comm, ch, tid, nthreads, recvPeers, nrecv, sendPeers, nsend, input, output, redOpArg) {
    (void)proto;
  }
};
#else
#define PLEXUS_PRIM_OP __attribute__((noinline))

template <typename T, typename F>
class ProtocolPrims {
  using S = Primitives<T, F>;
  using L = PrimitivesLL<T, F>;

 public:
  ProtocolPrims(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, int tid, int nthreads, int proto,
                const int* recvPeers, int nrecv, const int* sendPeers, int nsend, const void* input, void* output,
                uint64_t redOpArg)
      : ll_(proto == PLEXUS_PROTO_LL) {
    if (ll_) new (storage_) L(comm, ch, tid, nthreads, recvPeers, nrecv, sendPeers, nsend, input, output, redOpArg);
    else new (storage_) S(comm, ch, tid, nthreads, recvPeers, nrecv, sendPeers, nsend, input, output, redOpArg);
  }
  ~ProtocolPrims() {
    if (ll_) ll().~L();
    else simple().~S();
  }
  ProtocolPrims(const ProtocolPrims&) = delete;
  ProtocolPrims& operator=(const ProtocolPrims&) = delete;

  PLEXUS_PRIM_OP bool ok() const { return ll_ ? ll().ok() : simple().ok(); }
  PLEXUS_PRIM_OP void send(size_t inOff, size_t n) { ll_ ? ll().send(inOff, n) : simple().send(inOff, n); }
  PLEXUS_PRIM_OP void recv(size_t outOff, size_t n, bool postOp = false) {
    ll_ ? ll().recv(outOff, n, postOp) : simple().recv(outOff, n, postOp);
  }
  PLEXUS_PRIM_OP void recvReduceSend(size_t inOff, size_t n) {
    ll_ ? ll().recvReduceSend(inOff, n) : simple().recvReduceSend(inOff, n);
  }
  PLEXUS_PRIM_OP void recvReduceCopySend(size_t inOff, size_t outOff, size_t n, bool postOp = false) {
    ll_ ? ll().recvReduceCopySend(inOff, outOff, n, postOp) : simple().recvReduceCopySend(inOff, outOff, n, postOp);
  }
  PLEXUS_PRIM_OP void recvReduceCopy(size_t inOff, size_t outOff, size_t n, bool postOp = false) {
    ll_ ? ll().recvReduceCopy(inOff, outOff, n, postOp) : simple().recvReduceCopy(inOff, outOff, n, postOp);
  }
  PLEXUS_PRIM_OP void copySend(size_t inOff, size_t outOff, size_t n, bool postOp = false) {
    ll_ ? ll().copySend(inOff, outOff, n, postOp) : simple().copySend(inOff, outOff, n, postOp);
  }
  PLEXUS_PRIM_OP void recvCopySend(size_t outOff, size_t n, bool postOp = false) {
    ll_ ? ll().recvCopySend(outOff, n, postOp) : simple().recvCopySend(outOff, n, postOp);
  }
  PLEXUS_PRIM_OP void recvReduceOrdered(size_t outOff, size_t n, int selfPos, bool postOp = false) {
    ll_ ? ll().recvReduceOrdered(outOff, n, selfPos, postOp) : simple().recvReduceOrdered(outOff, n, selfPos, postOp);
  }
  PLEXUS_PRIM_OP void sendFromOutput(size_t outOff, size_t n) {
    ll_ ? ll().sendFromOutput(outOff, n) : simple().sendFromOutput(outOff, n);
  }

 private:
  L& ll() { return *reinterpret_cast<L*>(storage_); }
  const L& ll() const { return *reinterpret_cast<const L*>(storage_); }
  S& simple() { return *reinterpret_cast<S*>(storage_); }
  const S& simple() const { return *reinterpret_cast<const S*>(storage_); }

  bool ll_;
  alignas(L) alignas(S) unsigned char storage_[sizeof(L) > sizeof(S) ? sizeof(L) : sizeof(S)];
};
#endif

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
