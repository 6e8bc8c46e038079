// Every CUDA memory path of p2p-nvlink, through the plugin's table, against the stand-in driver (fake_cuda.cc) in
// real processes: what memory each case takes (the driver calls it made), that the connectors hold pointers the
// rank's device can use, that bytes written through the sender's connector are the receiver's, and that failures
// end with a message rather than a hang.
#include <doctest/doctest.h>

#include <string>

#include "pair.h"

using p2ptest::PairSpec;

namespace {

std::string run(const PairSpec& spec) { return p2ptest::runPair(P2P_PLUGIN, P2P_FAKE_CUDA, spec); }

// The buffer-free environment of most cases: no knob of a developer's shell leaks in.
PairSpec base() {
  PairSpec s;
  s.env = {"PLEXUS_P2P_READ=0", "PLEXUS_P2P_DISABLE=0", "PLEXUS_P2P_IPC=cumem", "PLEXUS_P2P_CONNECT_TIMEOUT=30"};
  return s;
}

PairSpec twoProcesses() {
  PairSpec s = base();
  s.sameProcess = false;
  s.sameSpace = 0;
  s.ptrExchange = 0;  // no plain address to hand over between processes on CUDA
  return s;
}

// Each process sees only its own GPU (CUDA_VISIBLE_DEVICES=<local rank>, as Slurm does).
PairSpec ownGpuOnly(PairSpec s) {
  s.sendEnv.push_back("P2P_FAKE_CUDA_DEVICES=1");
  s.sendEnv.push_back("P2P_FAKE_CUDA_BUS=0000:1A:00.0");
  s.recvEnv.push_back("P2P_FAKE_CUDA_DEVICES=1");
  s.recvEnv.push_back("P2P_FAKE_CUDA_BUS=0000:3B:00.0");
  return s;
}

}  // namespace

TEST_CASE("cuda paths: one process, one GPU: device memory, one address space, either side freed first") {
  for (bool receiverFirst : {false, true}) {
    PairSpec s = base();
    s.sameProcess = true;
    s.sameSpace = 1;
    s.ptrExchange = 1;
    s.freeReceiverFirst = receiverFirst;
    s.sendCalls = {"cuMemAlloc", "cuMemFree", "cuMemsetD8Async"};
    s.sendNoCalls = {"cuMemHostAlloc", "cuCtxEnablePeerAccess", "cuMemCreate", "cuIpcGetMemHandle"};
    CHECK_MESSAGE(run(s) == "", "receiver freed first: " << receiverFirst);
  }
}

TEST_CASE("cuda paths: one process, two GPUs with peer access: peer access enabled, one address space") {
  PairSpec s = base();
  s.sameProcess = true;
  s.sendDevice = 0;
  s.recvDevice = 1;
  s.sameSpace = 1;
  s.ptrExchange = 1;
  s.sendCalls = {"cuDeviceCanAccessPeer", "cuCtxEnablePeerAccess", "cuMemAlloc"};
  s.sendNoCalls = {"cuMemHostAlloc"};
  CHECK(run(s) == "");
}

TEST_CASE("cuda paths: one process, two GPUs without peer access: mapped host memory, device views") {
  PairSpec s = base();
  s.sameProcess = true;
  s.sendDevice = 0;
  s.recvDevice = 1;
  s.env.push_back("P2P_FAKE_CUDA_NO_PEER=1");
  s.sameSpace = 0;
  s.ptrExchange = 0;
  s.sendCalls = {"cuMemHostAlloc", "cuMemHostGetDevicePointer", "cuMemFreeHost"};
  s.sendNoCalls = {"cuMemAlloc", "cuCtxEnablePeerAccess"};
  CHECK(run(s) == "");
}

TEST_CASE("cuda paths: one process, PLEXUS_P2P_DISABLE: mapped host memory even on one GPU") {
  PairSpec s = base();
  s.sameProcess = true;
  s.env.push_back("PLEXUS_P2P_DISABLE=1");
  s.sameSpace = 0;
  s.ptrExchange = 0;
  s.sendCalls = {"cuMemHostAlloc"};
  s.sendNoCalls = {"cuMemAlloc"};
  CHECK(run(s) == "");
}

TEST_CASE("cuda paths: two processes, one GPU: cuMem memory whose descriptor crosses the Unix socket") {
  PairSpec s = twoProcesses();
  s.sendCalls = s.recvCalls = {"cuMemGetAllocationGranularity",
                               "cuMemCreate",
                               "cuMemAddressReserve",
                               "cuMemMap",
                               "cuMemSetAccess",
                               "cuMemExportToShareableHandle",
                               "cuMemImportFromShareableHandle",
                               "cuMemUnmap",
                               "cuMemRelease",
                               "cuMemAddressFree"};
  s.sendNoCalls = s.recvNoCalls = {"cuIpcGetMemHandle", "cuMemHostRegister", "cuMemAlloc"};
  s.simpleInSender = 0;  // P2P write: the Simple buffer is the receiver's
  CHECK(run(s) == "");
  s.freeReceiverFirst = true;
  CHECK(run(s) == "");
}

