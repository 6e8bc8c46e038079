// Memory the communicator's device cannot use is refused at the call with ncclInvalidArgument and a message that
// names the argument:
//   cuda:        a plain malloc'ed host pointer given to a CUDA communicator (sendbuff, recvbuff, Send, Recv; also
//                inside a group, whose ncclGroupEnd must then fail and launch nothing); the communicator still works.
//   host-env:    device memory (cudaMalloc) given to a communicator forced onto the host backend by
//                PLEXUS_BACKEND=host (ctest sets it).
//   set-device:  the same, for a communicator made on a thread that called plexusSetDevice.
// A host-backend case runs in a child process: an unchecked device pointer would crash the host executor, and that
// crash must read as this check failing.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "gpu_test.h"

namespace gt {
namespace {

constexpr size_t kCount = 1024;

void expectRefused(ncclComm_t comm, ncclResult_t res, const char* call, const char* argName) {
  if (res != ncclInvalidArgument) {
    fail("%s returned %s, expected ncclInvalidArgument", call, ncclGetErrorString(res));
    return;
  }
  const char* msg = lastError(comm);
  GT_CHECK(std::strstr(msg, argName) != nullptr, "%s: the message does not name %s: \"%s\"", call, argName, msg);
  note("%s refused: %s", call, msg);
}

void cudaComm() {
  GT_CUDA(cudaSetDevice(0));
  ncclUniqueId id;
  GT_NCCL(nullptr, ncclGetUniqueId(&id));
  ncclComm_t comm;
  GT_NCCL(nullptr, ncclCommInitRank(&comm, 1, id, 0));
  plexusBackend_t b;
  GT_NCCL(comm, plexusCommGetBackend(comm, &b));
  if (b != plexusBackendCuda) fatal("a communicator made after cudaSetDevice(0) is not on the CUDA backend");
  cudaStream_t s;
  GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* dev;
  GT_CUDA(cudaMalloc(&dev, 2 * kCount * sizeof(float)));
  auto* host = static_cast<float*>(std::malloc(kCount * sizeof(float)));
  for (size_t i = 0; i < kCount; ++i) host[i] = float(i);

  expectRefused(comm, ncclAllReduce(host, dev, kCount, ncclFloat32, ncclSum, comm, s), "ncclAllReduce(malloc'ed sendbuff)",
                "sendbuff");
  expectRefused(comm, ncclAllReduce(dev, host, kCount, ncclFloat32, ncclSum, comm, s), "ncclAllReduce(malloc'ed recvbuff)",
                "recvbuff");
  expectRefused(comm, ncclAllGather(host, dev, kCount, ncclFloat32, comm, s), "ncclAllGather(malloc'ed sendbuff)",
                "sendbuff");
  {
    ncclResult_t send = ncclSuccess, recv = ncclSuccess;
    GT_NCCL(comm, ncclGroupStart());
    send = ncclSend(host, kCount, ncclFloat32, 0, comm, s);
    recv = ncclRecv(dev, kCount, ncclFloat32, 0, comm, s);
    ncclResult_t end = ncclGroupEnd();
    expectRefused(comm, send, "ncclSend(malloc'ed buffer)", "sendbuff");
    GT_CHECK(recv == ncclSuccess || recv == ncclInvalidUsage || recv == ncclInvalidArgument,
             "ncclRecv after a refused ncclSend in the group returned %s", ncclGetErrorString(recv));
    GT_CHECK(end != ncclSuccess, "ncclGroupEnd succeeded although a call in the group was refused");
  }
  {
    ncclResult_t recv;
    GT_NCCL(comm, ncclGroupStart());
    recv = ncclRecv(host, kCount, ncclFloat32, 0, comm, s);
    ncclResult_t end = ncclGroupEnd();
    expectRefused(comm, recv, "ncclRecv(malloc'ed buffer)", "recvbuff");
    GT_CHECK(end != ncclSuccess, "ncclGroupEnd succeeded although ncclRecv was refused");
  }
  GT_CUDA(cudaStreamSynchronize(s));
  // Nothing ran, and the communicator still works on device memory.
  toDevice(dev, host, kCount * sizeof(float), s);
  devMemset(dev + kCount, 0xFF, kCount * sizeof(float), s);
  GT_NCCL(comm, ncclAllReduce(dev, dev + kCount, kCount, ncclFloat32, ncclSum, comm, s));
  std::vector<float> out(kCount);
  toHost(out.data(), dev + kCount, kCount * sizeof(float), s);
  long wrong = 0;
  for (size_t i = 0; i < kCount; ++i) wrong += out[i] != float(i);
  GT_CHECK(wrong == 0, "%ld wrong elements of a valid AllReduce after the refused calls", wrong);
  GT_NCCL(comm, ncclCommDestroy(comm));
  GT_CUDA(cudaStreamDestroy(s));
  GT_CUDA(cudaFree(dev));
  std::free(host);
}

// A communicator on the host backend (forced by PLEXUS_BACKEND=host, or plexusSetDevice when setDevice) must refuse
// device memory.
void hostComm(bool setDevice) {
  float* dev;
  GT_CUDA(cudaSetDevice(0));
  GT_CUDA(cudaMalloc(&dev, kCount * sizeof(float)));
  if (setDevice) GT_NCCL(nullptr, plexusSetDevice(0));
  ncclUniqueId id;
  GT_NCCL(nullptr, ncclGetUniqueId(&id));
  ncclComm_t comm;
  GT_NCCL(nullptr, ncclCommInitRank(&comm, 1, id, 0));
  plexusBackend_t b;
  GT_NCCL(comm, plexusCommGetBackend(comm, &b));
  if (b != plexusBackendHost)
    fatal("the communicator is not on the host backend (%s)", setDevice ? "plexusSetDevice(0) was called" :
                                                                          "PLEXUS_BACKEND=host is expected");
  cudaStream_t s;
  GT_NCCL(comm, plexusStreamCreate(&s));
  std::vector<float> host(kCount, 1.0f), out(kCount, 0.0f);
  std::fflush(nullptr);
  expectRefused(comm, ncclAllReduce(dev, out.data(), kCount, ncclFloat32, ncclSum, comm, s),
                "ncclAllReduce(device sendbuff) on the host backend", "sendbuff");
  expectRefused(comm, ncclAllReduce(host.data(), dev, kCount, ncclFloat32, ncclSum, comm, s),
                "ncclAllReduce(device recvbuff) on the host backend", "recvbuff");
  expectRefused(comm, ncclBroadcast(dev, dev, kCount, ncclFloat32, 0, comm, s),
                "ncclBroadcast(device buffer) on the host backend", "sendbuff");
  GT_NCCL(comm, plexusStreamSynchronize(s));
  // Host memory still works.
  GT_NCCL(comm, ncclAllReduce(host.data(), out.data(), kCount, ncclFloat32, ncclSum, comm, s));
  GT_NCCL(comm, plexusStreamSynchronize(s));
  long wrong = 0;
  for (float v : out) wrong += v != 1.0f;
  GT_CHECK(wrong == 0, "%ld wrong elements of a valid host-backend AllReduce", wrong);
  GT_NCCL(comm, plexusStreamDestroy(s));
  GT_NCCL(comm, ncclCommDestroy(comm));
  GT_CUDA(cudaFree(dev));
}

}  // namespace

int testPointers(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "";
  if (which == "cuda") {
    requireDevice(false);
    startWatchdog(120);
    cudaComm();
    return finish("pointers: host memory refused by a CUDA communicator");
  }
  if (which != "host-env" && which != "set-device") fatal("usage: pointers <cuda|host-env|set-device>");
  const bool setDevice = which == "set-device";
  if (!setDevice) {
    const char* b = std::getenv("PLEXUS_BACKEND");
    if (!b || std::strcmp(b, "host") != 0) fatal("pointers host-env runs with PLEXUS_BACKEND=host");
  }
  requireDevice(true);
  const std::string name = setDevice ? "pointers: device memory refused by a host-backend communicator (plexusSetDevice)"
                                     : "pointers: device memory refused by a host-backend communicator (PLEXUS_BACKEND=host)";
  pid_t pid = fork();
  if (pid < 0) fatal("fork failed");
  if (pid == 0) {
    startWatchdog(120);
    hostComm(setDevice);
    std::fflush(nullptr);
    std::_Exit(failures() ? 1 : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status))
    fail("the test process died of signal %d (%s): the device pointer reached the host backend unchecked",
         WTERMSIG(status), strsignal(WTERMSIG(status)));
  else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail("the test process exited with status %d", WEXITSTATUS(status));
  return finish(name);
}

}  // namespace gt
