/* NCCL profiler ABI v5 (NCCL 2.28): a 64-bit type; GroupApi, CollApi, P2pApi and KernelLaunch events; a Coll or P2p
 * event's parent is its CollApi/P2pApi event and its Group event moves to parentGroup; init takes the communicator's
 * id second. C99. */
#ifndef PLEXUS_PROFILER_V5_H_
#define PLEXUS_PROFILER_V5_H_

#include <stdbool.h>

#include "profiler_v4.h"

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
  };
} ncclProfilerEventDescr_v5_t;

typedef ncclProfilerEventStateArgs_v4_t ncclProfilerEventStateArgs_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v5_t eState,
                                   ncclProfilerEventStateArgs_v5_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v5_t;

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(ncclProfilerEventDescr_v5_t) == 112, "ncclProfilerEventDescr_v5_t layout");
static_assert(offsetof(ncclProfilerEventDescr_v5_t, collApi.graphCaptured) == 64, "ncclProfilerEventDescr_v5_t collApi");
static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll.parentGroup) == 104, "ncclProfilerEventDescr_v5_t coll layout");
static_assert(offsetof(ncclProfilerEventDescr_v5_t, p2p.parentGroup) == 64, "ncclProfilerEventDescr_v5_t p2p layout");
static_assert(sizeof(ncclProfiler_v5_t) == 48, "ncclProfiler_v5_t layout");
#endif

#endif /* PLEXUS_PROFILER_V5_H_ */
