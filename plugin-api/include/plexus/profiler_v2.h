/* NCCL profiler ABI v2 (NCCL 2.24-2.25): strings for func, datatype, algo and proto; coll drops op, isCollnet and
 * isNvls. init and the state args as v1. C99. */
#ifndef PLEXUS_PROFILER_V2_H_
#define PLEXUS_PROFILER_V2_H_

#include "profiler_v1.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name;
      uint64_t commHash;
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      size_t trafficBytes;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      const char* func;
      void* buff;
      const char* datatype;
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
} ncclProfilerEventDescr_v2_t;

typedef ncclProfilerEventStateArgs_v1_t ncclProfilerEventStateArgs_v2_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, int* eActivationMask);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v2_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v2_t eState,
                                   ncclProfilerEventStateArgs_v2_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v2_t;

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(ncclProfilerEventDescr_v2_t) == 128, "ncclProfilerEventDescr_v2_t layout");
static_assert(offsetof(ncclProfilerEventDescr_v2_t, coll.proto) == 120, "ncclProfilerEventDescr_v2_t coll layout");
static_assert(sizeof(ncclProfiler_v2_t) == 48, "ncclProfiler_v2_t layout");
#endif

#endif /* PLEXUS_PROFILER_V2_H_ */
