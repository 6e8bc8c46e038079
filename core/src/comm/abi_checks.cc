// Layouts that NCCL programs depend on, pinned to NCCL 2.30's (x86-64/aarch64 LP64). A change here
// breaks every program built against NVIDIA's nccl.h.
#include <nccl.h>

#include <cstddef>

static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES && NCCL_UNIQUE_ID_BYTES == 128, "ncclUniqueId");
static_assert(sizeof(ncclResult_t) == 4 && sizeof(ncclDataType_t) == 4 && sizeof(ncclRedOp_t) == 4, "enum sizes");
static_assert(sizeof(ncclScalarResidence_t) == 4, "ncclScalarResidence_t");
static_assert(ncclInProgress == 7 && ncclTimeout == 8 && ncclNumResults == 9, "ncclResult_t values");
static_assert(ncclFloat8e5m2 == 11 && ncclNumTypes == 12 && ncclBfloat16 == 9, "ncclDataType_t values");
static_assert(ncclAvg == 4 && ncclNumOps == 5 && ncclMaxRedOp == 0x7fffffff, "ncclRedOp_t values");

// ncclConfig_v23000; 2.28's (80 B) ends at nvlinkCentricSched, 2.27's (72 B) at nvlsCTAs, 2.17-2.26's at splitShare.
static_assert(sizeof(ncclConfig_t) == 96, "ncclConfig_t (2.30)");
static_assert(offsetof(ncclConfig_t, magic) == 8 && offsetof(ncclConfig_t, version) == 12, "ncclConfig_t header");
static_assert(offsetof(ncclConfig_t, blocking) == 16 && offsetof(ncclConfig_t, netName) == 32, "ncclConfig_t");
static_assert(offsetof(ncclConfig_t, splitShare) == 40 && offsetof(ncclConfig_t, commName) == 48, "ncclConfig_t");
static_assert(offsetof(ncclConfig_t, collnetEnable) == 56 && offsetof(ncclConfig_t, nvlinkCentricSched) == 76,
              "ncclConfig_t 2.28 part");
static_assert(offsetof(ncclConfig_t, graphUsageMode) == 80 && offsetof(ncclConfig_t, numRmaCtx) == 84 &&
                  offsetof(ncclConfig_t, maxP2pPeers) == 88 && offsetof(ncclConfig_t, graphStreamOrdering) == 92,
              "ncclConfig_t 2.29-2.30 part");
static_assert(NCCL_VERSION_CODE == 23007 && NCCL_API_MAGIC == 0xcafebeef, "version");
static_assert(NCCL_WIN_STRICT_ORDERING == 2 && NCCL_SUSPEND_MEM == 1, "flags");
static_assert(sizeof(ncclCommMemStat_t) == 4 && ncclStatGpuMemTotal == 3, "ncclCommMemStat_t");
static_assert(sizeof(ncclWaitSignalDesc_t) == 16 && offsetof(ncclWaitSignalDesc_t, ctx) == 12, "ncclWaitSignalDesc_t");

static_assert(sizeof(ncclSimInfo_t) == 24 && offsetof(ncclSimInfo_t, estimatedTime) == 16, "ncclSimInfo_t");
