// Layouts that NCCL programs depend on, pinned to NCCL 2.28's (x86-64/aarch64 LP64). A change here
// breaks every program built against NVIDIA's nccl.h.
#include <nccl.h>

#include <cstddef>

static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES && NCCL_UNIQUE_ID_BYTES == 128, "ncclUniqueId");
static_assert(sizeof(ncclResult_t) == 4 && sizeof(ncclDataType_t) == 4 && sizeof(ncclRedOp_t) == 4, "enum sizes");
static_assert(sizeof(ncclScalarResidence_t) == 4, "ncclScalarResidence_t");
static_assert(ncclInProgress == 7 && ncclTimeout == 8 && ncclNumResults == 9, "ncclResult_t values");
static_assert(ncclFloat8e5m2 == 11 && ncclNumTypes == 12 && ncclBfloat16 == 9, "ncclDataType_t values");
static_assert(ncclAvg == 4 && ncclNumOps == 5 && ncclMaxRedOp == 0x7fffffff, "ncclRedOp_t values");

static_assert(sizeof(ncclConfig_t) == 80, "ncclConfig_t (2.28)");
static_assert(offsetof(ncclConfig_t, magic) == 8 && offsetof(ncclConfig_t, version) == 12, "ncclConfig_t header");
static_assert(offsetof(ncclConfig_t, blocking) == 16 && offsetof(ncclConfig_t, netName) == 32, "ncclConfig_t");
static_assert(offsetof(ncclConfig_t, splitShare) == 40 && offsetof(ncclConfig_t, commName) == 48, "ncclConfig_t");
static_assert(offsetof(ncclConfig_t, collnetEnable) == 56 && offsetof(ncclConfig_t, nvlinkCentricSched) == 76,
              "ncclConfig_t tail");

static_assert(sizeof(ncclSimInfo_t) == 24 && offsetof(ncclSimInfo_t, estimatedTime) == 16, "ncclSimInfo_t");
