/*
 * Plexus algorithm plugin ABI, version 1 (frozen; new plugins use algo_v2.h, whose topology and graph types
 * these are). The core still loads v1 plugins, on the host backend only.
 *
 * An algorithm plugin is a shared object exporting one symbol, PLEXUS_ALGO_V1_PLUGIN_SYMBOL, of type
 * plexusAlgo_v1_t. It names itself, says which collectives and protocols it serves, builds its
 * per-channel graph (ring orders, tree links) from the topology the core gives it, estimates the
 * cost of an operation (the tuner's default), and runs the step loops: on the host backend through
 * runHost, on CUDA through the kernel getCudaKernel returns. Plugins never see core structs: only
 * this header, device_v1.h and the header-only primitives in plexus/device/.
 *
 * The core refuses a plugin whose abiVersion differs from PLEXUS_ALGO_V1_ABI_VERSION or whose
 * structSize is smaller than it needs, or with a NULL required member, naming file, symbol and
 * versions. C99.
 */
#ifndef PLEXUS_ALGO_V1_H_
#define PLEXUS_ALGO_V1_H_

#include "device_v1.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLEXUS_ALGO_V1_ABI_VERSION 1
#define PLEXUS_ALGO_V1_PLUGIN_SYMBOL "plexusAlgoPlugin_v1"

/* What the core knows about the communicator when it builds graphs. Arrays have nRanks entries
 * and stay valid only for the duration of the call. */
typedef struct plexusAlgoTopo_v1 {
  int rank;
  int nRanks;
  int node;           /* this rank's node index, 0..nNodes-1 */
  int nNodes;
  int localRank;      /* index among the ranks of its node */
  int nLocalRanks;
  const int* rankNode;      /* node index of each rank */
  const int* rankLocalRank; /* local rank of each rank */
  /* What the core estimates of the links, for cost models: the latency of one hop (a step handed to
   * a peer and seen there) and the bandwidth of one channel, within a node and between nodes; and
   * whether the node's ranks share cores, where every rank a step waits for costs a context switch:
   * coresShared is 0 when every host channel of the node has a core, else how many share each core
   * (rounded up). */
  float localHopUs;
  float localGBs;
  float netHopUs;
  float netGBs;
  int coresShared;
  int stepBytes; /* Simple protocol bytes per step (NCCL_BUFFSIZE / PLEXUS_STEPS): the pipeline's grain */
} plexusAlgoTopo_v1_t;

/* Which connections a graph needs; the core sets up connectors for them. */
#define PLEXUS_ALGO_CONNECT_RING 0x1 /* recv from ring.prev, send to ring.next */
#define PLEXUS_ALGO_CONNECT_TREE 0x2 /* both directions with tree.up and every tree.down */
#define PLEXUS_ALGO_CONNECT_ALL 0x4  /* both directions with every other rank, on the first maxChannels channels */

typedef struct plexusAlgoChannelGraph_v1 {
  int* ringOrder;          /* [nRanks], filled by the plugin: the ranks in ring order */
  plexusDevTree_v1_t tree; /* this rank's links in the channel's tree (tree.parents is the core's) */
  int* treeParents;        /* [nRanks], filled by a tree-building plugin: every rank's tree.up */
} plexusAlgoChannelGraph_v1_t;

typedef struct plexusAlgoGraph_v1 {
  int nChannels;        /* in: channels the core will run; the plugin fills each of them */
  uint32_t connectMask; /* out: PLEXUS_ALGO_CONNECT_* */
  int maxChannels;      /* out: most channels one operation of this algorithm runs on (0: nChannels) */
  int pad0;
  plexusAlgoChannelGraph_v1_t channels[PLEXUS_MAXCHANNELS];
} plexusAlgoGraph_v1_t;

typedef struct plexusAlgo_v1 {
  uint32_t abiVersion; /* PLEXUS_ALGO_V1_ABI_VERSION */
  uint32_t structSize; /* sizeof(plexusAlgo_v1_t) as the plugin was built */
  const char* name;    /* short and unique, e.g. "ring"; what configs and NCCL_ALGO name */
  uint32_t funcMask;   /* bit (1u << ncclFunc_t) per collective served */
  uint32_t protoMask;  /* bit (1u << PLEXUS_PROTO_*) per protocol served */

  /* Per communicator. ctx is the plugin's; logger may be called with NCCL's levels and subsystems. */
  ncclResult_t (*init)(void** ctx, const plexusAlgoTopo_v1_t* topo, ncclDebugLogger_t logger);
  ncclResult_t (*buildGraph)(void* ctx, plexusAlgoGraph_v1_t* graph);
  /* Estimated time in microseconds of one operation of nBytes (NCCL's size for func) on nChannels;
   * a negative time means "not supported for this case". */
  ncclResult_t (*cost)(void* ctx, ncclFunc_t func, int proto, size_t nBytes, int nChannels, float* timeUs);
  /* Runs the step loop of one work item on one channel, on the calling host thread. Returns
   * ncclSuccess, or the error that stopped it (the channel's status tells abort from timeout). */
  ncclResult_t (*runHost)(plexusDevComm_v1_t* comm, int channelId, const plexusDevWork_v1_t* work);
  /* Never called (v1 plugins run on the host backend only). */
  ncclResult_t (*getCudaKernel)(const plexusDevWork_v1_t* work, const void** kernel);
  ncclResult_t (*finalize)(void* ctx);
} plexusAlgo_v1_t;

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(plexusAlgoTopo_v1_t) == 64, "plexusAlgoTopo_v1_t layout");
static_assert(sizeof(plexusAlgoChannelGraph_v1_t) == 48, "plexusAlgoChannelGraph_v1_t layout");
static_assert(offsetof(plexusAlgoGraph_v1_t, channels) == 16, "plexusAlgoGraph_v1_t layout");
static_assert(sizeof(plexusAlgo_v1_t) == 72, "plexusAlgo_v1_t layout");
#endif

#endif /* PLEXUS_ALGO_V1_H_ */
