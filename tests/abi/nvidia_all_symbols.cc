// Compiled against NVIDIA's nccl.h (the CUDA toolkit's 2.28, and 2.30.7 from ../shared/third-party): takes the
// address of every function that header declares, and of its pncclX twin, so linking against libplexus fails if any is missing or the
// symbol is not exported; running it checks that each resolves.
#include <nccl.h>

#include <cstdio>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

struct Entry {
  const char* name;
  const void* fn;
};

static const Entry kEntries[] = {
    {"ncclAllGather", (const void*)&ncclAllGather},
    {"pncclAllGather", (const void*)&pncclAllGather},
    {"ncclAllReduce", (const void*)&ncclAllReduce},
    {"pncclAllReduce", (const void*)&pncclAllReduce},
    {"ncclAlltoAll", (const void*)&ncclAlltoAll},
    {"pncclAlltoAll", (const void*)&pncclAlltoAll},
    {"ncclBcast", (const void*)&ncclBcast},
    {"pncclBcast", (const void*)&pncclBcast},
    {"ncclBroadcast", (const void*)&ncclBroadcast},
    {"pncclBroadcast", (const void*)&pncclBroadcast},
    {"ncclCommAbort", (const void*)&ncclCommAbort},
    {"pncclCommAbort", (const void*)&pncclCommAbort},
    {"ncclCommCount", (const void*)&ncclCommCount},
    {"pncclCommCount", (const void*)&pncclCommCount},
    {"ncclCommCuDevice", (const void*)&ncclCommCuDevice},
    {"pncclCommCuDevice", (const void*)&pncclCommCuDevice},
    {"ncclCommDeregister", (const void*)&ncclCommDeregister},
    {"pncclCommDeregister", (const void*)&pncclCommDeregister},
    {"ncclCommDestroy", (const void*)&ncclCommDestroy},
    {"pncclCommDestroy", (const void*)&pncclCommDestroy},
    {"ncclCommFinalize", (const void*)&ncclCommFinalize},
    {"pncclCommFinalize", (const void*)&pncclCommFinalize},
    {"ncclCommGetAsyncError", (const void*)&ncclCommGetAsyncError},
    {"pncclCommGetAsyncError", (const void*)&pncclCommGetAsyncError},
    {"ncclCommInitAll", (const void*)&ncclCommInitAll},
    {"pncclCommInitAll", (const void*)&pncclCommInitAll},
    {"ncclCommInitRank", (const void*)&ncclCommInitRank},
    {"pncclCommInitRank", (const void*)&pncclCommInitRank},
    {"ncclCommInitRankConfig", (const void*)&ncclCommInitRankConfig},
    {"pncclCommInitRankConfig", (const void*)&pncclCommInitRankConfig},
    {"ncclCommInitRankScalable", (const void*)&ncclCommInitRankScalable},
    {"pncclCommInitRankScalable", (const void*)&pncclCommInitRankScalable},
    {"ncclCommRegister", (const void*)&ncclCommRegister},
    {"pncclCommRegister", (const void*)&pncclCommRegister},
    {"ncclCommRevoke", (const void*)&ncclCommRevoke},
    {"pncclCommRevoke", (const void*)&pncclCommRevoke},
    {"ncclCommShrink", (const void*)&ncclCommShrink},
    {"pncclCommShrink", (const void*)&pncclCommShrink},
    {"ncclCommSplit", (const void*)&ncclCommSplit},
    {"pncclCommSplit", (const void*)&pncclCommSplit},
    {"ncclCommUserRank", (const void*)&ncclCommUserRank},
    {"pncclCommUserRank", (const void*)&pncclCommUserRank},
    {"ncclCommWindowDeregister", (const void*)&ncclCommWindowDeregister},
    {"pncclCommWindowDeregister", (const void*)&pncclCommWindowDeregister},
    {"ncclCommWindowRegister", (const void*)&ncclCommWindowRegister},
    {"pncclCommWindowRegister", (const void*)&pncclCommWindowRegister},
    {"ncclGather", (const void*)&ncclGather},
    {"pncclGather", (const void*)&pncclGather},
    {"ncclGetErrorString", (const void*)&ncclGetErrorString},
    {"pncclGetErrorString", (const void*)&pncclGetErrorString},
    {"ncclGetLastError", (const void*)&ncclGetLastError},
    {"pncclGetLastError", (const void*)&pncclGetLastError},
    {"ncclGetUniqueId", (const void*)&ncclGetUniqueId},
    {"pncclGetUniqueId", (const void*)&pncclGetUniqueId},
    {"ncclGetVersion", (const void*)&ncclGetVersion},
    {"pncclGetVersion", (const void*)&pncclGetVersion},
    {"ncclGroupEnd", (const void*)&ncclGroupEnd},
    {"pncclGroupEnd", (const void*)&pncclGroupEnd},
    {"ncclGroupSimulateEnd", (const void*)&ncclGroupSimulateEnd},
    {"pncclGroupSimulateEnd", (const void*)&pncclGroupSimulateEnd},
    {"ncclGroupStart", (const void*)&ncclGroupStart},
    {"pncclGroupStart", (const void*)&pncclGroupStart},
    {"ncclMemAlloc", (const void*)&ncclMemAlloc},
    {"pncclMemAlloc", (const void*)&pncclMemAlloc},
    {"ncclMemFree", (const void*)&ncclMemFree},
    {"pncclMemFree", (const void*)&pncclMemFree},
    {"ncclRecv", (const void*)&ncclRecv},
    {"pncclRecv", (const void*)&pncclRecv},
    {"ncclRedOpCreatePreMulSum", (const void*)&ncclRedOpCreatePreMulSum},
    {"pncclRedOpCreatePreMulSum", (const void*)&pncclRedOpCreatePreMulSum},
    {"ncclRedOpDestroy", (const void*)&ncclRedOpDestroy},
    {"pncclRedOpDestroy", (const void*)&pncclRedOpDestroy},
    {"ncclReduce", (const void*)&ncclReduce},
    {"pncclReduce", (const void*)&pncclReduce},
    {"ncclReduceScatter", (const void*)&ncclReduceScatter},
    {"pncclReduceScatter", (const void*)&pncclReduceScatter},
    {"ncclResetDebugInit", (const void*)&ncclResetDebugInit},
    {"pncclResetDebugInit", (const void*)&pncclResetDebugInit},
    {"ncclScatter", (const void*)&ncclScatter},
    {"pncclScatter", (const void*)&pncclScatter},
    {"ncclSend", (const void*)&ncclSend},
    {"pncclSend", (const void*)&pncclSend},
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
#define PLEXUS_BOTH(f) {#f, (const void*)&f}, {"p" #f, (const void*)&p##f}
    PLEXUS_BOTH(ncclCommGetUniqueId),
    PLEXUS_BOTH(ncclCommGrow),
    PLEXUS_BOTH(ncclCommSuspend),
    PLEXUS_BOTH(ncclCommResume),
    PLEXUS_BOTH(ncclCommMemStats),
    PLEXUS_BOTH(ncclWinGetUserPtr),
    PLEXUS_BOTH(ncclPutSignal),
    PLEXUS_BOTH(ncclSignal),
    PLEXUS_BOTH(ncclWaitSignal),
    PLEXUS_BOTH(ncclParamBind),
    PLEXUS_BOTH(ncclParamGetI8),
    PLEXUS_BOTH(ncclParamGetI16),
    PLEXUS_BOTH(ncclParamGetI32),
    PLEXUS_BOTH(ncclParamGetI64),
    PLEXUS_BOTH(ncclParamGetU8),
    PLEXUS_BOTH(ncclParamGetU16),
    PLEXUS_BOTH(ncclParamGetU32),
    PLEXUS_BOTH(ncclParamGetU64),
    PLEXUS_BOTH(ncclParamGetStr),
    PLEXUS_BOTH(ncclParamGet),
    PLEXUS_BOTH(ncclParamGetParameter),
    PLEXUS_BOTH(ncclParamGetAllParameterKeys),
    PLEXUS_BOTH(ncclParamDumpAll),
#endif
};

int main() {
  int missing = 0;
  for (const Entry& e : kEntries)
    if (!e.fn) {
      std::printf("missing: %s\n", e.name);
      missing++;
    }
  std::printf("%zu functions of NVIDIA's nccl.h %d.%d.%d resolved in libplexus, %d missing\n",
              sizeof(kEntries) / sizeof(kEntries[0]), NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, missing);
  return missing ? 1 : 0;
}
