/*
 * Plexus algorithm plugin ABI, version 2 (current).
 *
 * An algorithm plugin is a shared object exporting one symbol, PLEXUS_ALGO_PLUGIN_SYMBOL, of type plexusAlgo_v2_t.
 * It names itself, says which collectives and protocols it serves, builds its per-channel graph (ring orders, tree
 * links) from the topology the core gives it (algo_v1.h's types, unchanged), estimates the cost of an operation
 * (the tuner's default), and runs the step loops of a launch: on the host backend through runHost, on CUDA through
 * the kernel getCudaKernel returns. Both take the same plexusDevKernelArgs_v1_t (device_v1.h), read through
 * plexus/device/kernel.h, so that one launch is the same works in the same order on either backend.
 *
 * Since v1: runHost runs a whole launch's works on one channel (point-to-point progresses all its sends and
 * receives together) and gets the communicator's context; getCudaKernel returns a CUfunction and its kernels take
 * the launch's arguments by value. Plugins never see core structs: only these headers and plexus/device/.
 *
 * The core refuses a plugin whose abiVersion differs from PLEXUS_ALGO_ABI_VERSION or whose structSize is smaller
 * than it needs, or with a NULL required member, naming file, symbol and versions. C99.
 */
#ifndef PLEXUS_ALGO_V2_H_
#define PLEXUS_ALGO_V2_H_

#include "algo_v1.h"
#include "device_v1.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLEXUS_ALGO_ABI_VERSION 2
#define PLEXUS_ALGO_PLUGIN_SYMBOL "plexusAlgoPlugin_v2"

typedef plexusAlgoTopo_v1_t plexusAlgoTopo_v2_t;
typedef plexusAlgoGraph_v1_t plexusAlgoGraph_v2_t;

/* How the core's step loops fare with each protocol on this communicator's links, against Simple (whose factors
 * are 1), indexed by PLEXUS_PROTO_*: hop[p] scales a hop's latency (localHopUs, netHopUs), bw[p] a channel's
 * bandwidth (localGBs, netGBs). The core knows them because it runs the protocols: on the host backend, where a
 * core reads LL's lines one cache line at a time from the core that wrote them, LL moves far less than a quarter
 * of Simple's bytes. plexusAlgoDefaultProtocols gives the figures for a core that does not say. */
typedef struct plexusAlgoProtocols_v2 {
  float hop[PLEXUS_NUM_PROTOCOLS];
  float bw[PLEXUS_NUM_PROTOCOLS];
} plexusAlgoProtocols_v2_t;

/* The figures of cores built before setProtocols: LL saves three quarters of a hop (the tail's round trip; a fifth
 * where cores are shared and a hop is a context switch) at a quarter of the bandwidth (8 data bytes in 16); LL128's
 * hop sits 60% of the way from LL's to Simple's, at 40% of the bandwidth. */
static inline plexusAlgoProtocols_v2_t plexusAlgoDefaultProtocols(const plexusAlgoTopo_v2_t* topo) {
  plexusAlgoProtocols_v2_t p;
  const float ll = topo->coresShared ? 0.8f : 0.25f;
  p.hop[PLEXUS_PROTO_LL] = ll;
  p.hop[PLEXUS_PROTO_LL128] = ll + 0.6f * (1.0f - ll);
  p.hop[PLEXUS_PROTO_SIMPLE] = 1.0f;
  p.bw[PLEXUS_PROTO_LL] = 0.25f;
  p.bw[PLEXUS_PROTO_LL128] = 0.4f;
  p.bw[PLEXUS_PROTO_SIMPLE] = 1.0f;
  return p;
}

typedef struct plexusAlgo_v2 {
  uint32_t abiVersion; /* PLEXUS_ALGO_ABI_VERSION */
  uint32_t structSize; /* sizeof(plexusAlgo_v2_t) as the plugin was built */
  const char* name;    /* short and unique, e.g. "ring"; what configs and NCCL_ALGO name */
  uint32_t funcMask;   /* bit (1u << ncclFunc_t) per operation served (ncclFuncSend/Recv: point-to-point) */
  uint32_t protoMask;  /* bit (1u << PLEXUS_PROTO_*) per protocol served */

  /* Per communicator. ctx is the plugin's; logger may be called with NCCL's levels and subsystems. */
  ncclResult_t (*init)(void** ctx, const plexusAlgoTopo_v2_t* topo, ncclDebugLogger_t logger);
  ncclResult_t (*buildGraph)(void* ctx, plexusAlgoGraph_v2_t* graph);
  /* Estimated time in microseconds of one operation of nBytes (NCCL's size for func) on nChannels; a negative
   * time means "not supported for this case". */
  ncclResult_t (*cost)(void* ctx, ncclFunc_t func, int proto, size_t nBytes, int nChannels, float* timeUs);
  /* The host backend's kernel: runs, on the calling thread, every work of the launch that falls on channelId
   * (plexus::dev::kernelWork / workOnChannel), in order. Returns ncclSuccess, or the error that stopped it (the
   * channel's status tells abort from timeout). */
  ncclResult_t (*runHost)(void* ctx, const plexusDevKernelArgs_v1_t* args, int channelId);
  /* Optional (NULL without CUDA): the kernel that runs this work, as a CUfunction of the calling thread's
   * current CUDA context, signature __global__ void(plexusDevKernelArgs_v1_t), launched with one block per set
   * bit of channelMask and a multiple of 32 threads (at least 64). Consecutive works for which it returns the
   * same function share one launch; the kernel runs each on its channels as runHost does. */
  ncclResult_t (*getCudaKernel)(void* ctx, const plexusDevWork_v1_t* work, void** function);
  ncclResult_t (*finalize)(void* ctx);
  /* Optional, and absent from plugins built before it (their structSize ends at finalize; the core then never
   * calls it): where each rank sits in its machine, called after init and before buildGraph. place[r] for every
   * rank r is a number whose 16-bit fields, from the highest, name the rank's CPU package, NUMA node, PCI host
   * bridge and top-level PCIe switch (each an index + 1 within its node; 0: none or unknown), taken from the
   * rank's GPU or, on the host backend, its CPUs. Ranks of one node with equal high fields share that part of
   * the machine; ordering a node's ranks by place keeps a ring's or a tree's hops inside a switch, a host bridge,
   * a NUMA node where the machine allows. Every rank is given the same array. */
  ncclResult_t (*setPlaces)(void* ctx, const uint64_t* place);
  /* Optional, and absent from plugins built before it (the core then never calls it): the protocols' figures for
   * this communicator (plexusAlgoProtocols_v2_t), called after init and before buildGraph; a cost model that
   * prices protocols should use them rather than its own guesses. The pointer is valid during the call only. */
  ncclResult_t (*setProtocols)(void* ctx, const plexusAlgoProtocols_v2_t* protocols);
} plexusAlgo_v2_t;

/* A plugin's table without the optional members that came later: the smallest structSize the core accepts. */
#define PLEXUS_ALGO_V2_BASE_SIZE 72

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(plexusAlgo_v2_t) == 88, "plexusAlgo_v2_t layout");
static_assert(offsetof(plexusAlgo_v2_t, setPlaces) == PLEXUS_ALGO_V2_BASE_SIZE, "plexusAlgo_v2_t layout");
static_assert(offsetof(plexusAlgo_v2_t, setProtocols) == 80, "plexusAlgo_v2_t layout");
static_assert(sizeof(plexusAlgoProtocols_v2_t) == 24, "plexusAlgoProtocols_v2_t layout");
#endif

#endif /* PLEXUS_ALGO_V2_H_ */
