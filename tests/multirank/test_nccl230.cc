// NCCL 2.29-2.30's communicator calls: ncclCommGetUniqueId + ncclCommGrow, ncclCommSuspend / ncclCommResume /
// ncclCommMemStats, and the one-sided ncclPutSignal / ncclSignal / ncclWaitSignal on windows (ncclWinGetUserPtr).
// Ranks as threads, as processes, and as processes on two "nodes" (the net transport between them).
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

namespace {

std::string lastError(ncclComm_t comm = nullptr) { return ncclGetLastError(comm); }

long shapeIs(ncclComm_t comm, int wantRank, int wantCount) {
  int rank = -1, count = -1;
  CHECK_NCCL(ncclCommUserRank(comm, &rank));
  CHECK_NCCL(ncclCommCount(comm, &count));
  if (rank == wantRank && count == wantCount) return 0;
  fprintf(stderr, "communicator %p: rank %d of %d, expected %d of %d\n", (void*)comm, rank, count, wantRank, wantCount);
  return 1;
}

// Every collective the grown communicator runs, each element checked against what the ranks' inputs give.
long collectivesCheck(ncclComm_t comm, cudaStream_t stream, int rank, int n) {
  long wrong = 0;
  const size_t count = 4099;  // not a multiple of anything
  std::vector<int> a(count), b(count * n);
  for (size_t i = 0; i < count; i++) a[i] = rank * 1000 + (int)(i % 997);
  CHECK_NCCL(ncclAllReduce(a.data(), b.data(), count, ncclInt32, ncclSum, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  for (size_t i = 0; i < count; i++) wrong += b[i] != 1000 * n * (n - 1) / 2 + n * (int)(i % 997);
  CHECK_NCCL(ncclAllGather(a.data(), b.data(), count, ncclInt32, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < count; i++) wrong += b[r * count + i] != r * 1000 + (int)(i % 997);
  std::vector<int> bc(count, rank == n - 1 ? 7 : 0);
  CHECK_NCCL(ncclBroadcast(bc.data(), bc.data(), count, ncclInt32, n - 1, comm, stream));
  std::vector<int> rs(count);
  std::vector<int> full(count * n, rank + 1);
  CHECK_NCCL(ncclReduceScatter(full.data(), rs.data(), count, ncclInt32, ncclSum, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  for (size_t i = 0; i < count; i++) wrong += (bc[i] != 7) + (rs[i] != n * (n + 1) / 2);
  return wrong;
}

// Grows `from` (ranks [0, oldN) of world; NULL on the others) to newN ranks: the id travels from rank 0 to the
// joining rank over world. Ranks above newN - 1 take no part and get NULL.
long growStep(ncclComm_t world, cudaStream_t stream, int rank, ncclComm_t from, int oldN, int newN, ncclComm_t* out) {
  *out = nullptr;
  ncclUniqueId id{};
  if (rank == 0) CHECK_NCCL(ncclCommGetUniqueId(from, &id));
  CHECK_NCCL(ncclBroadcast(&id, &id, sizeof id, ncclUint8, 0, world, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  if (rank < oldN) CHECK_NCCL(ncclCommGrow(from, newN, rank == 0 ? &id : nullptr, -1, out, nullptr));
  else if (rank < newN) CHECK_NCCL(ncclCommGrow(nullptr, newN, &id, rank, out, nullptr));
  return 0;
}

// 2 -> 3 -> 4 ranks, the world of 4 only carrying the ids: the old communicators keep working beside the grown
// ones, and each runs every collective correctly.
long growScenario(int rank, int nranks, ncclComm_t world, cudaStream_t stream) {
  if (nranks != 4) return 1;
  long bad = 0;
  ncclComm_t two = nullptr, three = nullptr, four = nullptr;
  CHECK_NCCL(ncclCommSplit(world, rank < 2 ? 0 : NCCL_SPLIT_NOCOLOR, rank, &two, nullptr));
  if (rank < 2) bad += collectivesCheck(two, stream, rank, 2);
  // An AllReduce of the old communicator still in flight on a stream of its own: the grow waits for it.
  cudaStream_t side = nullptr;
  std::vector<float> inFlight(1 << 20, (float)(rank + 1));
  if (rank < 2) {
    CHECK_NCCL(plexusStreamCreate(&side));
    CHECK_NCCL(ncclAllReduce(inFlight.data(), inFlight.data(), inFlight.size(), ncclFloat, ncclSum, two, side));
  }
  bad += growStep(world, stream, rank, two, 2, 3, &three);
  if (rank < 2) {
    CHECK_NCCL(plexusStreamSynchronize(side));
    CHECK_NCCL(plexusStreamDestroy(side));
    for (size_t i = 0; i < inFlight.size(); i += 4099) bad += inFlight[i] != 3.0f;
  }
  if (rank < 3) {
    bad += shapeIs(three, rank, 3);
    bad += collectivesCheck(three, stream, rank, 3);
  }
  if (rank < 2) bad += collectivesCheck(two, stream, rank, 2);  // the old one still runs
  bad += growStep(world, stream, rank, three, 3, 4, &four);
  bad += shapeIs(four, rank, 4);
  bad += collectivesCheck(four, stream, rank, 4);
  for (ncclComm_t c : {two, three, four})
    if (c) CHECK_NCCL(ncclCommDestroy(c));
  return bad;
}

harness::Scenario processGrow("nccl230-grow", growScenario);

}  // namespace

TEST_CASE("ncclCommGrow: 2 -> 3 -> 4 ranks as threads, every collective on the grown communicators") {
  CHECK(harness::runThreads(4, growScenario) == 0);
}

TEST_CASE("ncclCommGrow: 2 -> 3 -> 4 ranks as processes, on one node and on two") {
  CHECK(harness::runProcesses("nccl230-grow", 4) == 0);
  CHECK(harness::runProcesses("nccl230-grow", 4, 120, 2) == 0);
}

TEST_CASE("ncclCommGrow: bad arguments, one id at a time, a joining rank that never comes") {
  setenv("PLEXUS_BOOTSTRAP_TIMEOUT", "3", 1);
  CHECK(harness::runThreads(2, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          ncclComm_t out = nullptr;
          ncclUniqueId id{};
          if (rank == 0) {
            CHECK_NCCL(ncclCommGetUniqueId(comm, &id));
            // A second id while the first is unconsumed.
            ncclUniqueId again;
            bad += ncclCommGetUniqueId(comm, &again) != ncclInvalidUsage;
            bad += lastError(comm).find("not consumed") == std::string::npos;
            bad += ncclCommGetUniqueId(comm, nullptr) != ncclInvalidArgument;
          }
          // Sizes that do not grow, and an existing rank that names a rank.
          bad += ncclCommGrow(comm, nranks, rank == 0 ? &id : nullptr, -1, &out, nullptr) != ncclInvalidArgument;
          bad += lastError(comm).find("must exceed") == std::string::npos;
          bad += ncclCommGrow(comm, 3, nullptr, rank, &out, nullptr) != ncclInvalidArgument;
          bad += ncclCommGrow(comm, 3, nullptr, -1, nullptr, nullptr) != ncclInvalidArgument;
          if (rank == 0) {
            // New ranks: a rank below the old size or past the new one, no id, an id of ncclGetUniqueId.
            bad += ncclCommGrow(nullptr, 3, &id, 1, &out, nullptr) != ncclInvalidArgument;
            bad += lastError().find("must be in [2, 3)") == std::string::npos;
            bad += ncclCommGrow(nullptr, 3, &id, 3, &out, nullptr) != ncclInvalidArgument;
            bad += ncclCommGrow(nullptr, 2, &id, 2, &out, nullptr) != ncclInvalidArgument;
            bad += ncclCommGrow(nullptr, 3, nullptr, 2, &out, nullptr) != ncclInvalidArgument;
            ncclUniqueId plain;
            CHECK_NCCL(ncclGetUniqueId(&plain));
            bad += ncclCommGrow(nullptr, 3, &plain, 2, &out, nullptr) != ncclInvalidArgument;
            bad += lastError().find("not made by ncclCommGetUniqueId") == std::string::npos;
            // An existing rank passing an id that is not the one it was given.
            plain.internal[0] ^= 1;
            bad += ncclCommGrow(comm, 3, &plain, -1, &out, nullptr) != ncclInvalidArgument;
          }
          // The joining rank never comes: both existing ranks fail after the bootstrap timeout (3 s here).
          const auto t0 = std::chrono::steady_clock::now();
          const ncclResult_t r = ncclCommGrow(comm, 3, rank == 0 ? &id : nullptr, -1, &out, nullptr);
          const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          bad += r == ncclSuccess || out != nullptr;
          bad += took > 30;
          if (r != ncclSuccess) fprintf(stderr, "rank %d: grow without the joining rank: %s after %.1f s: %s\n", rank,
                                        ncclGetErrorString(r), took, lastError().c_str());
          // The id was consumed by that grow: a new one can be asked for.
          if (rank == 0) bad += ncclCommGetUniqueId(comm, &id) != ncclSuccess;
          return bad;
        }) == 0);
  unsetenv("PLEXUS_BOOTSTRAP_TIMEOUT");
}

namespace {

// Resident bytes of this process (RSS, shared pages included).
int64_t residentBytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

uint64_t stat(ncclComm_t comm, ncclCommMemStat_t s) {
  uint64_t v = ~0ull;
  if (ncclCommMemStats(comm, s, &v) != ncclSuccess) return ~0ull;
  return v;
}

// Three suspend / resume cycles with collectives between them (results checked): MemStats tells the memory that
// suspend releases and whether the communicator is suspended; a suspended communicator refuses operations. Returns
// problems; *released gets the bytes MemStats reported as suspendable.
// Every rank of the communicator reaches the point named tag (each used once), outside the communicator: ranks
// suspend and resume at the same point of the program, as they must (a peer that resumed and sent writes into
// buffers another rank is releasing).
using Meet = std::function<void(const std::string& tag)>;

long suspendCycles(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, uint64_t* released, const Meet& meet) {
  long bad = 0;
  const size_t count = 4 << 20;  // 16 MiB: through every slot of every connection
  std::vector<float> buf(count);
  for (int cycle = 0; cycle < 3; cycle++) {
    for (size_t i = 0; i < count; i++) buf[i] = (float)(rank + cycle);
    CHECK_NCCL(ncclAllReduce(buf.data(), buf.data(), count, ncclFloat, ncclSum, comm, stream));
    CHECK_NCCL(plexusStreamSynchronize(stream));
    const float want = (float)(nranks * (nranks - 1) / 2 + nranks * cycle);
    for (size_t i = 0; i < count; i += 4093) bad += buf[i] != want;
    const uint64_t suspendable = stat(comm, ncclStatGpuMemSuspend), persist = stat(comm, ncclStatGpuMemPersist);
    bad += suspendable == 0 || suspendable == ~0ull || persist == 0 || persist == ~0ull;
    bad += stat(comm, ncclStatGpuMemTotal) != suspendable + persist;
    bad += stat(comm, ncclStatGpuMemSuspended) != 0;
    *released = suspendable;
    // Every rank is done with the collective before any suspends (its peers' last reads are in).
    CHECK_NCCL(ncclAllReduce(buf.data(), buf.data(), 1, ncclFloat, ncclSum, comm, stream));
    CHECK_NCCL(plexusStreamSynchronize(stream));
    CHECK_NCCL(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
    meet("suspended " + std::to_string(cycle));
    bad += stat(comm, ncclStatGpuMemSuspended) != 1;
    bad += ncclAllReduce(buf.data(), buf.data(), 1, ncclFloat, ncclSum, comm, stream) != ncclInvalidUsage;
    bad += lastError(comm).find("suspended") == std::string::npos;
    bad += ncclCommSuspend(comm, NCCL_SUSPEND_MEM) != ncclInvalidUsage;  // twice
    CHECK_NCCL(ncclCommResume(comm));
    bad += ncclCommResume(comm) != ncclInvalidUsage;  // not suspended
    meet("resumed " + std::to_string(cycle));
  }
  bad += ncclCommSuspend(comm, 0x10) != ncclInvalidArgument;
  bad += ncclCommMemStats(comm, (ncclCommMemStat_t)9, released) != ncclInvalidArgument;
  bad += ncclCommMemStats(comm, ncclStatGpuMemTotal, nullptr) != ncclInvalidArgument;
  return bad;
}

// Resident memory drops by what the ranks of this process suspend, and comes back at resume.
// ranksHere: the ranks of this process (one of them measures its memory).
long suspendMemory(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, int ranksHere, const Meet& meet) {
  long bad = 0;
  uint64_t suspendable = 0;
  bad += suspendCycles(rank, nranks, comm, stream, &suspendable, meet);
  std::vector<float> buf(4 << 20, 1.0f);
  CHECK_NCCL(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  CHECK_NCCL(ncclAllReduce(buf.data(), buf.data(), 1, ncclFloat, ncclSum, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  // One rank of each process measures before any suspends and after all have.
  int64_t before = 0, after = 0;
  if (rank % ranksHere == 0) before = residentBytes();
  meet("measured");
  CHECK_NCCL(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
  meet("all suspended");
  if (rank % ranksHere == 0) {
    after = residentBytes();
    const int64_t drop = before - after;
    // The Simple slots were all written (the LL ones need not be): at least half of what MemStats counts, per rank.
    fprintf(stderr, "rank %d: suspend: resident %lld -> %lld MiB (%lld MiB released; MemStats: %llu MiB per rank)\n",
            rank, (long long)before >> 20, (long long)after >> 20, (long long)drop >> 20,
            (unsigned long long)suspendable >> 20);
    bad += drop < (int64_t)(suspendable / 2) * ranksHere;
  }
  meet("measured suspended");
  CHECK_NCCL(ncclCommResume(comm));
  meet("all resumed");
  if (rank % ranksHere == 0) {
    const int64_t resumed = residentBytes();
    fprintf(stderr, "rank %d: resume: resident %lld MiB\n", rank, (long long)resumed >> 20);
    bad += resumed - after < (int64_t)(suspendable / 2) * ranksHere;  // the pages are back before any operation
  }
  for (size_t i = 0; i < buf.size(); i++) buf[i] = (float)rank;
  CHECK_NCCL(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  for (size_t i = 0; i < buf.size(); i += 1021) bad += buf[i] != (float)(nranks * (nranks - 1) / 2);
  return bad;
}

harness::Scenario processSuspend("nccl230-suspend", [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  return suspendMemory(rank, nranks, comm, stream, 1, [rank, nranks](const std::string& tag) {
    if (!harness::processBarrier(rank, nranks, tag.c_str())) fprintf(stderr, "rank %d: barrier %s timed out\n", rank,
                                                                      tag.c_str());
  });
});

}  // namespace

TEST_CASE("ncclCommSuspend / ncclCommResume / ncclCommMemStats: threads, resident memory drops and returns") {
  std::barrier<> all(2);
  CHECK(harness::runThreads(2, [&all](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          return suspendMemory(rank, nranks, comm, stream, nranks, [&](const std::string&) { all.arrive_and_wait(); });
        }) == 0);
}

TEST_CASE("ncclCommSuspend / ncclCommResume: processes, on one node (shared memory) and on two (net, proxy)") {
  CHECK(harness::runProcesses("nccl230-suspend", 2) == 0);
  CHECK(harness::runProcesses("nccl230-suspend", 2, 120, 1) == 0);
}

namespace {

// Ping-pong: rank 0 puts a block into rank 1's window and signals; rank 1 checks it and puts it back, changed.
// Then a ring: every rank puts `rounds` blocks into its next rank's window, each at its own offset, and waits once
// for all of them; the last one's contents show that data came before each signal.
// ranksPerNode: how the ranks sit (0: all on one node), for where the bytes must have gone: straight into the
// window where the peer shares the node (ncclMemAlloc windows) or the process (any window), else with the header on
// the peer's one-sided socket up to PLEXUS_RMA_INLINE_BYTES, else through a connector of the communicator's
// transports. heapWindow: the main window is ordinary memory, not ncclMemAlloc's.
long oneSided(int rank, int nranks, ncclComm_t comm, cudaStream_t stream, int ranksPerNode, bool threads,
              bool heapWindow = false) {
  long bad = 0;
  const size_t block = 1 << 16, rounds = 8;  // ints
  void* mem = nullptr;
  CHECK_NCCL(ncclMemAlloc(&mem, block * rounds * sizeof(int)));
  std::vector<int> heapMain(heapWindow ? block * rounds : 0);
  int* win = heapWindow ? heapMain.data() : (int*)mem;
  std::vector<char> heapWin(4096 + 4096);
  ncclWindow_t w = nullptr, w2 = nullptr;
  CHECK_NCCL(ncclCommWindowRegister(comm, win, block * rounds * sizeof(int), &w,
                                    heapWindow ? NCCL_WIN_DEFAULT : NCCL_WIN_COLL_SYMMETRIC));
  CHECK_NCCL(ncclCommWindowRegister(comm, heapWin.data(), 4096, &w2, NCCL_WIN_DEFAULT));
  void* user = nullptr;
  CHECK_NCCL(ncclWinGetUserPtr(comm, w, &user));
  bad += user != win;
  // Every rank's windows exist before anyone puts.
  std::vector<int> sync(1, 0);
  CHECK_NCCL(ncclAllReduce(sync.data(), sync.data(), 1, ncclInt32, ncclSum, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));

  std::vector<int> src(block);
  if (rank < 2 && nranks >= 2) {
    const int peer = 1 - rank;
    for (int it = 0; it < 50; it++) {
      if (rank == 0) {
        for (size_t i = 0; i < block; i++) src[i] = it * 7 + (int)i;
        CHECK_NCCL(ncclPutSignal(src.data(), block, ncclInt32, peer, w, 0, 0, 0, 0, comm, stream));
        ncclWaitSignalDesc_t d{1, peer, 0, 0};
        CHECK_NCCL(ncclWaitSignal(1, &d, comm, stream));
        CHECK_NCCL(plexusStreamSynchronize(stream));
        for (size_t i = 0; i < block; i += 97) bad += win[block + i] != -(it * 7 + (int)i);
      } else {
        ncclWaitSignalDesc_t d{1, peer, 0, 0};
        CHECK_NCCL(ncclWaitSignal(1, &d, comm, stream));
        CHECK_NCCL(plexusStreamSynchronize(stream));
        for (size_t i = 0; i < block; i++) src[i] = -win[i];
        bad += win[5] != it * 7 + 5;
        CHECK_NCCL(ncclPutSignal(src.data(), block, ncclInt32, peer, w, block * sizeof(int), 0, 0, 0, comm, stream));
        CHECK_NCCL(plexusStreamSynchronize(stream));
      }
    }
  }
  if (bad) fprintf(stderr, "rank %d: ping-pong: %ld problem(s)\n", rank, bad);
  // The ring below writes where the ping-pong did: everyone is past it first.
  CHECK_NCCL(ncclAllReduce(sync.data(), sync.data(), 1, ncclInt32, ncclSum, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  // Signals alone, kept apart by index: two on sigIdx 3, one on sigIdx 1; one put into the second window.
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  CHECK_NCCL(ncclSignal(next, 3, 0, 0, comm, stream));
  CHECK_NCCL(ncclSignal(next, 1, 0, 0, comm, stream));
  const int mark = 1000 + rank;
  CHECK_NCCL(ncclPutSignal(&mark, 1, ncclInt32, next, w2, 64, 3, 0, 0, comm, stream));
  ncclWaitSignalDesc_t two[2] = {{2, prev, 3, 0}, {1, prev, 1, 0}};
  CHECK_NCCL(ncclWaitSignal(2, two, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  int got;
  memcpy(&got, heapWin.data() + 64, sizeof got);
  bad += got != 1000 + prev;

  if (got != 1000 + prev) fprintf(stderr, "rank %d: signals: got %d, want %d\n", rank, got, 1000 + prev);
  // The ring of puts.
  std::vector<int> blocks(block * rounds);  // each put reads its source when the stream runs it
  for (size_t r = 0; r < rounds; r++) {
    int* b = blocks.data() + r * block;
    for (size_t i = 0; i < block; i++) b[i] = (int)(rank * 100000 + r * 1000 + i % 1000);
    CHECK_NCCL(ncclPutSignal(b, block, ncclInt32, next, w, r * block * sizeof(int), 2, 0, 0, comm, stream));
  }
  ncclWaitSignalDesc_t all{(int)rounds, prev, 2, 0};
  CHECK_NCCL(ncclWaitSignal(1, &all, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  for (size_t r = 0; r < rounds; r++)
    for (size_t i = 0; i < block; i += 61) bad += win[r * block + i] != (int)(prev * 100000 + r * 1000 + i % 1000);
  // Where the bytes went, by the rule the README gives.
  uint64_t direct = 0, socket = 0, transport = 0;
  CHECK_NCCL(plexusCommGetRmaStats(comm, &direct, &socket, &transport));
  const char* inlineEnv = getenv("PLEXUS_RMA_INLINE_BYTES");
  const uint64_t inlineBytes = inlineEnv ? strtoull(inlineEnv, nullptr, 0) : 4096;
  uint64_t want[3] = {0, 0, 0};  // direct, socket, transport
  auto account = [&](int peer, uint64_t bytes, bool memAllocWindow) {
    const bool sameNode = ranksPerNode == 0 || peer / ranksPerNode == rank / ranksPerNode;
    want[threads || (memAllocWindow && sameNode) ? 0 : bytes <= inlineBytes ? 1 : 2] += bytes;
  };
  if (rank < 2 && nranks >= 2)
    for (int it = 0; it < 50; it++) account(1 - rank, block * sizeof(int), !heapWindow);
  account(next, sizeof(int), false);
  for (size_t r = 0; r < rounds; r++) account(next, block * sizeof(int), !heapWindow);
  if (direct != want[0] || socket != want[1] || transport != want[2]) {
    fprintf(stderr, "rank %d: put %llu bytes directly, %llu on the socket, %llu through a transport; expected %llu, "
            "%llu, %llu\n", rank, (unsigned long long)direct, (unsigned long long)socket,
            (unsigned long long)transport, (unsigned long long)want[0], (unsigned long long)want[1],
            (unsigned long long)want[2]);
    bad++;
  }

  // Bad arguments: NCCL's codes, a message each.
  bad += ncclPutSignal(src.data(), 1, ncclInt32, nranks, w, 0, 0, 0, 0, comm, stream) != ncclInvalidArgument;
  bad += lastError(comm).find("peer") == std::string::npos;
  bad += ncclPutSignal(src.data(), 1, ncclInt32, next, w, 0, -1, 0, 0, comm, stream) != ncclInvalidArgument;
  bad += ncclPutSignal(src.data(), 1, ncclInt32, next, w, 0, 0, 1, 0, comm, stream) != ncclInvalidArgument;
  bad += lastError(comm).find("numRmaCtx") == std::string::npos;
  bad += ncclPutSignal(src.data(), 1, ncclInt32, next, w, 0, 0, 0, 1, comm, stream) != ncclInvalidArgument;
  bad += ncclPutSignal(src.data(), 2, ncclInt32, next, w2, 4092, 0, 0, 0, comm, stream) != ncclInvalidArgument;
  bad += lastError(comm).find("do not fit") == std::string::npos;
  bad += ncclPutSignal(src.data(), 1, ncclInt32, next, (ncclWindow_t)&src, 0, 0, 0, 0, comm, stream) !=
         ncclInvalidArgument;
  bad += ncclSignal(-1, 0, 0, 0, comm, stream) != ncclInvalidArgument;
  ncclWaitSignalDesc_t neg{-1, prev, 0, 0};
  bad += ncclWaitSignal(1, &neg, comm, stream) != ncclInvalidArgument;
  bad += ncclWaitSignal(1, nullptr, comm, stream) != ncclInvalidArgument;
  void* none = nullptr;
  bad += ncclWinGetUserPtr(comm, (ncclWindow_t)&src, &none) != ncclInvalidArgument;

  CHECK_NCCL(ncclAllReduce(sync.data(), sync.data(), 1, ncclInt32, ncclSum, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  CHECK_NCCL(ncclCommWindowDeregister(comm, w));
  CHECK_NCCL(ncclCommWindowDeregister(comm, w2));
  CHECK_NCCL(ncclMemFree(mem));
  return bad;
}

harness::Scenario processOneSided("nccl230-one-sided", [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  return oneSided(rank, nranks, comm, stream, 0, false);
});
harness::Scenario processOneSided2("nccl230-one-sided-2", [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  return oneSided(rank, nranks, comm, stream, 2, false);
});
harness::Scenario processOneSidedHeap("nccl230-one-sided-heap", [](int rank, int nranks, ncclComm_t comm,
                                                                    cudaStream_t stream) {
  return oneSided(rank, nranks, comm, stream, 0, false, true);
});
harness::Scenario processOneSidedHeap2("nccl230-one-sided-heap-2", [](int rank, int nranks, ncclComm_t comm,
                                                                      cudaStream_t stream) {
  return oneSided(rank, nranks, comm, stream, 2, false, true);
});
long oneSidedThreads(int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  return oneSided(rank, nranks, comm, stream, 0, true);
}

}  // namespace

TEST_CASE("ncclPutSignal / ncclSignal / ncclWaitSignal: ping-pong and a ring of puts, threads") {
  CHECK(harness::runThreads(2, oneSidedThreads) == 0);
  CHECK(harness::runThreads(3, oneSidedThreads) == 0);
}

TEST_CASE("ncclPutSignal / ncclSignal / ncclWaitSignal: processes, on one node and across two") {
  CHECK(harness::runProcesses("nccl230-one-sided", 3) == 0);
  CHECK(harness::runProcesses("nccl230-one-sided-2", 4, 120, 2) == 0);
}

namespace {

// Rank 1 takes one put through the net transport's connector, then dies; rank 0's next put, larger than the
// connector's slots hold, must fail with a message naming what happened, within the communicator's timeout.
harness::Scenario processDeadTarget("nccl230-one-sided-dead-target", [](int rank, int nranks, ncclComm_t comm,
                                                                         cudaStream_t stream) -> long {
  long bad = 0;
  const size_t bytes = 32 << 20;
  std::vector<char> window(bytes), src(bytes, 7);
  ncclWindow_t w = nullptr;
  CHECK_NCCL(ncclCommWindowRegister(comm, window.data(), bytes, &w, NCCL_WIN_DEFAULT));
  CHECK_NCCL(plexusCommSetTimeout(comm, 3.0));
  std::vector<int> sync(1, 0);
  CHECK_NCCL(ncclAllReduce(sync.data(), sync.data(), 1, ncclInt32, ncclSum, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  if (rank == 1) {
    ncclWaitSignalDesc_t d{1, 0, 0, 0};
    CHECK_NCCL(ncclWaitSignal(1, &d, comm, stream));
    CHECK_NCCL(plexusStreamSynchronize(stream));
    bad += window[8191] != 7;
    if (!harness::processBarrier(rank, nranks, "took one")) bad++;
    _exit(bad ? 1 : 0);  // dies: no destroy, its sockets close with the process
  }
  CHECK_NCCL(ncclPutSignal(src.data(), 8192, ncclInt8, 1, w, 0, 0, 0, 0, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  uint64_t transport = 0;
  CHECK_NCCL(plexusCommGetRmaStats(comm, nullptr, nullptr, &transport));
  bad += transport != 8192;
  if (!harness::processBarrier(rank, nranks, "took one")) bad++;
  const auto start = std::chrono::steady_clock::now();
  ncclResult_t r = ncclPutSignal(src.data(), bytes, ncclInt8, 1, w, 0, 0, 0, 0, comm, stream);
  if (r == ncclSuccess) r = plexusStreamSynchronize(stream);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string why = ncclGetLastError(comm);
  fprintf(stderr, "rank 0: a put to a dead rank: %s after %.1f s: %s\n", ncclGetErrorString(r), took, why.c_str());
  bad += r == ncclSuccess;
  bad += took > 10;
  bad += why.find("rank 1") == std::string::npos;
  ncclCommAbort(comm);
  _exit(bad ? 1 : 0);  // the harness's destroy would find the communicator aborted
});

}  // namespace

TEST_CASE("ncclPutSignal: a put through the net transport to a rank that died fails with a message") {
  CHECK(harness::runProcesses("nccl230-one-sided-dead-target", 2, 60, 1) == 0);
}

TEST_CASE("ncclPutSignal: puts the origin cannot write itself go through the transports (shared memory, net)") {
  // Windows in ordinary memory: between processes of a node the p2p transport's connectors carry the large puts,
  // between nodes the net transport's (socket net, through the proxy).
  CHECK(harness::runProcesses("nccl230-one-sided-heap", 3) == 0);
  CHECK(harness::runProcesses("nccl230-one-sided-heap-2", 4, 120, 2) == 0);
  // Every put with data through a connector, the 4-byte ones too.
  setenv("PLEXUS_RMA_INLINE_BYTES", "0", 1);
  CHECK(harness::runProcesses("nccl230-one-sided-heap-2", 4, 120, 2) == 0);
  unsetenv("PLEXUS_RMA_INLINE_BYTES");
}

namespace {

// One-sided connectors are connector buffers like the collectives': MemStats counts them once a put made them,
// suspend releases them (and the net plugin's registration of them), resume restores them; a put that reaches a
// rank still suspended waits for its resume.
harness::Scenario processOneSidedSuspend("nccl230-one-sided-suspend", [](int rank, int nranks, ncclComm_t comm,
                                                                          cudaStream_t stream) -> long {
  long bad = 0;
  const size_t count = 1 << 18;  // 1 MiB of ints: through a connector
  std::vector<int> window(count), src(count);
  ncclWindow_t w = nullptr;
  CHECK_NCCL(ncclCommWindowRegister(comm, window.data(), count * sizeof(int), &w, NCCL_WIN_DEFAULT));
  std::vector<int> sync(1, 0);
  auto meet = [&](const char* tag) {
    if (!harness::processBarrier(rank, nranks, tag)) {
      fprintf(stderr, "rank %d: barrier %s timed out\n", rank, tag);
      bad++;
    }
  };
  auto putAndCheck = [&](int round) -> long {
    if (rank == 0) {
      for (size_t i = 0; i < count; i++) src[i] = round * 1000003 + (int)i;
      CHECK_NCCL(ncclPutSignal(src.data(), count, ncclInt32, 1, w, 0, 0, 0, 0, comm, stream));
    } else {
      ncclWaitSignalDesc_t d{1, 0, 0, 0};
      CHECK_NCCL(ncclWaitSignal(1, &d, comm, stream));
    }
    CHECK_NCCL(plexusStreamSynchronize(stream));
    if (rank == 1)
      for (size_t i = 0; i < count; i += 101) bad += window[i] != round * 1000003 + (int)i;
    return 0;
  };
  // Read before any rank puts: the target's service makes its side when the first put comes.
  const uint64_t before = stat(comm, ncclStatGpuMemSuspend);
  CHECK_NCCL(ncclAllReduce(sync.data(), sync.data(), 1, ncclInt32, ncclSum, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  if (putAndCheck(1)) return 1;
  uint64_t transport = 0;
  CHECK_NCCL(plexusCommGetRmaStats(comm, nullptr, nullptr, &transport));
  bad += rank == 0 && transport != count * sizeof(int);
  // The target owns its connector's buffer (the origin too where its proxy stages, between nodes).
  const uint64_t after = stat(comm, ncclStatGpuMemSuspend);
  fprintf(stderr, "rank %d: MemStats suspendable %llu -> %llu bytes with the one-sided connector\n", rank,
          (unsigned long long)before, (unsigned long long)after);
  bad += rank == 1 && after <= before;
  bad += stat(comm, ncclStatGpuMemTotal) != after + stat(comm, ncclStatGpuMemPersist);
  CHECK_NCCL(ncclAllReduce(sync.data(), sync.data(), 1, ncclInt32, ncclSum, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));

  // Both suspend; the origin resumes and puts while the target is still suspended, which resumes after.
  CHECK_NCCL(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
  meet("suspended");
  if (rank == 0) {
    CHECK_NCCL(ncclCommResume(comm));
    for (size_t i = 0; i < count; i++) src[i] = 2 * 1000003 + (int)i;
    CHECK_NCCL(ncclPutSignal(src.data(), count, ncclInt32, 1, w, 0, 0, 0, 0, comm, stream));
  }
  meet("put posted");
  if (rank == 1) {
    bad += stat(comm, ncclStatGpuMemSuspended) != 1;
    CHECK_NCCL(ncclCommResume(comm));
    ncclWaitSignalDesc_t d{1, 0, 0, 0};
    CHECK_NCCL(ncclWaitSignal(1, &d, comm, stream));
  }
  CHECK_NCCL(plexusStreamSynchronize(stream));
  if (rank == 1)
    for (size_t i = 0; i < count; i += 101) bad += window[i] != 2 * 1000003 + (int)i;
  meet("checked");  // before the next put overwrites the window
  // And again, both resumed.
  if (putAndCheck(3)) return 1;
  CHECK_NCCL(ncclAllReduce(sync.data(), sync.data(), 1, ncclInt32, ncclSum, comm, stream));
  CHECK_NCCL(plexusStreamSynchronize(stream));
  CHECK_NCCL(ncclCommWindowDeregister(comm, w));
  if (bad) fprintf(stderr, "rank %d: %ld problem(s)\n", rank, bad);
  return bad;
});

}  // namespace

TEST_CASE("ncclCommSuspend: one-sided connectors are released and restored, and a put to a suspended rank waits for its resume") {
  CHECK(harness::runProcesses("nccl230-one-sided-suspend", 2) == 0);        // p2p-nvlink's shared memory
  CHECK(harness::runProcesses("nccl230-one-sided-suspend", 2, 120, 1) == 0);  // net, through the proxy
}

TEST_CASE("ncclWaitSignal: a signal that never comes times out with the communicator's timeout") {
  CHECK(harness::runThreads(2, [](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
          long bad = 0;
          if (rank == 1) {
            CHECK_NCCL(plexusCommSetTimeout(comm, 1.0));
            ncclWaitSignalDesc_t d{1, 0, 5, 0};
            CHECK_NCCL(ncclWaitSignal(1, &d, comm, stream));
            const ncclResult_t r = plexusStreamSynchronize(stream);
            bad += r != ncclTimeout;
            bad += lastError(comm).find("waited") == std::string::npos;
            fprintf(stderr, "rank 1: %s: %s\n", ncclGetErrorString(r), lastError(comm).c_str());
          }
          return bad;
        }) == 0);
}

TEST_CASE("ncclConfig_t: fields are read by the config's size and version, as NCCL does") {
  auto init = [](size_t size, unsigned version, int numRmaCtx) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.size = size;
    config.version = version;
    config.numRmaCtx = numRmaCtx;  // 2.29's field; 1000 is out of range
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) return ncclInternalError;
    ncclComm_t comm = nullptr;
    const ncclResult_t r = ncclCommInitRankConfig(&comm, 1, id, 0, &config);
    if (comm) ncclCommDestroy(comm);
    return r;
  };
  // A 2.28 program's config (80 bytes, version 22809): what lies beyond is not its, and is not read.
  CHECK(init(80, NCCL_VERSION(2, 28, 9), 1000) == ncclSuccess);
  // 2.30's size but a 2.28 version: the same.
  CHECK(init(sizeof(ncclConfig_t), NCCL_VERSION(2, 28, 9), 1000) == ncclSuccess);
  // 2.30's config: read, and checked.
  CHECK(init(sizeof(ncclConfig_t), NCCL_VERSION_CODE, 1000) == ncclInvalidArgument);
  CHECK(lastError().find("numRmaCtx=1000") != std::string::npos);
  CHECK(init(sizeof(ncclConfig_t), NCCL_VERSION_CODE, 4) == ncclSuccess);
}
