/* NCCL profiler ABI v4 (NCCL 2.27): init gets the communicator's name, hash and shape and a logger; coll and p2p
 * drop name and commHash; nChannels in p2p, pTimer in kernelCh; the 8-byte state args. C99. */
#ifndef PLEXUS_PROFILER_V4_H_
#define PLEXUS_PROFILER_V4_H_

#include "profiler_v3.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
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
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
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
      uint64_t pTimer; /* the kernel's start, GPU globaltimer ns */
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
} ncclProfilerEventDescr_v4_t;

typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
} ncclProfilerEventStateArgs_v4_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v4_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v4_t eState,
                                   ncclProfilerEventStateArgs_v4_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v4_t;

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(ncclProfilerEventDescr_v4_t) == 104, "ncclProfilerEventDescr_v4_t layout");
static_assert(offsetof(ncclProfilerEventDescr_v4_t, coll.proto) == 96, "ncclProfilerEventDescr_v4_t coll layout");
static_assert(offsetof(ncclProfilerEventDescr_v4_t, kernelCh.pTimer) == 32, "ncclProfilerEventDescr_v4_t kernelCh");
static_assert(sizeof(ncclProfilerEventStateArgs_v4_t) == 8, "ncclProfilerEventStateArgs_v4_t layout");
static_assert(sizeof(ncclProfiler_v4_t) == 48, "ncclProfiler_v4_t layout");
#endif

#endif /* PLEXUS_PROFILER_V4_H_ */
