// Compiled against NVIDIA's nccl.h from the CUDA toolkit (not ours) and linked against libplexus: an
// NCCL program builds and runs unchanged. It declares the one Plexus call it needs itself.
#include <nccl.h>

#include <cstdio>
#include <cstring>

extern "C" ncclResult_t plexusStreamSynchronize(cudaStream_t stream);
extern "C" ncclResult_t plexusSetDevice(int device);

static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId");
static_assert(sizeof(ncclConfig_t) == 80, "ncclConfig_t (2.28)");

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
  OK(ncclCommFinalize(comms[0]));
  OK(ncclCommFinalize(comms[1]));
  OK(ncclCommDestroy(comms[0]));
  OK(ncclCommDestroy(comms[1]));
  printf("NVIDIA nccl.h %d.%d.%d program against %d: %d wrong, rank %d of %d\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
         version, wrong, rank, count);
  return wrong || rank != 1 || count != 2 || async != ncclSuccess ? 1 : 0;
}
