// ncclCommInitAll on the CUDA backend: one communicator per listed device, each on that device, and an AllReduce
// among them. devlist {0} and NULL (every visible device) must work; {0,0,0} (three ranks on one GPU) must either
// work or be refused with ncclInvalidUsage as NCCL refuses a duplicate device; which one is reported. (Three ranks
// on one GPU through one thread per rank, or one thread's group of ncclCommInitRank, are in the collectives tests.)
#include <cstring>

#include "gpu_test.h"

namespace gt {
namespace {

void allReduceAll(std::vector<ncclComm_t>& comms, const std::vector<int>& devs, const char* what) {
  const int n = int(comms.size());
  const size_t count = 100003;
  std::vector<float*> bufs(n);
  std::vector<cudaStream_t> streams(n);
  std::vector<float> host(count);
  for (int r = 0; r < n; ++r) {
    GT_CUDA(cudaSetDevice(devs[r]));
    plexusBackend_t b;
    GT_NCCL(comms[r], plexusCommGetBackend(comms[r], &b));
    GT_CHECK(b == plexusBackendCuda, "%s: rank %d is not on the CUDA backend", what, r);
    int dev = -1, rank = -1;
    GT_NCCL(comms[r], ncclCommCuDevice(comms[r], &dev));
    GT_NCCL(comms[r], ncclCommUserRank(comms[r], &rank));
    GT_CHECK(dev == devs[r] && rank == r, "%s: comms[%d] is rank %d on device %d, expected rank %d on device %d", what,
             r, rank, dev, r, devs[r]);
    GT_CUDA(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    GT_CUDA(cudaMalloc(&bufs[r], count * sizeof(float)));
    for (size_t i = 0; i < count; ++i) host[i] = float((i + r) % 50);
    toDevice(bufs[r], host.data(), count * sizeof(float), streams[r]);
  }
  GT_NCCL(nullptr, ncclGroupStart());
  for (int r = 0; r < n; ++r)
    GT_NCCL(comms[r], ncclAllReduce(bufs[r], bufs[r], count, ncclFloat32, ncclSum, comms[r], streams[r]));
  GT_NCCL(nullptr, ncclGroupEnd());
  for (int r = 0; r < n; ++r) {
    GT_CUDA(cudaSetDevice(devs[r]));
    toHost(host.data(), bufs[r], count * sizeof(float), streams[r]);
    long wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int q = 0; q < n; ++q) want += float((i + q) % 50);
      wrong += host[i] != want;
    }
    GT_CHECK(wrong == 0, "%s: rank %d: %ld wrong elements", what, r, wrong);
    GT_CUDA(cudaFree(bufs[r]));
    GT_CUDA(cudaStreamDestroy(streams[r]));
  }
  GT_NCCL(nullptr, ncclGroupStart());
  for (ncclComm_t c : comms) GT_NCCL(c, ncclCommFinalize(c));
  GT_NCCL(nullptr, ncclGroupEnd());
  for (ncclComm_t c : comms) GT_NCCL(c, ncclCommDestroy(c));
  note("%s: %d communicators, AllReduce checked", what, n);
}

}  // namespace

int testInitAll(int, char**) {
  requireDevice(false);
  startWatchdog(180);
  int ndev = 0;
  GT_CUDA(cudaGetDeviceCount(&ndev));
  GT_CUDA(cudaSetDevice(0));
  {
    setPhase("ncclCommInitAll devlist {0}");
    std::vector<ncclComm_t> comms(1);
    int devs[1] = {0};
    GT_NCCL(nullptr, ncclCommInitAll(comms.data(), 1, devs));
    allReduceAll(comms, {0}, "ncclCommInitAll {0}");
  }
  {
    setPhase("ncclCommInitAll devlist NULL");
    std::vector<ncclComm_t> comms(ndev);
    GT_NCCL(nullptr, ncclCommInitAll(comms.data(), ndev, nullptr));
    std::vector<int> devs(ndev);
    for (int i = 0; i < ndev; ++i) devs[i] = i;
    allReduceAll(comms, devs, "ncclCommInitAll NULL (every device)");
  }
  {
    setPhase("ncclCommInitAll devlist {0,0,0}");
    std::vector<ncclComm_t> comms(3, nullptr);
    int devs[3] = {0, 0, 0};
    // Several ranks on one GPU: NCCL refuses it, Plexus allows it.
    GT_NCCL(nullptr, ncclCommInitAll(comms.data(), 3, devs));
    allReduceAll(comms, {0, 0, 0}, "ncclCommInitAll {0,0,0}");
  }
  return finish("ncclCommInitAll on the CUDA backend");
}

}  // namespace gt