TEST_CASE("cuda paths: two processes, several connections in flight at once") {
  PairSpec s = twoProcesses();
  s.connections = 6;
  s.sendCalls = {"cuMemImportFromShareableHandle"};
  CHECK(run(s) == "");
}

TEST_CASE("cuda paths: legacy CUDA IPC where asked, or where cuMem is unavailable or refused") {
  SUBCASE("PLEXUS_P2P_IPC=legacy") {
    PairSpec s = twoProcesses();
    s.env.push_back("PLEXUS_P2P_IPC=legacy");
    s.sendCalls = s.recvCalls = {"cuMemAlloc", "cuIpcGetMemHandle", "cuIpcOpenMemHandle", "cuIpcCloseMemHandle"};
    s.sendNoCalls = s.recvNoCalls = {"cuMemCreate", "cuMemHostRegister"};
    CHECK(run(s) == "");
  }
  SUBCASE("NCCL_CUMEM_ENABLE=0") {
    PairSpec s = twoProcesses();
    s.env = {"PLEXUS_P2P_READ=0", "PLEXUS_P2P_DISABLE=0", "NCCL_CUMEM_ENABLE=0"};
    s.sendCalls = {"cuIpcOpenMemHandle"};
    s.sendNoCalls = {"cuMemCreate"};
    CHECK(run(s) == "");
  }
  SUBCASE("no cuMem file descriptors on the device") {
    PairSpec s = twoProcesses();
    s.env.push_back("P2P_FAKE_CUDA_NO_VMM=1");
    s.sendCalls = {"cuIpcOpenMemHandle"};
    s.sendNoCalls = {"cuMemCreate"};
    CHECK(run(s) == "");
  }
  SUBCASE("cuMemCreate fails") {
    PairSpec s = twoProcesses();
    s.env.push_back("P2P_FAKE_CUDA_FAIL=cuMemCreate");
    s.sendCalls = {"cuMemCreate", "cuIpcGetMemHandle", "cuIpcOpenMemHandle"};
    CHECK(run(s) == "");
  }
}

TEST_CASE("cuda paths: two processes, two GPUs without peer access: registered /dev/shm memory") {
  SUBCASE("both GPUs visible: cuDeviceCanAccessPeer says no, nothing is tried") {
    PairSpec s = twoProcesses();
    s.sendDevice = 0;
    s.recvDevice = 1;
    s.env.push_back("P2P_FAKE_CUDA_NO_PEER=1");
    s.sendCalls = s.recvCalls = {"cuDeviceCanAccessPeer", "cuMemHostRegister", "cuMemHostGetDevicePointer",
                                 "cuMemHostUnregister"};
    s.sendNoCalls = s.recvNoCalls = {"cuMemImportFromShareableHandle"};
    CHECK(run(s) == "");
  }
  SUBCASE("each sees its own GPU only: the mapping is tried, refused, and host memory replaces it") {
    PairSpec s = ownGpuOnly(twoProcesses());
    s.env.push_back("P2P_FAKE_CUDA_NO_PEER=1");
    s.sendCalls = s.recvCalls = {"cuMemImportFromShareableHandle", "cuMemSetAccess", "cuMemHostRegister"};
    CHECK(run(s) == "");
  }
  SUBCASE("legacy IPC, own GPU only: cuIpcOpenMemHandle refused, host memory replaces it") {
    PairSpec s = ownGpuOnly(twoProcesses());
    s.env.push_back("P2P_FAKE_CUDA_NO_PEER=1");
    s.env.push_back("PLEXUS_P2P_IPC=legacy");
    s.sendCalls = s.recvCalls = {"cuIpcOpenMemHandle", "cuMemHostRegister"};
    CHECK(run(s) == "");
  }
  SUBCASE("PLEXUS_P2P_DISABLE on the receiver only: its memory is host memory from the start, the sender's moves") {
    PairSpec s = twoProcesses();
    s.recvEnv.push_back("PLEXUS_P2P_DISABLE=1");
    s.recvCalls = {"cuMemHostRegister"};
    s.recvNoCalls = {"cuMemCreate", "cuMemImportFromShareableHandle"};
    s.sendCalls = {"cuMemCreate", "cuMemHostRegister", "cuMemRelease"};
    CHECK(run(s) == "");
  }
}

