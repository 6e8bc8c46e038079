/*
 * Plexus — NCCL-compatible public API: NCCL 2.30's names, enum values, signatures and struct layouts. An NCCL
 * program compiles against this header (or NVIDIA's) and links against libplexus unchanged.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include <plexus/types.h>

#if defined(__CUDACC__) || defined(PLEXUS_INCLUDE_CUDA_RUNTIME)
#include <cuda_runtime.h>
#else
/* Same type as CUDA's, so it is interchangeable with a cudaStream_t from cuda_runtime.h. On the host
 * backend it carries a Plexus host stream (plexus.h: plexusStreamCreate). */
typedef struct CUstream_st* cudaStream_t;
#endif

#define NCCL_MAJOR 2
#define NCCL_SUFFIX "plexus"
#ifndef PLEXUS_NCCL_VERSION_2_28
#define NCCL_MINOR 30
#define NCCL_PATCH 7
#define NCCL_VERSION_CODE 23007
#else
/* For programs that pick NCCL's device API by this version (nccl-tests) and compile against the CUDA toolkit's
 * nccl_device.h, which is NCCL 2.28's: 2.28.9's version. The 2.30 calls stay declared; a config made under it is
 * read as 2.28's, by its version field. */
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_VERSION_CODE 22809
#endif
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

#define NCCL_API_MAGIC 0xcafebeef

#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_STRICT_ORDERING 0x02
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

#define NCCL_REVOKE_DEFAULT 0x00

/* 2.30's config. A program built on an older header passes a shorter prefix of it: what is read is decided by
 * the config's size and version fields, as NCCL does. */
typedef struct ncclConfig_v23000 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                            \
  {                                                                                                        \
    sizeof(ncclConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,        \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,        \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,        \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT         \
  }

typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION_CODE, NCCL_UNDEF_FLOAT }

typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

/* ncclCommSuspend flags */
#define NCCL_SUSPEND_MEM 0x01 /* release the communicator's buffers until ncclCommResume */

typedef enum {
  ncclStatGpuMemSuspend = 0,   /* bytes of the communicator's memory that suspend releases */
  ncclStatGpuMemSuspended = 1, /* 1 while suspended, else 0 */
  ncclStatGpuMemPersist = 2,   /* bytes it keeps while suspended */
  ncclStatGpuMemTotal = 3      /* both */
} ncclCommMemStat_t;

/* ncclWaitSignal: wait for opCnt signals from peer on signal index sigIdx of context ctx. */
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;

/* The parameter API: every knob Plexus reads, by key ("NCCL_BUFFSIZE"). Handles belong to the library. */
typedef struct ncclParamHandle* ncclParamHandle_t;

#define PLEXUS_NCCL_DECL(ret, name, args) \
  ret name args;                          \
  ret p##name args;

PLEXUS_NCCL_DECL(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size))
PLEXUS_NCCL_DECL(ncclResult_t, ncclMemFree, (void* ptr))
PLEXUS_NCCL_DECL(ncclResult_t, ncclGetVersion, (int* version))
PLEXUS_NCCL_DECL(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommInitRankConfig,
                 (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int* devlist))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommFinalize, (ncclComm_t comm))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommAbort, (ncclComm_t comm))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommSplit,
                 (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommShrink,
                 (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                  ncclConfig_t* config, int shrinkFlags))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId* uniqueId))
/* Existing ranks: comm, rank -1, and uniqueId the id from ncclCommGetUniqueId on the one that made it, else NULL.
 * New ranks: comm NULL, that id, and their rank (from the old size up to nRanks - 1). */
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommGrow,
                 (ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                  ncclConfig_t* config))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommInitRankScalable,
                 (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                  ncclConfig_t* config))
PLEXUS_NCCL_DECL(const char*, ncclGetErrorString, (ncclResult_t result))
PLEXUS_NCCL_DECL(const char*, ncclGetLastError, (ncclComm_t comm))
PLEXUS_NCCL_DECL(void, ncclResetDebugInit, (void))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommSuspend, (ncclComm_t comm, int flags))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommResume, (ncclComm_t comm))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommMemStats, (ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommWindowRegister,
                 (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags))
PLEXUS_NCCL_DECL(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win))
PLEXUS_NCCL_DECL(ncclResult_t, ncclWinGetUserPtr, (ncclComm_t comm, ncclWindow_t win, void** outUserPtr))
PLEXUS_NCCL_DECL(ncclResult_t, ncclRedOpCreatePreMulSum,
                 (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
                  ncclComm_t comm))
