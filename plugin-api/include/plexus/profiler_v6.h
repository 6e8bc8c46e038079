/* NCCL profiler ABI v6 (NCCL 2.29-2.30): v5 plus the copy-engine collective events (CeColl, CeSync, CeBatch). C99. */
#ifndef PLEXUS_PROFILER_V6_H_
#define PLEXUS_PROFILER_V6_H_

#include "profiler_v5.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint64_t type;   /* one ncclProfile* bit */
  void* parentObj; /* the handle the parent's startEvent returned, or NULL (Coll, P2p: their CollApi/P2pApi event) */
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth; /* 1: the implicit group around a single call */
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup; /* the Group event */
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy;
      bool intraBatchSync;
      uint32_t batchSize;
      uint32_t numBatches;
      uint32_t ceSeqNum;
      void* stream;
    } ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
  };
} ncclProfilerEventDescr_v6_t;

typedef ncclProfilerEventStateArgs_v5_t ncclProfilerEventStateArgs_v6_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v6_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v6_t eState,
                                   ncclProfilerEventStateArgs_v6_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v6_t;

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(ncclProfilerEventDescr_v6_t) == 112, "ncclProfilerEventDescr_v6_t layout");
static_assert(offsetof(ncclProfilerEventDescr_v6_t, coll) == 24, "ncclProfilerEventDescr_v6_t union offset");
static_assert(offsetof(ncclProfilerEventDescr_v6_t, coll.nChannels) == 80, "ncclProfilerEventDescr_v6_t coll layout");
static_assert(offsetof(ncclProfilerEventDescr_v6_t, coll.parentGroup) == 104, "ncclProfilerEventDescr_v6_t coll layout");
static_assert(offsetof(ncclProfilerEventDescr_v6_t, p2p.nChannels) == 60, "ncclProfilerEventDescr_v6_t p2p layout");
static_assert(offsetof(ncclProfilerEventDescr_v6_t, proxyOp.isSend) == 44, "ncclProfilerEventDescr_v6_t proxyOp layout");
static_assert(offsetof(ncclProfilerEventDescr_v6_t, ceColl.stream) == 104, "ncclProfilerEventDescr_v6_t ceColl layout");
static_assert(offsetof(ncclProfilerEventDescr_v6_t, ceCollBatch.useIntraSync) == 40, "ncclProfilerEventDescr_v6_t ceCollBatch");
static_assert(sizeof(ncclProfilerEventStateArgs_v6_t) == 8, "ncclProfilerEventStateArgs_v6_t layout");
static_assert(sizeof(ncclProfiler_v6_t) == 48, "ncclProfiler_v6_t layout");
#endif

#endif /* PLEXUS_PROFILER_V6_H_ */
