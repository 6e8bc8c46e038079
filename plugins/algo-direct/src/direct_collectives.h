/*
 * Direct (one-shot) step loops: every rank talks to every other rank of the node at once, so an
 * operation crosses one hop instead of the ring's n-1 or 2(n-1). They win where latency rules
 * (small buffers, few ranks); the ring wins on bandwidth beyond. Compiles as host C++ and as CUDA.
 *
 * Reductions combine the contributions in rank order on every rank, so every rank gets the same bits
 * (as a ring does by construction): each rank first puts its own pre-op'ed contribution in its
 * output (copySend, which also hands it to the peers), then recvReduceOrdered folds the peers' in
 * around it.
 */
#pragma once

#include <plexus/device/kernel.h>
#include <plexus/device/protocol_prims.h>
#include <plexus/device/work.h>

namespace plexus::direct {

using namespace plexus::dev;

/* The other ranks in rank order, and how many of them come before this rank. */
struct Peers {
  int n;
  int selfPos;
  int ranks[PLEXUS_MAX_PRIM_PEERS];
};

PLEXUS_HD Peers otherRanks(const plexusDevComm_v1_t* comm) {
  Peers p{0, 0, {}};
  for (int r = 0; r < comm->nRanks && p.n < PLEXUS_MAX_PRIM_PEERS; r++) {
    if (r == comm->rank) p.selfPos = p.n;
    else p.ranks[p.n++] = r;
  }
  return p;
}

template <typename T, typename F>
using Prims = ProtocolPrims<T, F>;

/* The channel's part of `count` elements and the pipeline chunk. */
template <typename T>
PLEXUS_HD void part(const plexusDevWork_v1_t* w, const plexusDevChannel_v1_t* ch, size_t count, size_t* off,
                    size_t* n, size_t* chunk) {
  channelPart(w, ch->id, count, lineElems<T>(), off, n);
  *chunk = workChunk(w, *n);
}

template <typename T, typename F>
PLEXUS_HD void runAllReduce(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, const plexusDevWork_v1_t* w,
                            int tid, int nthreads) {
  size_t off, n, chunk;
  part<T>(w, ch, w->count, &off, &n, &chunk);
  if (n == 0) return;
  if (comm->nRanks == 1) {
    localCopy<T, F>(w, tid, nthreads, (const T*)w->sendbuff + off, (T*)w->recvbuff + off, n, true);
    return;
  }
  const Peers peers = otherRanks(comm);
  Prims<T, F> prims(comm, ch, tid, nthreads, w->proto, peers.ranks, peers.n, peers.ranks, peers.n, w->sendbuff, w->recvbuff,
          workRedOpArg<T>(w));
  for (size_t base = 0; base < n && prims.ok(); base += chunk) {
    const size_t o = off + base, m = minSize(chunk, n - base);
    prims.copySend(o, o, m);
    prims.recvReduceOrdered(o, m, peers.selfPos, /*postOp=*/true);
  }
}

template <typename T, typename F>
PLEXUS_HD void runReduce(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, const plexusDevWork_v1_t* w,
                         int tid, int nthreads) {
  size_t off, n, chunk;
  part<T>(w, ch, w->count, &off, &n, &chunk);
  if (n == 0) return;
  if (comm->nRanks == 1) {
    localCopy<T, F>(w, tid, nthreads, (const T*)w->sendbuff + off, (T*)w->recvbuff + off, n, true);
    return;
  }
  const int root = w->root;
  if (comm->rank == root) {
    /* Root's own contribution sits at its rank's place among the others. */
    const Peers peers = otherRanks(comm);
    Prims<T, F> prims(comm, ch, tid, nthreads, w->proto, peers.ranks, peers.n, nullptr, 0, w->sendbuff, w->recvbuff, workRedOpArg<T>(w));
    for (size_t base = 0; base < n && prims.ok(); base += chunk) {
      const size_t o = off + base, m = minSize(chunk, n - base);
      prims.copySend(o, o, m); /* no send peers: the pre-op'ed copy into the output */
      prims.recvReduceOrdered(o, m, peers.selfPos, /*postOp=*/true);
    }
  } else {
    Prims<T, F> prims(comm, ch, tid, nthreads, w->proto, nullptr, 0, &root, 1, w->sendbuff, nullptr, workRedOpArg<T>(w));
    prims.setLeads(true);
    for (size_t base = 0; base < n && prims.ok(); base += chunk) prims.send(off + base, minSize(chunk, n - base));
  }
}

template <typename T, typename F>
PLEXUS_HD void runReduceScatter(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch,
                                const plexusDevWork_v1_t* w, int tid, int nthreads) {
  const size_t count = w->count; /* per rank: rank r's result block is sendbuff[r * count, ...) */
  size_t off, n, chunk;
  part<T>(w, ch, count, &off, &n, &chunk);
  if (n == 0) return;
  const int rank = comm->rank;
  if (comm->nRanks == 1) {
    localCopy<T, F>(w, tid, nthreads, (const T*)w->sendbuff + off, (T*)w->recvbuff + off, n, true);
    return;
  }
  const Peers peers = otherRanks(comm);
  const uint64_t arg = workRedOpArg<T>(w);
  for (size_t base = 0; base < n; base += chunk) {
    const size_t o = off + base, m = minSize(chunk, n - base);
    for (int i = 0; i < peers.n; i++) {
      const int q = peers.ranks[i];
      Prims<T, F> to(comm, ch, tid, nthreads, w->proto, nullptr, 0, &q, 1, w->sendbuff, nullptr, arg);
      to.send((size_t)q * count + o, m);
    }
    Prims<T, F> mine(comm, ch, tid, nthreads, w->proto, peers.ranks, peers.n, nullptr, 0, w->sendbuff, w->recvbuff, arg);
    mine.copySend((size_t)rank * count + o, o, m);
    mine.recvReduceOrdered(o, m, peers.selfPos, /*postOp=*/true);
    if (!mine.ok()) return;
  }
}

/* T is an unsigned type of the datatype's size: Broadcast and AllGather only move bytes. */
template <typename T>
PLEXUS_HD void runBroadcast(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, const plexusDevWork_v1_t* w,
                            int tid, int nthreads) {
  size_t off, n, chunk;
  part<T>(w, ch, w->count, &off, &n, &chunk);
  if (n == 0) return;
  if (comm->nRanks == 1) {
    localCopy<T, FuncSum<T>>(w, tid, nthreads, (const T*)w->sendbuff + off, (T*)w->recvbuff + off, n, false);
    return;
  }
  const int root = w->root;
  if (comm->rank == root) {
    const Peers peers = otherRanks(comm);
    const bool inPlace = w->sendbuff == w->recvbuff;
    Prims<T, FuncSum<T>> prims(comm, ch, tid, nthreads, w->proto, nullptr, 0, peers.ranks, peers.n, w->sendbuff, w->recvbuff, 0);
    prims.setLeads(true);
    for (size_t base = 0; base < n && prims.ok(); base += chunk) {
      const size_t o = off + base, m = minSize(chunk, n - base);
      if (inPlace) prims.send(o, m);
      else prims.copySend(o, o, m);
    }
  } else {
    Prims<T, FuncSum<T>> prims(comm, ch, tid, nthreads, w->proto, &root, 1, nullptr, 0, nullptr, w->recvbuff, 0);
    for (size_t base = 0; base < n && prims.ok(); base += chunk) prims.recv(off + base, minSize(chunk, n - base));
  }
}

template <typename T>
PLEXUS_HD void runAllGather(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, const plexusDevWork_v1_t* w,
                            int tid, int nthreads) {
  const size_t count = w->count; /* per rank: rank r's block lands at recvbuff[r * count, ...) */
  size_t off, n, chunk;
  part<T>(w, ch, count, &off, &n, &chunk);
  if (n == 0) return;
  const int rank = comm->rank;
  if (comm->nRanks == 1) {
    localCopy<T, FuncSum<T>>(w, tid, nthreads, (const T*)w->sendbuff + off, (T*)w->recvbuff + off, n, false);
    return;
  }
  const Peers peers = otherRanks(comm);
  const bool inPlace = (const T*)w->sendbuff == (const T*)w->recvbuff + (size_t)rank * count;
  Prims<T, FuncSum<T>> out(comm, ch, tid, nthreads, w->proto, nullptr, 0, peers.ranks, peers.n, w->sendbuff, w->recvbuff, 0);
  for (size_t base = 0; base < n && out.ok(); base += chunk) {
    const size_t o = off + base, m = minSize(chunk, n - base);
    if (inPlace) out.send(o, m);
    else out.copySend(o, (size_t)rank * count + o, m);
    for (int i = 0; i < peers.n; i++) {
      Prims<T, FuncSum<T>> in(comm, ch, tid, nthreads, w->proto, &peers.ranks[i], 1, nullptr, 0, nullptr, w->recvbuff, 0);
      in.recv((size_t)peers.ranks[i] * count + o, m);
    }
  }
}

/* Block q of sendbuff goes to rank q, block q of recvbuff comes from it (count elements each; never in place). Each
 * chunk goes out to every peer before this rank waits for the peers' own, so that no two ranks wait on each other. */
template <typename T>
PLEXUS_HD void runAlltoAll(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, const plexusDevWork_v1_t* w,
                           int tid, int nthreads) {
  const size_t count = w->count;
  size_t off, n, chunk;
  part<T>(w, ch, count, &off, &n, &chunk);
  if (n == 0) return;
  const int rank = comm->rank;
  const T* src = (const T*)w->sendbuff;
  T* dst = (T*)w->recvbuff;
  const Peers peers = otherRanks(comm);
  for (size_t base = 0; base < n; base += chunk) {
    const size_t o = off + base, m = minSize(chunk, n - base);
    for (int i = 0; i < peers.n; i++) {
      const int q = peers.ranks[i];
      Prims<T, FuncSum<T>> to(comm, ch, tid, nthreads, w->proto, nullptr, 0, &q, 1, w->sendbuff, nullptr, 0);
      to.send((size_t)q * count + o, m);
      if (!to.ok()) return;
    }
    const size_t own = (size_t)rank * count + o;
    localCopy<T, FuncSum<T>>(w, tid, nthreads, src + own, dst + own, m, false);
    for (int i = 0; i < peers.n; i++) {
      const int q = peers.ranks[i];
      Prims<T, FuncSum<T>> from(comm, ch, tid, nthreads, w->proto, &q, 1, nullptr, 0, nullptr, w->recvbuff, 0);
      from.recv((size_t)q * count + o, m);
      if (!from.ok()) return;
    }
  }
}

PLEXUS_HD bool isCopyFunc(int func) {
  return func == ncclFuncBroadcast || func == ncclFuncAllGather || func == ncclFuncAlltoAll;
}

/* The collectives that reduce (AllReduce, Reduce, ReduceScatter) for (T, F); false for another func. */
template <typename T, typename F>
PLEXUS_HD_OUTLINE bool runReducing(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch,
                                   const plexusDevWork_v1_t* w, int tid, int nthreads) {
  switch (w->func) {
    case ncclFuncAllReduce: runAllReduce<T, F>(comm, ch, w, tid, nthreads); return true;
    case ncclFuncReduce: runReduce<T, F>(comm, ch, w, tid, nthreads); return true;
    case ncclFuncReduceScatter: runReduceScatter<T, F>(comm, ch, w, tid, nthreads); return true;
  }
  return false;
}

/* Broadcast, AllGather and AlltoAll, which only move bytes, on C, one of CopyType's unsigned types; false for
 * another func. */
template <typename C>
PLEXUS_HD_OUTLINE bool runCopying(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch,
                                  const plexusDevWork_v1_t* w, int tid, int nthreads) {
  switch (w->func) {
    case ncclFuncBroadcast: runBroadcast<C>(comm, ch, w, tid, nthreads); return true;
    case ncclFuncAllGather: runAllGather<C>(comm, ch, w, tid, nthreads); return true;
    case ncclFuncAlltoAll: runAlltoAll<C>(comm, ch, w, tid, nthreads); return true;
  }
  return false;
}

/* Its step loops, for the runners of plexus/device/kernel.h: the host backend's (Runner) and the CUDA kernels'
 * (ReduceRunner of (T, F), CopyRunner of an element type; each instantiates only its own collectives). */
struct Collectives {
  static PLEXUS_HD bool isCopy(int func) { return isCopyFunc(func); }
  template <typename T, typename F>
  static PLEXUS_HD bool reducing(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch,
                                 const plexusDevWork_v1_t* w, int tid, int nthreads) {
    return runReducing<T, F>(comm, ch, w, tid, nthreads);
  }
  template <typename C>
  static PLEXUS_HD bool copying(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch,
                                const plexusDevWork_v1_t* w, int tid, int nthreads) {
    return runCopying<C>(comm, ch, w, tid, nthreads);
  }
};
using Runner = dev::AlgoRunner<Collectives>;
using ReduceRunner = dev::AlgoReduceRunner<Collectives>;
using CopyRunner = dev::AlgoCopyRunner<Collectives>;

}  // namespace plexus::direct
