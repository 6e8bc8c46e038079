// Compiled against NVIDIA's nccl.h (not ours) and linked against libplexus: an NCCL program builds and runs
// unchanged. Built twice: against the CUDA toolkit's 2.28 header (whose 80-byte ncclConfig_t Plexus reads as the
// prefix of 2.30's) and against NVIDIA's 2.30.7 header (its new calls too). It declares the Plexus calls it needs.
#include <nccl.h>

#include <cstdio>
#include <cstring>

extern "C" ncclResult_t plexusStreamSynchronize(cudaStream_t stream);
extern "C" ncclResult_t plexusSetDevice(int device);

static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId");
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
static_assert(sizeof(ncclConfig_t) == 96, "ncclConfig_t (2.30)");
#else
static_assert(sizeof(ncclConfig_t) == 80, "ncclConfig_t (2.28)");
#endif

#define OK(call)                                                                 \
  do {                                                                           \
    ncclResult_t r = (call);                                                     \
    if (r != ncclSuccess) {                                                      \
      fprintf(stderr, "%s failed: %s (%s)\n", #call, ncclGetErrorString(r), ncclGetLastError(nullptr)); \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

int main() {
  int version = 0;
  OK(ncclGetVersion(&version));
  ncclComm_t comms[2];
  OK(ncclCommInitAll(comms, 2, nullptr));
  float a[64], b[64];
  for (int i = 0; i < 64; i++) a[i] = (float)i, b[i] = 1.0f;
  OK(ncclGroupStart());
  OK(ncclAllReduce(a, a, 64, ncclFloat, ncclSum, comms[0], (cudaStream_t)0));
  OK(ncclAllReduce(b, b, 64, ncclFloat, ncclSum, comms[1], (cudaStream_t)0));
  OK(ncclGroupEnd());
  // A NULL stream is the default stream of the communicator's device, as with CUDA.
  for (int dev = 0; dev < 2; dev++) {
    OK(plexusSetDevice(dev));
    OK(plexusStreamSynchronize((cudaStream_t)0));
  }
  int wrong = 0;
  for (int i = 0; i < 64; i++) wrong += a[i] != (float)i + 1.0f || b[i] != a[i];
  int rank, count, dev;
  ncclResult_t async;
  OK(ncclCommUserRank(comms[1], &rank));
  OK(ncclCommCount(comms[1], &count));
  OK(ncclCommCuDevice(comms[1], &dev));
  OK(ncclCommGetAsyncError(comms[1], &async));
  // A communicator made with this header's config: its version and size say which fields it has.
  ncclUniqueId id;
  OK(ncclGetUniqueId(&id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.commName = "abi-config";
  ncclComm_t single;
  OK(ncclCommInitRankConfig(&single, 1, id, 0, &config));
  int one = 0;
  OK(ncclCommCount(single, &one));
  wrong += one != 1;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
  // 2.30's calls: memory statistics, suspend and resume, the parameter API, a window's user pointer.
  uint64_t suspendable = 0, suspended = 1;
  OK(ncclCommMemStats(comms[0], ncclStatGpuMemSuspend, &suspendable));
  OK(ncclCommSuspend(comms[0], NCCL_SUSPEND_MEM));
  OK(ncclCommMemStats(comms[0], ncclStatGpuMemSuspended, &suspended));
  OK(ncclCommResume(comms[0]));
  wrong += suspendable == 0 || suspended != 1;
  ncclParamHandle_t h;
  int64_t buffsize = 0;
  OK(ncclParamBind(&h, "NCCL_BUFFSIZE"));
  OK(ncclParamGetI64(h, &buffsize));
  wrong += buffsize <= 0;
  void* mem = nullptr;
  void* user = nullptr;
  ncclWindow_t win;
  OK(ncclMemAlloc(&mem, 1 << 16));
  OK(ncclCommWindowRegister(single, mem, 1 << 16, &win, NCCL_WIN_COLL_SYMMETRIC));
  OK(ncclWinGetUserPtr(single, win, &user));
  wrong += user != mem;
  OK(ncclCommWindowDeregister(single, win));
  OK(ncclMemFree(mem));
#endif
  OK(ncclCommDestroy(single));
  OK(ncclCommFinalize(comms[0]));
  OK(ncclCommFinalize(comms[1]));
  OK(ncclCommDestroy(comms[0]));
  OK(ncclCommDestroy(comms[1]));
  printf("NVIDIA nccl.h %d.%d.%d program against %d: %d wrong, rank %d of %d\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
         version, wrong, rank, count);
  return wrong || rank != 1 || count != 2 || async != ncclSuccess ? 1 : 0;
}
