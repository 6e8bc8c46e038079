/* NCCL profiler ABI v1 (NCCL 2.23): numbers for func, datatype, algo and proto; init takes the mask only. C99. */
#ifndef PLEXUS_PROFILER_V1_H_
#define PLEXUS_PROFILER_V1_H_

#include <sys/types.h>

#include "profiler_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint8_t type;    /* one ncclProfile* bit */
  void* parentObj; /* the handle the parent's startEvent returned, or NULL */
  int rank;
  union {
    struct {
      const char* name;
      uint64_t commHash;
      uint64_t seqNumber;
      uint8_t func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      uint8_t datatype;
      uint32_t op;
      size_t trafficBytes;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      uint8_t algo;
      uint8_t proto;
      int isCollnet;
      int isNvls;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      uint8_t func;
      void* buff;
      uint8_t datatype;
      size_t count;
      int peer;
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
  };
} ncclProfilerEventDescr_v1_t;

typedef union {
  struct {
    size_t transSize;
    int steps;
  } proxyOp;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
} ncclProfilerEventStateArgs_v1_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, int* eActivationMask);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v1_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v1_t eState,
                                   ncclProfilerEventStateArgs_v1_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v1_t;

#ifdef __cplusplus
} /* extern "C" */
#include <cstddef>
static_assert(sizeof(ncclProfilerEventDescr_v1_t) == 120, "ncclProfilerEventDescr_v1_t layout");
static_assert(offsetof(ncclProfilerEventDescr_v1_t, coll) == 24, "ncclProfilerEventDescr_v1_t union offset");
static_assert(offsetof(ncclProfilerEventDescr_v1_t, coll.isNvls) == 112, "ncclProfilerEventDescr_v1_t coll layout");
static_assert(sizeof(ncclProfilerEventStateArgs_v1_t) == 16, "ncclProfilerEventStateArgs_v1_t layout");
static_assert(sizeof(ncclProfiler_v1_t) == 48, "ncclProfiler_v1_t layout");
#endif

#endif /* PLEXUS_PROFILER_V1_H_ */