PLEXUS_NCCL_DECL(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm))
PLEXUS_NCCL_DECL(ncclResult_t, ncclReduce,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                  int root, ncclComm_t comm, cudaStream_t stream))
PLEXUS_NCCL_DECL(ncclResult_t, ncclBcast,
                 (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream))
PLEXUS_NCCL_DECL(ncclResult_t, ncclBroadcast,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                  ncclComm_t comm, cudaStream_t stream))
PLEXUS_NCCL_DECL(ncclResult_t, ncclAllReduce,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                  ncclComm_t comm, cudaStream_t stream))
PLEXUS_NCCL_DECL(ncclResult_t, ncclReduceScatter,
                 (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
                  ncclComm_t comm, cudaStream_t stream))
PLEXUS_NCCL_DECL(ncclResult_t, ncclAllGather,
                 (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
                  cudaStream_t stream))
PLEXUS_NCCL_DECL(ncclResult_t, ncclAlltoAll,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                  cudaStream_t stream))
PLEXUS_NCCL_DECL(ncclResult_t, ncclGather,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                  ncclComm_t comm, cudaStream_t stream))
PLEXUS_NCCL_DECL(ncclResult_t, ncclScatter,
                 (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                  ncclComm_t comm, cudaStream_t stream))
PLEXUS_NCCL_DECL(ncclResult_t, ncclSend,
                 (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                  cudaStream_t stream))
PLEXUS_NCCL_DECL(ncclResult_t, ncclRecv,
                 (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                  cudaStream_t stream))
PLEXUS_NCCL_DECL(ncclResult_t, ncclPutSignal,
                 (const void* localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                  size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                  cudaStream_t stream))
PLEXUS_NCCL_DECL(ncclResult_t, ncclSignal,
                 (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream))
PLEXUS_NCCL_DECL(ncclResult_t, ncclWaitSignal,
                 (int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream))
PLEXUS_NCCL_DECL(ncclResult_t, ncclGroupStart, (void))
PLEXUS_NCCL_DECL(ncclResult_t, ncclGroupEnd, (void))
PLEXUS_NCCL_DECL(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo))

PLEXUS_NCCL_DECL(ncclResult_t, ncclParamBind, (ncclParamHandle_t * out, const char* key))
PLEXUS_NCCL_DECL(ncclResult_t, ncclParamGetI8, (ncclParamHandle_t h, int8_t* out))
PLEXUS_NCCL_DECL(ncclResult_t, ncclParamGetI16, (ncclParamHandle_t h, int16_t* out))
PLEXUS_NCCL_DECL(ncclResult_t, ncclParamGetI32, (ncclParamHandle_t h, int32_t* out))
PLEXUS_NCCL_DECL(ncclResult_t, ncclParamGetI64, (ncclParamHandle_t h, int64_t* out))
PLEXUS_NCCL_DECL(ncclResult_t, ncclParamGetU8, (ncclParamHandle_t h, uint8_t* out))
PLEXUS_NCCL_DECL(ncclResult_t, ncclParamGetU16, (ncclParamHandle_t h, uint16_t* out))
PLEXUS_NCCL_DECL(ncclResult_t, ncclParamGetU32, (ncclParamHandle_t h, uint32_t* out))
PLEXUS_NCCL_DECL(ncclResult_t, ncclParamGetU64, (ncclParamHandle_t h, uint64_t* out))
/* Valid until the next ncclParamGetStr on the same thread. */
PLEXUS_NCCL_DECL(ncclResult_t, ncclParamGetStr, (ncclParamHandle_t h, const char** out))
/* The value's bytes: an integer knob's int64_t, a string knob's characters and their terminating NUL. */
PLEXUS_NCCL_DECL(ncclResult_t, ncclParamGet, (ncclParamHandle_t h, void* out, int maxLen, int* len))
/* Valid until the next ncclParamGetParameter on the same thread. */
PLEXUS_NCCL_DECL(ncclResult_t, ncclParamGetParameter, (const char* key, const char** value, int* valueLen))
/* The documented knobs; every one with NCCL_PARAM_DUMP_ALL=true. Valid until the next call on the same thread. */
PLEXUS_NCCL_DECL(ncclResult_t, ncclParamGetAllParameterKeys, (const char*** table, int* tableLen))
PLEXUS_NCCL_DECL(void, ncclParamDumpAll, (void))

#undef PLEXUS_NCCL_DECL

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
