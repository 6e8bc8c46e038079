/*
 * Tree step loops: AllReduce as reduce-up then broadcast-down, pipelined by chunk (NCCL's
 * runTreeUpDown, with the two directions interleaved on the one thread a host channel has), and
 * Broadcast and Reduce over the channel's tree re-rooted at the operation's root. Compiles as host
 * C++ and as CUDA.
 */
#pragma once

#include <plexus/device/kernel.h>
#include <plexus/device/protocol_prims.h>
#include <plexus/device/work.h>

namespace plexus::tree {

using namespace plexus::dev;

template <typename T, typename F>
using Prims = ProtocolPrims<T, F>;

/* A rank's links in a tree: its parent (-1 at the root) and its children, packed. Re-rooting can
 * give the new root one more child than the tree's arity. */
struct Links {
  int up;
  int n;
  int down[PLEXUS_MAX_TREE_ARITY + 1];
};

PLEXUS_HD Links channelLinks(const plexusDevChannel_v1_t* ch) {
  Links l{ch->tree.up, 0, {}};
  for (int i = 0; i < PLEXUS_MAX_TREE_ARITY; i++)
    if (ch->tree.down[i] >= 0) l.down[l.n++] = ch->tree.down[i];
  return l;
}

/* The channel's tree re-rooted at `root`: the edges on the path from root to the tree's root turn
 * around, every other link stays. Every tree edge is connected both ways, so the same connectors
 * serve any root. */
PLEXUS_HD Links rootedAt(const plexusDevComm_v1_t* comm, const plexusDevChannel_v1_t* ch, int root) {
  Links l = channelLinks(ch);
  const int me = comm->rank;
  if (me != root) {
    /* Walk from root towards the tree's root; if this rank is on the way, the rank before it there
     * becomes its parent and its old parent a child. */
    const int* parents = ch->tree.parents;
    int prev = root;
    for (int r = parents[root], hops = 0; r >= 0 && hops < comm->nRanks; prev = r, r = parents[r], hops++) {
      if (r != me) continue;
      int k = 0;
      for (int i = 0; i < l.n; i++)
        if (l.down[i] != prev) l.down[k++] = l.down[i];
      l.n = k;
      if (l.up >= 0) l.down[l.n++] = l.up;
      l.up = prev;
      return l;
    }
    return l;
  }
  if (l.up >= 0) l.down[l.n++] = l.up;
  l.up = -1;
  return l;
}

/* The pipeline chunk: the planner's, but small enough that a buffer crosses the tree in a few pieces
 * per level (a chunk waits for its whole self at every level, so one chunk would cross 2 log2(n)
 * levels one after the other), and not below 64 KiB: a piece is one more hand-over at every level, which costs a context switch
 * where ranks share cores. Every
 * rank derives it from the same numbers. */
template <typename T>
PLEXUS_HD size_t treeChunk(const plexusDevComm_v1_t* comm, const plexusDevWork_v1_t* w, size_t n) {
  int levels = 1;
  while ((2 << (levels - 1)) <= comm->nRanks) levels++;
  const size_t floorElems = (64 << 10) / sizeof(T);
  size_t piece = alignUp(divUp(n, (size_t)(2 * levels)), lineElems<T>());
  if (piece < floorElems) piece = floorElems;
  return minSize(workChunk(w, n), piece);
}

/* Chunks a rank sends up before it takes the first one back down: the round trip to the root and
 * back overlaps the next chunks' way up. Below the chunks one connector buffers (PLEXUS_STEPS / 2
 * for Simple's two-step chunks), so every wait is met by a rank further along. */
#define PLEXUS_TREE_LAG 2

template <typename T, typename F>
PLEXUS_HD void runAllReduce(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, const plexusDevWork_v1_t* w,
                            int tid, int nthreads) {
  size_t off, n;
  channelPart(w, ch->id, w->count, lineElems<T>(), &off, &n);
  if (n == 0) return;
  if (comm->nRanks == 1) {
    localCopy<T, F>(w, tid, nthreads, (const T*)w->sendbuff + off, (T*)w->recvbuff + off, n, true);
    return;
  }
  const Links l = channelLinks(ch);
  const size_t chunk = treeChunk<T>(comm, w, n);
  const uint64_t arg = workRedOpArg<T>(w);
  if (l.up < 0) {
    /* The root: its children's partial results and its own input make the result, which goes
     * straight back down. */
    Prims<T, F> prims(comm, ch, tid, nthreads, w->proto, l.down, l.n, l.down, l.n, w->sendbuff, w->recvbuff, arg);
    for (size_t base = 0; base < n && prims.ok(); base += chunk) {
      const size_t o = off + base;
      prims.recvReduceCopySend(o, o, minSize(chunk, n - base), /*postOp=*/true);
    }
    return;
  }
  Prims<T, F> up(comm, ch, tid, nthreads, w->proto, l.down, l.n, &l.up, 1, w->sendbuff, nullptr, arg);
  Prims<T, F> down(comm, ch, tid, nthreads, w->proto, &l.up, 1, l.down, l.n, nullptr, w->recvbuff, arg);
  const size_t chunks = divUp(n, chunk);
  for (size_t i = 0; i < chunks + PLEXUS_TREE_LAG && up.ok() && down.ok(); i++) {
    if (i < chunks) {
      const size_t o = off + i * chunk, m = minSize(chunk, n - i * chunk);
      if (l.n) up.recvReduceSend(o, m);
      else up.send(o, m);
    }
    if (i >= PLEXUS_TREE_LAG) {
      const size_t j = i - PLEXUS_TREE_LAG, o = off + j * chunk, m = minSize(chunk, n - j * chunk);
      if (l.n) down.recvCopySend(o, m);
      else down.recv(o, m);
    }
  }
}

template <typename T, typename F>
PLEXUS_HD void runReduce(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, const plexusDevWork_v1_t* w,
                         int tid, int nthreads) {
  size_t off, n;
  channelPart(w, ch->id, w->count, lineElems<T>(), &off, &n);
  if (n == 0) return;
  if (comm->nRanks == 1) {
    localCopy<T, F>(w, tid, nthreads, (const T*)w->sendbuff + off, (T*)w->recvbuff + off, n, true);
    return;
  }
  const Links l = rootedAt(comm, ch, w->root);
  const size_t chunk = treeChunk<T>(comm, w, n);
  const bool isRoot = l.up < 0;
  Prims<T, F> prims(comm, ch, tid, nthreads, w->proto, l.down, l.n, &l.up, isRoot ? 0 : 1, w->sendbuff,
                    isRoot ? w->recvbuff : nullptr, workRedOpArg<T>(w));
  for (size_t base = 0; base < n && prims.ok(); base += chunk) {
    const size_t o = off + base, m = minSize(chunk, n - base);
    if (isRoot) prims.recvReduceCopy(o, o, m, /*postOp=*/true);
    else if (l.n) prims.recvReduceSend(o, m);
    else prims.send(o, m);
  }
}

/* T is an unsigned type of the datatype's size: Broadcast only moves bytes. */
template <typename T>
PLEXUS_HD void runBroadcast(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, const plexusDevWork_v1_t* w,
                            int tid, int nthreads) {
  using F = FuncSum<T>;
  size_t off, n;
  channelPart(w, ch->id, w->count, lineElems<T>(), &off, &n);
  if (n == 0) return;
  if (comm->nRanks == 1) {
    localCopy<T, F>(w, tid, nthreads, (const T*)w->sendbuff + off, (T*)w->recvbuff + off, n, false);
    return;
  }
  const Links l = rootedAt(comm, ch, w->root);
  const size_t chunk = treeChunk<T>(comm, w, n);
  const bool isRoot = l.up < 0, inPlace = w->sendbuff == w->recvbuff;
  Prims<T, F> prims(comm, ch, tid, nthreads, w->proto, &l.up, isRoot ? 0 : 1, l.down, l.n,
                    isRoot ? w->sendbuff : nullptr, w->recvbuff, 0);
  for (size_t base = 0; base < n && prims.ok(); base += chunk) {
    const size_t o = off + base, m = minSize(chunk, n - base);
    if (isRoot) {
      if (inPlace) prims.send(o, m);
      else prims.copySend(o, o, m);
    } else if (l.n) {
      prims.recvCopySend(o, m);
    } else {
      prims.recv(o, m);
    }
  }
}

PLEXUS_HD bool isCopyFunc(int func) { return func == ncclFuncBroadcast; }

/* The collectives that reduce (AllReduce, Reduce) for (T, F); false for another func. */
template <typename T, typename F>
PLEXUS_HD_OUTLINE bool runReducing(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch,
                                   const plexusDevWork_v1_t* w, int tid, int nthreads) {
  switch (w->func) {
    case ncclFuncAllReduce: runAllReduce<T, F>(comm, ch, w, tid, nthreads); return true;
    case ncclFuncReduce: runReduce<T, F>(comm, ch, w, tid, nthreads); return true;
  }
  return false;
}

/* Broadcast, which only moves bytes, on C, one of CopyType's unsigned types; false for another func. */
template <typename C>
PLEXUS_HD_OUTLINE bool runCopying(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch,
                                  const plexusDevWork_v1_t* w, int tid, int nthreads) {
  if (w->func != ncclFuncBroadcast) return false;
  runBroadcast<C>(comm, ch, w, tid, nthreads);
  return true;
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

}  // namespace plexus::tree
