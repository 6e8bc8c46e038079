// Zero-copy point-to-point: messages of 64 KiB and more go straight into the receiver's buffer when
// the sender can address it (ranks of one process, registered ncclMemAlloc memory between processes,
// or any memory of another process through process_vm_writev) and through the connections' slots
// otherwise (PLEXUS_CMA=0, or the kernel refuses process_vm_writev: a seccomp filter here). Checked by content and by the
// communicator's counters (plexusCommGetStats), mixed with small messages and collectives on the
// same connectors.
#include <doctest/doctest.h>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "harness.h"

namespace {

int32_t value(int from, int to, size_t i) { return (int32_t)(from * 1000003 + to * 7919 + (int32_t)(i % 100003)); }

// Buffers either from malloc or from ncclMemAlloc, registered with the communicator.
struct Buffers {
  ncclComm_t comm;
  bool registered;
  int32_t *send = nullptr, *recv = nullptr;
  void *sendReg = nullptr, *recvReg = nullptr;
  size_t bytes;
  Buffers(ncclComm_t c, size_t count, bool reg) : comm(c), registered(reg), bytes(count * sizeof(int32_t)) {
    if (reg) {
      ncclMemAlloc((void**)&send, bytes);
      ncclMemAlloc((void**)&recv, bytes);
      ncclCommRegister(comm, send, bytes, &sendReg);
      ncclCommRegister(comm, recv, bytes, &recvReg);
    } else {
      send = (int32_t*)malloc(bytes);
      recv = (int32_t*)malloc(bytes);
    }
  }
  ~Buffers() {
    if (registered) {
      ncclCommDeregister(comm, sendReg);
      ncclCommDeregister(comm, recvReg);
      ncclMemFree(send);
      ncclMemFree(recv);
    } else {
      free(send);
      free(recv);
    }
  }
};

// AlltoAll of `count` int32 per pair (grouped send/recv), then a small ring exchange and an AllReduce
// on the same connectors, each checked; returns problems, and the bytes received zero-copy.
long exchange(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, size_t count, bool registered,
              uint64_t* zeroCopy) {
  Buffers b(comm, count * nranks, registered);
  if (!b.send || !b.recv || (registered && (!b.sendReg || !b.recvReg))) return 1000;
  for (int p = 0; p < nranks; p++)
    for (size_t i = 0; i < count; i++) b.send[p * count + i] = value(rank, p, i);
  memset(b.recv, 0xff, b.bytes);
  plexusCommStats_t before, after;
  CHECK_NCCL(plexusCommGetStats(comm, &before));
  long bad = 0;
  for (int round = 0; round < 3; round++) {
    CHECK_NCCL(ncclAlltoAll(b.send, b.recv, count, ncclInt32, comm, stream));
    CHECK_NCCL(plexusStreamSynchronize(stream));
    for (int p = 0; p < nranks; p++)
      for (size_t i = 0; i < count; i++) bad += b.recv[p * count + i] != value(p, rank, i);
    // A small message and a collective on the same connectors between the large ones.
    int small = rank, got = -1;
    const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclSend(&small, 1, ncclInt32, next, comm, stream));
    CHECK_NCCL(ncclRecv(&got, 1, ncclInt32, prev, comm, stream));
    CHECK_NCCL(ncclGroupEnd());
    float f = 1.0f;
    CHECK_NCCL(ncclAllReduce(&f, &f, 1, ncclFloat32, ncclSum, comm, stream));
    CHECK_NCCL(plexusStreamSynchronize(stream));
    bad += got != prev;
    bad += f != (float)nranks;
  }
  CHECK_NCCL(plexusCommGetStats(comm, &after));
  *zeroCopy = after.p2pZeroCopyBytes - before.p2pZeroCopyBytes;
  if (bad) fprintf(stderr, "rank %d: %ld wrong (count %zu, registered %d)\n", rank, bad, count, (int)registered);
  return bad;
}

// Makes process_vm_writev fail with EPERM in every thread of this process, as ptrace rules would.
bool denyProcessVmWritev() {
  sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_writev, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{(unsigned short)(sizeof f / sizeof f[0]), f};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) == 0;
}

