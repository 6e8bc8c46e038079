// Recursive doubling AllReduce: the step loop and everything of the plugin but its ABI table, shared by the
// plugin (rd.cc, ABI v2) and Plexus's test of its ABI v1 adapter (tests/plugins/algo_v1.cc). At step k every rank
// exchanges its running result with rank ^ 2^k and combines the two, so after log2(n) steps each holds the full
// reduction: log2(n) hops where a ring takes 2(n-1). Power-of-two rank counts within one node; everything else the
// cost model declines, so the runtime picks another algorithm.
//
// Both partners combine (lower rank's value, higher rank's value) in that order, so every rank ends with the same
// bits.
#pragma once

#include <plexus/algo_v2.h>
#include <plexus/device/protocol_prims.h>
#include <plexus/device/work.h>

#include <new>

namespace rd {

using namespace plexus::dev;

struct Context {
  int nRanks, nNodes;
  float hopUs, gbs;
};

inline bool powerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

template <typename T, typename F>
inline void runAllReduce(const plexusDevComm_v1_t* comm, plexusDevChannel_v1_t* ch, const plexusDevWork_v1_t* w) {
  size_t off, n;
  channelPart(w, ch->id, w->count, lineElems<T>(), &off, &n);
  if (n == 0) return;
  const uint64_t arg = workRedOpArg<T>(w);
  if (comm->nRanks == 1) {
    localCopy<T, F>(w, 0, 1, (const T*)w->sendbuff + off, (T*)w->recvbuff + off, n, true);
    return;
  }
  const size_t chunk = workChunk(w, n);
  for (size_t base = 0; base < n; base += chunk) {
    const size_t o = off + base, m = minSize(chunk, n - base);
    for (int bit = 1; bit < comm->nRanks; bit <<= 1) {
      const int partner = comm->rank ^ bit;
      ProtocolPrims<T, F> prims(comm, ch, 0, 1, w->proto, &partner, 1, &partner, 1, w->sendbuff, w->recvbuff, arg);
      if (bit == 1) prims.copySend(o, o, m);  // the output starts as pre(input); the partner gets it too
      else prims.sendFromOutput(o, m);
      prims.recvReduceOrdered(o, m, comm->rank < partner ? 0 : 1, /*postOp=*/bit * 2 >= comm->nRanks);
      if (!prims.ok()) return;
    }
  }
}

inline ncclResult_t rdInit(void** ctx, const plexusAlgoTopo_v2_t* topo, ncclDebugLogger_t) {
  auto* c = new (std::nothrow) Context{topo->nRanks, topo->nNodes, topo->localHopUs, topo->localGBs};
  if (!c) return ncclSystemError;
  *ctx = c;
  return ncclSuccess;
}

// Every pair is connected on one channel (partners change with each step).
inline ncclResult_t rdBuildGraph(void* ctx, plexusAlgoGraph_v2_t* graph) {
  auto* c = (Context*)ctx;
  graph->connectMask = c->nNodes == 1 && powerOfTwo(c->nRanks) ? PLEXUS_ALGO_CONNECT_ALL : 0;
  graph->maxChannels = 1;
  return ncclSuccess;
}

// log2(n) hops, and each step moves the whole buffer.
inline ncclResult_t rdCost(void* ctx, ncclFunc_t func, int proto, size_t nBytes, int nChannels, float* timeUs) {
  auto* c = (Context*)ctx;
  *timeUs = -1.0f;
  if (func != ncclFuncAllReduce || c->nNodes != 1 || !powerOfTwo(c->nRanks) || nChannels != 1) return ncclSuccess;
  if (proto != PLEXUS_PROTO_SIMPLE && proto != PLEXUS_PROTO_LL) return ncclSuccess;
  int steps = 0;
  while ((1 << steps) < c->nRanks) steps++;
  const float ll = proto == PLEXUS_PROTO_LL ? 0.25f : 1.0f;
  *timeUs = steps * (c->hopUs * ll + (float)nBytes / (c->gbs * ll * 1e3f));
  return ncclSuccess;
}

inline ncclResult_t rdFinalize(void* ctx) {
  delete (Context*)ctx;
  return ncclSuccess;
}

}  // namespace rd
