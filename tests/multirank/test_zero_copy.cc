// Zero-copy point-to-point: messages of 64 KiB and more go straight into the receiver's buffer when
// the sender can address it (ranks of one process, registered ncclMemAlloc memory between processes,
// or any memory of another process through process_vm_writev) and through the connections' slots
// otherwise (PLEXUS_CMA=0, or the kernel refuses process_vm_writev: a seccomp filter here). Checked by content and by
// the communicator's counters (plexusCommGetStats), mixed with small messages and collectives on the same connectors.
#include <dlfcn.h>
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
    fprintf(stderr, "rank %d: %llu bytes zero-copy with malloc'ed buffers between processes, expected %llu\n", rank,
            (unsigned long long)zc, (unsigned long long)(viaCma ? expect : 0));
    bad++;
  }
  return bad;
}

harness::Scenario zeroCopyProcesses("zero-copy-processes", processScenario);

// Processes on different nodes (the net transport and its proxy): a large message goes from the sender's buffer to
// the plugin and from the plugin into the receiver's buffer, registered or malloc'ed, unless PLEXUS_NET_PTR=0;
// a small one goes through the slots. The data is right either way.
long netScenario(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  const char* ptr = getenv("PLEXUS_NET_PTR");
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

// The test net plugin (tests/plugins/test_net.cc, over the built-in socket net) counts the bytes isend and irecv
// are handed inside one buffer: the application's, or none of it when the runtime stages through its slots.
const std::string kWatchNet = std::string(PLEXUS_TEST_LIB_DIR) + "/../test-plugins/libnccl-net-test-v12.so";
struct Watched {
  uint64_t sent = 0, received = 0;
};

// Collectives across nodes (1 rank each): with PLEXUS_NET_PTR on (the default) the ring's steps leave from the
// application's buffers and arrive in them, as much as the ring moves: (n-1)/n of an AllReduce's buffer received
// into its output and sent from it, 1/n sent from its input (reduce-scatter's first step); an AllGather's and a
// ReduceScatter's blocks likewise. With PLEXUS_NET_PTR=0 none of it. The data is right either way.
long netCollScenario(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  const char* ptr = getenv("PLEXUS_NET_PTR");
  const bool byPtr = !(ptr && !strcmp(ptr, "0"));
  void* plugin = dlopen(kWatchNet.c_str(), RTLD_NOW | RTLD_NOLOAD);
  auto watchFn = plugin ? (void (*)(const void*, size_t))dlsym(plugin, "plexusTestNetWatch") : nullptr;
  auto watchedFn = plugin ? (void (*)(uint64_t*, uint64_t*))dlsym(plugin, "plexusTestNetWatched") : nullptr;
  if (!watchFn || !watchedFn) {
    fprintf(stderr, "rank %d: the test net plugin %s is not loaded (NCCL_NET_PLUGIN)\n", rank, kWatchNet.c_str());
    return 1;
  }
  const size_t count = (size_t)nranks * 768 * 1024;  // 3 MiB of int32 per rank and node count
  const uint64_t bytes = count * sizeof(int32_t), share = bytes / nranks;
  std::vector<int32_t> in(count), out(count);
  long bad = 0;
  auto watched = [&](const void* buf, size_t len, auto&& op) {
    watchFn(buf, len);
    ncclResult_t r = op();
    if (r == ncclSuccess) r = plexusStreamSynchronize(stream);
    if (r != ncclSuccess) {
      fprintf(stderr, "rank %d: %s\n", rank, ncclGetErrorString(r));
      bad += 1000;
    }
    Watched w;
    watchedFn(&w.sent, &w.received);
    return w;
  };
  auto expect = [&](const char* what, uint64_t got, uint64_t want) {
    if (got == (byPtr ? want : 0)) return;
    fprintf(stderr, "rank %d: %s: %llu bytes, expected %llu\n", rank, what, (unsigned long long)got,
            (unsigned long long)(byPtr ? want : 0));
    bad++;
  };
  auto fill = [&](int32_t* p, size_t n, int r) {
    for (size_t i = 0; i < n; i++) p[i] = value(r, 0, i);
  };
  // The output's first n elements against every rank's fill from element `first` on, summed in 64 bits.
  auto checkSums = [&](size_t first, size_t n) {
    for (size_t i = 0; i < n; i++) {
      int64_t sum = 0;
      for (int r = 0; r < nranks; r++) sum += value(r, 0, first + i);
      bad += out[i] != (int32_t)sum;
    }
  };

  // AllReduce out of place: the input's share leaves from the input, the rest from and into the output.
  fill(in.data(), count, rank);
  Watched fromIn = watched(
      in.data(), bytes, [&] { return ncclAllReduce(in.data(), out.data(), count, ncclInt32, ncclSum, comm, stream); });
  checkSums(0, count);
  expect("AllReduce: sent from the input", fromIn.sent, share);
  expect("AllReduce: received into the input", fromIn.received, 0);
  fill(in.data(), count, rank);
  Watched toOut = watched(
      out.data(), bytes, [&] { return ncclAllReduce(in.data(), out.data(), count, ncclInt32, ncclSum, comm, stream); });
  checkSums(0, count);
  expect("AllReduce: sent from the output", toOut.sent, bytes - share);
  expect("AllReduce: received into the output", toOut.received, bytes - share);
  // In place: all of it from and into the one buffer.
  fill(out.data(), count, rank);
  Watched inPlace = watched(out.data(), bytes, [&] {
    return ncclAllReduce(out.data(), out.data(), count, ncclInt32, ncclSum, comm, stream);
  });
  checkSums(0, count);
  expect("AllReduce in place: sent", inPlace.sent, bytes);
  expect("AllReduce in place: received", inPlace.received, bytes - share);

  // AllGather: every block but this rank's own arrives in the output, and all but the last it forwards leave it.
  const size_t block = count / nranks;
  fill(in.data(), block, rank);
  Watched gathered =
      watched(out.data(), bytes, [&] { return ncclAllGather(in.data(), out.data(), block, ncclInt32, comm, stream); });
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < block; i++) bad += out[r * block + i] != value(r, 0, i);
  expect("AllGather: received into the output", gathered.received, bytes - share);
  expect("AllGather: sent from the output", gathered.sent, bytes - share);

  // ReduceScatter: partial sums travel in the slots; only the first step leaves from the input.
  fill(in.data(), count, rank);
  Watched scattered = watched(in.data(), bytes, [&] {
    return ncclReduceScatter(in.data(), out.data(), block, ncclInt32, ncclSum, comm, stream);
  });
  checkSums(rank * block, block);
  expect("ReduceScatter: sent from the input", scattered.sent, share);
  if (bad) fprintf(stderr, "rank %d: %ld problems (PLEXUS_NET_PTR %s)\n", rank, bad, ptr ? ptr : "unset");
  return bad;
}