// Processes: registered ncclMemAlloc buffers go zero-copy (mapped memfd); malloc'ed ones too through
// process_vm_writev, unless PLEXUS_CMA=0 or the kernel refuses (PLEXUS_TEST_DENY_CMA=1): then the
// slots carry them, and the data is right either way.
long processScenario(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  const char* cma = getenv("PLEXUS_CMA");
  const char* deny = getenv("PLEXUS_TEST_DENY_CMA");
  const bool denied = deny && !strcmp(deny, "1");
  if (denied && !denyProcessVmWritev()) {
    fprintf(stderr, "rank %d: cannot install the seccomp filter: %s\n", rank, strerror(errno));
    return 1;
  }
  const bool viaCma = !(cma && !strcmp(cma, "0")) && !denied;
  const size_t count = 100000;  // 400 KB per pair
  long bad = 0;
  uint64_t zc = 0;
  bad += exchange(rank, nranks, comm, stream, count, true, &zc);
  const uint64_t expect = 3ull * (nranks - 1) * count * sizeof(int32_t);
  if (zc != expect) {
    fprintf(stderr, "rank %d: %llu bytes zero-copy with registered buffers, expected %llu\n", rank,
            (unsigned long long)zc, (unsigned long long)expect);
    bad++;
  }
  bad += exchange(rank, nranks, comm, stream, count, false, &zc);
  if (zc != (viaCma ? expect : 0)) {
    fprintf(stderr, "rank %d: %llu bytes zero-copy with malloc'ed buffers between processes, expected %llu\n",
            rank, (unsigned long long)zc, (unsigned long long)(viaCma ? expect : 0));
    bad++;
  }
  return bad;
}

harness::Scenario zeroCopyProcesses("zero-copy-processes", processScenario);

// Processes on different nodes (the net transport and its proxy): a large message goes from the sender's buffer to
// the plugin and from the plugin into the receiver's buffer, registered or malloc'ed, unless PLEXUS_NET_P2P_PTR=0;
// a small one goes through the slots. The data is right either way.
long netScenario(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  const char* ptr = getenv("PLEXUS_NET_P2P_PTR");
  const bool byPtr = !(ptr && !strcmp(ptr, "0"));
  long bad = 0;
  uint64_t zc = 0;
  bad += exchange(rank, nranks, comm, stream, 1000, false, &zc);
  if (zc != 0) {
    fprintf(stderr, "rank %d: %llu bytes of 4 KB messages zero-copy across nodes, expected none\n", rank,
            (unsigned long long)zc);
    bad++;
  }
  const size_t count = 300000;  // 1.2 MB per pair: three slots' worth, the last one partly
  const uint64_t expect = byPtr ? 3ull * (nranks - 1) * count * sizeof(int32_t) : 0;
  for (bool registered : {false, true}) {
    bad += exchange(rank, nranks, comm, stream, count, registered, &zc);
    if (zc != expect) {
      fprintf(stderr, "rank %d: %llu bytes zero-copy across nodes (registered %d), expected %llu\n", rank,
              (unsigned long long)zc, (int)registered, (unsigned long long)expect);
      bad++;
    }
  }
  return bad;
}

harness::Scenario zeroCopyNet("zero-copy-net", netScenario);

}  // namespace

TEST_CASE("zero-copy point-to-point: ranks as threads write into each other's buffers") {
  CHECK(harness::runThreads(3, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          uint64_t zc = 0;
          // Below the threshold: slots; above: zero-copy, registered or not.
          bad += exchange(rank, nranks, comm, stream, 1000, false, &zc);
          bad += zc != 0;
          for (bool reg : {false, true}) {
            bad += exchange(rank, nranks, comm, stream, 300000, reg, &zc);
            bad += zc != 3ull * (nranks - 1) * 300000 * sizeof(int32_t);
          }
          return bad;
        }) == 0);
}

TEST_CASE("zero-copy point-to-point between processes (2, 3): ncclMemAlloc memory mapped, any memory by "
          "process_vm_writev") {
  for (int n : {2, 3}) {
    CAPTURE(n);
    CHECK(harness::runProcesses("zero-copy-processes", n) == 0);
  }
}

TEST_CASE("zero-copy point-to-point between processes: without process_vm_writev (PLEXUS_CMA=0, or refused by "
          "the kernel) the slots carry the data") {
  for (const char* var : {"PLEXUS_CMA=0", "PLEXUS_TEST_DENY_CMA=1"}) {
    CAPTURE(var);
    const std::string kv = var;
    const std::string k = kv.substr(0, kv.find('=')), v = kv.substr(kv.find('=') + 1);
    setenv(k.c_str(), v.c_str(), 1);
    CHECK(harness::runProcesses("zero-copy-processes", 3) == 0);
    unsetenv(k.c_str());
  }
}

TEST_CASE("zero-copy point-to-point across nodes (2, 3): the net proxy sends from and receives into the user's "
          "buffers, and PLEXUS_NET_P2P_PTR=0 keeps the slots") {
  for (int n : {2, 3}) {
    CAPTURE(n);
    CHECK(harness::runProcesses("zero-copy-net", n, 120, 1) == 0);
  }
  setenv("PLEXUS_NET_P2P_PTR", "0", 1);
  CHECK(harness::runProcesses("zero-copy-net", 2, 120, 1) == 0);
  unsetenv("PLEXUS_NET_P2P_PTR");
}