TEST_CASE("cuda paths: two processes, two GPUs with peer access (each sees its own only): cuMem memory") {
  PairSpec s = ownGpuOnly(twoProcesses());
  s.sendNoCalls = s.recvNoCalls = {"cuMemHostRegister"};
  s.sendCalls = {"cuMemImportFromShareableHandle"};
  CHECK(run(s) == "");
}

TEST_CASE("cuda paths: P2P read mode puts the Simple buffer in the sender's memory") {
  SUBCASE("two processes") {
    PairSpec s = twoProcesses();
    s.env.push_back("PLEXUS_P2P_READ=1");
    s.simpleInSender = 1;
    CHECK(run(s) == "");
  }
  SUBCASE("one process") {
    PairSpec s = base();
    s.sameProcess = true;
    s.env.push_back("PLEXUS_P2P_READ=1");
    s.sameSpace = 1;
    CHECK(run(s) == "");
  }
  SUBCASE("one process, no peer access (host memory)") {
    PairSpec s = base();
    s.sameProcess = true;
    s.sendDevice = 0;
    s.recvDevice = 1;
    s.env.push_back("PLEXUS_P2P_READ=1");
    s.env.push_back("P2P_FAKE_CUDA_NO_PEER=1");
    s.sameSpace = 0;
    CHECK(run(s) == "");
  }
  SUBCASE("on one rank only: both refuse, naming the knob") {
    PairSpec s = twoProcesses();
    s.sendEnv.push_back("PLEXUS_P2P_READ=1");
    s.expectFailure = true;
    s.failMessage = "PLEXUS_P2P_READ|rank";
    CHECK(run(s) == "");
  }
}

TEST_CASE("cuda paths: a peer process that dies while connecting ends connect with an error, at once") {
  PairSpec s = twoProcesses();
  s.env.push_back("PLEXUS_P2P_CONNECT_TIMEOUT=60");  // not the timeout: the death itself
  s.fault = PairSpec::ReceiverDies;
  s.expectFailure = true;
  s.failMessage = "sending to rank 1|pid";
  s.failWithin = 10;
  CHECK(run(s) == "");
}

TEST_CASE("cuda paths: a peer that never connects: in progress, then an error at PLEXUS_P2P_CONNECT_TIMEOUT") {
  PairSpec s = twoProcesses();
  s.env.push_back("PLEXUS_P2P_CONNECT_TIMEOUT=2");
  s.fault = PairSpec::ReceiverSilent;
  s.expectFailure = true;
  s.failMessage = "did not send|PLEXUS_P2P_CONNECT_TIMEOUT|CUDA device 0";
  s.failAfter = 1.9;
  s.failWithin = 10;
  CHECK(run(s) == "");
}

TEST_CASE("cuda paths: a failing driver call is an error naming the call, the rank and the device") {
  SUBCASE("cuIpcGetMemHandle") {
    PairSpec s = twoProcesses();
    s.env.push_back("PLEXUS_P2P_IPC=legacy");
    s.env.push_back("P2P_FAKE_CUDA_FAIL=cuIpcGetMemHandle");
    s.expectFailure = true;
    s.failMessage = "cuIpcGetMemHandle failed: CUDA_ERROR_OUT_OF_MEMORY|rank 0 (pid|CUDA device 0 0000:1a:00.0|rank 1";
    CHECK(run(s) == "");
  }
  SUBCASE("cuMemAlloc, one process") {
    PairSpec s = base();
    s.sameProcess = true;
    s.env.push_back("P2P_FAKE_CUDA_FAIL=cuMemAlloc");
    s.expectFailure = true;
    s.failMessage = "cuMemAlloc failed|NCCL_BUFFSIZE";
    CHECK(run(s) == "");
  }
  SUBCASE("cuCtxEnablePeerAccess") {
    PairSpec s = base();
    s.sameProcess = true;
    s.sendDevice = 0;
    s.recvDevice = 1;
    s.env.push_back("P2P_FAKE_CUDA_FAIL=cuCtxEnablePeerAccess");
    s.expectFailure = true;
    s.failMessage = "cuCtxEnablePeerAccess failed|PLEXUS_P2P_DISABLE";
    CHECK(run(s) == "");
  }
  SUBCASE("no CUDA driver at all: the setup says so; the plugin loaded fine") {
    PairSpec s = base();
    s.sameProcess = true;
    s.expectFailure = true;
    s.failMessage = "the CUDA driver cannot be used|could not be loaded";
    CHECK(p2ptest::runPair(P2P_PLUGIN, "/nonexistent/libcuda.so.1", s) == "");
  }
}