harness::Scenario zeroCopyNetColl("zero-copy-net-coll", netCollScenario);

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

TEST_CASE(
    "zero-copy point-to-point between processes (2, 3): ncclMemAlloc memory mapped, any memory by "
    "process_vm_writev") {
  for (int n : {2, 3}) {
    CAPTURE(n);
    CHECK(harness::runProcesses("zero-copy-processes", n) == 0);
  }
}

TEST_CASE(
    "zero-copy point-to-point between processes: without process_vm_writev (PLEXUS_CMA=0, or refused by "
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

// A net scenario on 2 and 3 nodes of 1 rank, then on 2 with PLEXUS_NET_PTR=0.
static void runNetPtrOnAndOff(const char* scenario) {
  for (int n : {2, 3}) {
    CAPTURE(n);
    CHECK(harness::runProcesses(scenario, n, 120, 1) == 0);
  }
  setenv("PLEXUS_NET_PTR", "0", 1);
  CHECK(harness::runProcesses(scenario, 2, 120, 1) == 0);
  unsetenv("PLEXUS_NET_PTR");
}

TEST_CASE(
    "zero-copy point-to-point across nodes (2, 3): the net proxy sends from and receives into the user's "
    "buffers, and PLEXUS_NET_PTR=0 keeps the slots") {
  runNetPtrOnAndOff("zero-copy-net");
}

TEST_CASE(
    "zero-copy collectives across nodes (2, 3): the net proxy sends from and receives into the user's "
    "buffers where the ring's data is there, and PLEXUS_NET_PTR=0 keeps the slots") {
  setenv("NCCL_NET_PLUGIN", kWatchNet.c_str(), 1);
  runNetPtrOnAndOff("zero-copy-net-coll");
  unsetenv("NCCL_NET_PLUGIN");
}
