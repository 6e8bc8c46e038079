// plexus-perf: an nccl-tests compatible benchmark for Plexus collectives, on the CUDA backend (device buffers, CUDA
// streams) where a CUDA device is present and on the host backend (host buffers, host streams) elsewhere.
//
// Ranks run as threads (-t), several host devices per thread (-g), and/or as processes started by
// mpirun or by any launcher that sets PLEXUS_RANK/PLEXUS_NRANKS (or RANK/WORLD_SIZE) plus NCCL_COMM_ID.
// Output, sizes and bandwidth formulas follow nccl-tests so results line up with NCCL's.
#ifdef PLEXUS_PERF_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // C bindings only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "device.h"
#include "perf.h"

namespace perf {
namespace {

enum class Launch { kSingle, kMpi, kEnv };
enum Reduce { kRank0 = 0, kMean = 1, kMin = 2, kMax = 3, kSum = 4 };  // kRank0..kMax match -a

struct World {
  Options opt;
  const Collective* coll = nullptr;
  Launch launch = Launch::kSingle;
  int nProcs = 1, proc = 0, localProc = 0;
  int perProc = 1;  // ranks per process: nThreads * nGpus
  int nRanks = 1;
  int devBase = 0;  // first host device of this process
  bool cuda = false;  // the communicators are on the CUDA backend (cudaPlanned)
  std::string backendWhy;
  int cudaDevices = 0;
  ncclUniqueId id{};
  std::vector<size_t> sizes;
  size_t allocBytes = 0;
  std::unique_ptr<std::barrier<>> bar;
  std::vector<int> threadErrors;
  std::vector<double> threadBw;
  std::atomic<bool> collectiveRan{false};
};
World gW;
std::atomic<bool> gRowOpen{false};  // the printer has started a table row (so a failure ends it first)

// In-process reduction scratch: one slot per thread, and the combined result.
template <class T>
struct Scratch {
  std::vector<T> slot;
  T result{};
};
Scratch<double> gDoubleScratch;
Scratch<int64_t> gIntScratch;
template <class T>
Scratch<T>& scratch() {
  if constexpr (std::is_same_v<T, double>)
    return gDoubleScratch;
  else
    return gIntScratch;
}

// ---- Failures ------------------------------------------------------------------------------------

std::mutex gDieMutex;

// Reports a library failure and ends the process at once: peers blocked in collectives would never
// return, and mpirun tears the rest of the job down when a rank exits non-zero.
[[noreturn]] void die(const char* call, ncclResult_t res, ncclComm_t comm, bool firstCall = false) {
  gDieMutex.lock();  // the first failing thread reports; never unlocked
  const char* last = runDetail ? runDetail : ncclGetLastError(comm);
  if (gRowOpen) std::printf("\n");
  std::fflush(stdout);
  std::fprintf(stderr, "plexus-perf: %s failed: %s (%s)\n", call, ncclGetErrorString(res),
               last && *last ? last : "no details");
  if (firstCall)
    std::fprintf(stderr, "plexus-perf: the first %s call failed; this Plexus build may not implement %s yet\n",
                 gW.opt.collective.c_str(), gW.opt.collective.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

#define NCCL_OK(comm, fn, args)                    \
  do {                                             \
    ncclResult_t res_ = fn args;                   \
    if (res_ != ncclSuccess) die(#fn, res_, comm); \
  } while (0)

[[noreturn]] void fatal(int code, const std::string& msg) {
  if (gW.proc == 0 || code == 1) std::fprintf(stderr, "plexus-perf: %s\n", msg.c_str());
#ifdef PLEXUS_PERF_HAVE_MPI
  // Setup errors (code 2) hit every rank alike, so all of them can leave MPI cleanly.
  int up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (code == 2 && up && !down) MPI_Finalize();
#endif
  std::exit(code);
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int envInt(const char* name, const char* value, int lo, int hi) {
  char* end = nullptr;
  long v = std::strtol(value, &end, 10);
  if (end == value || *end || v < lo || v > hi)
    fatal(2, std::string("invalid ") + name + "='" + value + "' (expected an integer in [" + std::to_string(lo) + ", " +
                 std::to_string(hi) + "])");
  return int(v);
}

// ---- Per-thread state ----------------------------------------------------------------------------

struct RankCtx {
  int rank = 0;
  int device = 0;  // host device index (the CUDA device is mem.device)
  DeviceMem mem;   // where buffers and stream live
  char* stage = nullptr;  // CUDA: host copy of inputs and results for -c
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  char* send = nullptr;
  char* recv = nullptr;
  int32_t* token = nullptr;  // barrier payload
  void* sendReg = nullptr;   // -R 1: registration handles; -R 2: windows
  void* recvReg = nullptr;
};

struct ThreadCtx {
  int tid = 0;
  bool printer = false;  // rank 0 prints the table
  std::vector<RankCtx> ranks;
  double bwSum = 0;
  int bwCount = 0;
  int errors = 0;  // benchmark points where this thread's ranks held wrong values
};

struct SizeSetup {
  Counts c;
  size_t ts = 0;
};

char* allocBuffer(const RankCtx& r, size_t bytes) { return static_cast<char*>(r.mem.alloc(bytes)); }

// ---- Synchronisation across ranks ----------------------------------------------------------------

// Combines one value per thread, then across processes when MPI is up. Every thread of the process
// must call it; all get the result.
template <class T>
T reduceAll(int tid, T v, int mode) {
  std::vector<T>& slot = scratch<T>().slot;
  T& res = scratch<T>().result;
  slot[tid] = v;
  gW.bar->arrive_and_wait();
  if (tid == 0) {
    T acc = slot[0];
    if (mode != kRank0)
      for (size_t t = 1; t < slot.size(); ++t)
        acc = mode == kMin ? std::min(acc, slot[t]) : mode == kMax ? std::max(acc, slot[t]) : acc + slot[t];
    int contributors = int(slot.size());
#ifdef PLEXUS_PERF_HAVE_MPI
    if (gW.launch == Launch::kMpi && mode != kRank0) {
      MPI_Op op = mode == kMin ? MPI_MIN : mode == kMax ? MPI_MAX : MPI_SUM;
      MPI_Allreduce(MPI_IN_PLACE, &acc, 1, std::is_same_v<T, double> ? MPI_DOUBLE : MPI_INT64_T, op, MPI_COMM_WORLD);
      contributors *= gW.nProcs;
    }
#endif
    if (mode == kMean) acc /= T(contributors);
    res = acc;
  }
  gW.bar->arrive_and_wait();  // nobody writes a slot again before this thread's next call
  return res;
}

void complete(ThreadCtx& t) {
  const bool first = !gW.collectiveRan.load(std::memory_order_relaxed);
  for (RankCtx& r : t.ranks) {
    if (!r.mem.cuda) {
      ncclResult_t res = plexusStreamSynchronize(r.stream);
      if (res != ncclSuccess) die("plexusStreamSynchronize", res, r.comm, first);
      continue;
    }
    std::string error;
    const bool ok = r.mem.synchronize(r.stream, &error);
    // A CUDA stream reports a failed kernel only as a CUDA error: the communicator says what went wrong.
    ncclResult_t async = ncclSuccess;
    NCCL_OK(r.comm, ncclCommGetAsyncError, (r.comm, &async));
    if (async != ncclSuccess && async != ncclInProgress) die("asynchronous operation", async, r.comm, first);
    if (!ok) {
      gDieMutex.lock();
      std::fprintf(stderr, "plexus-perf: rank %d: %s\n", r.rank, error.c_str());
      std::fflush(stderr);
      std::_Exit(1);
    }
  }
}

// Without MPI, processes can only meet inside the library: an allreduce needs every rank's input,
// so no rank leaves it before all have entered.
void libraryBarrier(ThreadCtx& t) {
  const bool group = t.ranks.size() > 1;
  if (group) NCCL_OK(t.ranks[0].comm, ncclGroupStart, ());
  for (RankCtx& r : t.ranks)
    NCCL_OK(r.comm, ncclAllReduce, (r.token, r.token, 1, ncclInt32, ncclSum, r.comm, r.stream));
  if (group) NCCL_OK(t.ranks[0].comm, ncclGroupEnd, ());
  complete(t);
}

void rankBarrier(ThreadCtx& t) {
  if (gW.launch == Launch::kEnv) return libraryBarrier(t);
  gW.bar->arrive_and_wait();
#ifdef PLEXUS_PERF_HAVE_MPI
  if (gW.launch == Launch::kMpi) {
    if (t.tid == 0) MPI_Barrier(MPI_COMM_WORLD);  // thread 0 is the main thread (MPI_THREAD_FUNNELED)
    gW.bar->arrive_and_wait();
  }
#endif
}

// ---- Communicators -------------------------------------------------------------------------------

void setDevice(int dev) {
  ncclResult_t res = plexusSetDevice(dev);
  if (res != ncclSuccess) die("plexusSetDevice", res, nullptr);
}

// Makes the rank's device current before a communicator is made on it: the CUDA device's context for the CUDA
// backend (the library takes the thread's current CUDA device, as NCCL does), plexusSetDevice for the host backend.
void useDevice(const RankCtx& r) {
  if (r.mem.cuda)
    r.mem.makeCurrent();
  else
    setDevice(r.device);
}

void initRanks(ThreadCtx& t) {
  const int g = gW.opt.nGpus;
  t.ranks.resize(g);
  for (int i = 0; i < g; ++i) {
    RankCtx& r = t.ranks[i];
    r.rank = gW.proc * gW.perProc + t.tid * g + i;
    r.device = gW.devBase + t.tid * g + i;
    r.mem.cuda = gW.cuda;
    if (gW.cuda) r.mem.device = gW.opt.cudaDevice >= 0 ? gW.opt.cudaDevice : r.device % gW.cudaDevices;
  }
  // ncclCommInitAll takes distinct devices; several ranks on one CUDA device come from ncclCommInitRank.
  bool distinct = true;
  for (int i = 0; i < g; ++i)
    for (int j = 0; j < i; ++j) distinct &= !gW.cuda || t.ranks[i].mem.device != t.ranks[j].mem.device;
  if (gW.nProcs == 1 && gW.opt.nThreads == 1 && g > 1 && distinct) {
    // One thread drives every rank of the job: the single-process API, as nccl-tests uses.
    std::vector<int> devs(g);
    std::vector<ncclComm_t> comms(g);
    for (int i = 0; i < g; ++i) devs[i] = gW.cuda ? t.ranks[i].mem.device : t.ranks[i].device;
    if (gW.cuda) useDevice(t.ranks[0]);
    NCCL_OK(nullptr, ncclCommInitAll, (comms.data(), g, devs.data()));
    for (int i = 0; i < g; ++i) t.ranks[i].comm = comms[i];
  } else {
    // Several ranks per thread must be initialised inside a group: each init waits for all peers.
    if (g > 1) NCCL_OK(nullptr, ncclGroupStart, ());
    for (RankCtx& r : t.ranks) {
      useDevice(r);
      NCCL_OK(nullptr, ncclCommInitRank, (&r.comm, gW.nRanks, gW.id, r.rank));
    }
    if (g > 1) NCCL_OK(nullptr, ncclGroupEnd, ());
  }
  for (RankCtx& r : t.ranks) {
    plexusBackend_t backend = plexusBackendHost;
    NCCL_OK(r.comm, plexusCommGetBackend, (r.comm, &backend));
    if ((backend == plexusBackendCuda) != gW.cuda)
      fatal(1, "rank " + std::to_string(r.rank) + ": the communicator is on the " +
                   (backend == plexusBackendCuda ? "CUDA" : "host") + " backend, but plexus-perf prepared the " +
                   (gW.cuda ? "CUDA" : "host") + " backend (" + gW.backendWhy + ")");
    useDevice(r);
    if (r.mem.cuda)
      r.stream = r.mem.createStream();
    else
      NCCL_OK(r.comm, plexusStreamCreate, (&r.stream));
    if (gW.opt.localRegister) {
      // nccl-tests' -R: buffers the library can share with peers, registered with the communicator.
      const size_t bytes = std::max<size_t>(gW.allocBytes, 1);
      NCCL_OK(r.comm, ncclMemAlloc, ((void**)&r.send, bytes));
      NCCL_OK(r.comm, ncclMemAlloc, ((void**)&r.recv, bytes));
      r.mem.memset(r.send, 0, bytes, r.stream);
      r.mem.memset(r.recv, 0, bytes, r.stream);
      if (gW.opt.localRegister == 1) {
        NCCL_OK(r.comm, ncclCommRegister, (r.comm, r.send, bytes, &r.sendReg));
        NCCL_OK(r.comm, ncclCommRegister, (r.comm, r.recv, bytes, &r.recvReg));
      } else {
        NCCL_OK(r.comm, ncclCommWindowRegister,
                (r.comm, r.send, bytes, (ncclWindow_t*)&r.sendReg, NCCL_WIN_COLL_SYMMETRIC));
        NCCL_OK(r.comm, ncclCommWindowRegister,
                (r.comm, r.recv, bytes, (ncclWindow_t*)&r.recvReg, NCCL_WIN_COLL_SYMMETRIC));
      }
    } else {
      r.send = allocBuffer(r, gW.allocBytes);
      r.recv = allocBuffer(r, gW.allocBytes);
    }
    r.token = reinterpret_cast<int32_t*>(allocBuffer(r, sizeof(int32_t)));
    if (r.mem.cuda && gW.opt.check) r.stage = static_cast<char*>(DeviceMem{}.alloc(gW.allocBytes));
  }
  useDevice(t.ranks[0]);
}

void destroyRanks(ThreadCtx& t) {
  complete(t);
  if (t.ranks.size() > 1) {
    // Finalize is collective: with several communicators per thread they must progress together.
    NCCL_OK(nullptr, ncclGroupStart, ());
    for (RankCtx& r : t.ranks) NCCL_OK(r.comm, ncclCommFinalize, (r.comm));
    NCCL_OK(nullptr, ncclGroupEnd, ());
  }
  for (RankCtx& r : t.ranks) {
    if (gW.opt.localRegister == 1) {
      NCCL_OK(r.comm, ncclCommDeregister, (r.comm, r.sendReg));
      NCCL_OK(r.comm, ncclCommDeregister, (r.comm, r.recvReg));
    } else if (gW.opt.localRegister == 2) {
      NCCL_OK(r.comm, ncclCommWindowDeregister, (r.comm, (ncclWindow_t)r.sendReg));
      NCCL_OK(r.comm, ncclCommWindowDeregister, (r.comm, (ncclWindow_t)r.recvReg));
    }
    NCCL_OK(r.comm, ncclCommDestroy, (r.comm));
    if (r.mem.cuda) {
      r.mem.destroyStream(r.stream);
    } else {
      NCCL_OK(nullptr, plexusStreamDestroy, (r.stream));
    }
    if (gW.opt.localRegister) {
      r.mem.makeCurrent();
      NCCL_OK(nullptr, ncclMemFree, (r.send));
      NCCL_OK(nullptr, ncclMemFree, (r.recv));
    } else {
      r.mem.free(r.send);
      r.mem.free(r.recv);
    }
    r.mem.free(r.token);
    DeviceMem{}.free(r.stage);
  }
  t.ranks.clear();
}

// ---- One benchmark point ---------------------------------------------------------------------------

void launch(ThreadCtx& t, const SizeSetup& s, ncclDataType_t type, ncclRedOp_t op, int root, bool inPlace) {
  const bool first = !gW.collectiveRan.load(std::memory_order_relaxed);
  const bool group = t.ranks.size() > 1;
  if (group) NCCL_OK(t.ranks[0].comm, ncclGroupStart, ());
  for (RankCtx& r : t.ranks) {
    RunArgs a;
    a.sendbuff = inPlace ? r.recv + s.c.sendInplaceOffset * s.ts * r.rank : r.send;
    a.recvbuff = inPlace ? r.recv + s.c.recvInplaceOffset * s.ts * r.rank : r.recv;
    a.count = s.c.param;
    a.type = type;
    a.op = op;
    a.root = root;
    a.rank = r.rank;
    a.nranks = gW.nRanks;
    a.comm = r.comm;
    a.stream = r.stream;
    const char* what = "collective";
    ncclResult_t res = gW.coll->run(a, &what);
    if (res != ncclSuccess) die(what, res, r.comm, first);
  }
  if (group) {
    ncclResult_t res = ncclGroupEnd();
    if (res != ncclSuccess) die("ncclGroupEnd", res, t.ranks[0].comm, first);
  }
  if (gW.opt.blocking) {
    complete(t);
    if (gW.opt.blocking == 1) rankBarrier(t);
  }
}

// Fills each rank's input and poisons its result region, so a result the library never wrote fails. On CUDA the
// input is made on the host and copied over.
void initData(ThreadCtx& t, const SizeSetup& s, const Pattern& p, bool inPlace, ncclDataType_t type) {
  for (RankCtx& r : t.ranks) {
    const size_t sendOff = inPlace ? s.c.sendInplaceOffset * r.rank : 0;
    const size_t recvOff = inPlace ? s.c.recvInplaceOffset * r.rank : 0;
    const size_t used = inPlace ? std::max(sendOff + s.c.send, recvOff + s.c.recv) : s.c.recv;
    char* input = inPlace ? r.recv + sendOff * s.ts : r.send;
    r.mem.memset(r.recv, 0xFF, used * s.ts, r.stream);
    if (!r.mem.cuda) {
      fillPattern(input, type, p, r.rank, s.c.send);
    } else {
      fillPattern(r.stage, type, p, r.rank, s.c.send);
      r.mem.toDevice(input, r.stage, s.c.send * s.ts, r.stream);
    }
  }
}

int64_t checkData(ThreadCtx& t, const SizeSetup& s, const Pattern& p, ncclDataType_t type, ncclRedOp_t op, int root,
                  bool inPlace) {
  ExpectCtx ctx{&p, type, gW.coll->reduces ? op : ncclSum, gW.nRanks, root, s.c.param};
  int64_t wrong = 0;
  for (RankCtx& r : t.ranks) {
    if (gW.coll->rootOnly && r.rank != root) continue;
    const char* data = inPlace ? r.recv + s.c.recvInplaceOffset * s.ts * r.rank : r.recv;
    if (r.mem.cuda) {
      r.mem.toHost(r.stage, data, s.c.recv * s.ts, r.stream);
      data = r.stage;
    }
    wrong += countWrong(data, s.c.recv, ctx, r.rank, gW.coll->expect);
  }
  return wrong;
}

// nccl-tests' adaptive fixed-width number: two decimals while they fit, then fewer, then an exponent.
std::string fmtNum(double v, int width) {
  int digits = 0;
  for (double p = 1; v >= p && digits < 400; p *= 10) ++digits;
  char buf[64];
  const char* fmt = digits < width - 2 ? "%*.2f" : digits < width - 1 ? "%*.1f" : digits <= width ? "%*.0f" : "%*.1e";
  std::snprintf(buf, sizeof buf, fmt, width, v);
  return buf;
}

void benchTime(ThreadCtx& t, const SizeSetup& s, ncclDataType_t type, ncclRedOp_t op, int root, bool inPlace) {
  const Options& o = gW.opt;
  if (o.check) {
    Pattern p = makePattern(type, op, gW.coll->reduces, gW.nRanks, 99);
    initData(t, s, p, inPlace, type);
  }
  for (int i = 0; i < o.warmup; ++i) launch(t, s, type, op, root, inPlace);
  complete(t);
  gW.collectiveRan.store(true, std::memory_order_relaxed);
  rankBarrier(t);

  // Timed: back-to-back launches on the stream, one synchronisation at the end.
  auto start = std::chrono::steady_clock::now();
  for (int it = 0; it < o.iters; ++it) {
    if (o.aggIters > 1) NCCL_OK(t.ranks[0].comm, ncclGroupStart, ());
    for (int a = 0; a < o.aggIters; ++a) launch(t, s, type, op, root, inPlace);
    if (o.aggIters > 1) NCCL_OK(t.ranks[0].comm, ncclGroupEnd, ());
  }
  complete(t);
  double sec =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / (double(o.iters) * o.aggIters);
  sec = reduceAll<double>(t.tid, sec, o.average);

  const double algBw = sec > 0 ? double(s.c.param) * double(s.ts) * gW.coll->algScale(gW.nRanks) / 1.0e9 / sec : 0.0;
  const double busBw = algBw * gW.coll->busFactor(gW.nRanks);

  // Validation runs separately from the timed loop, which may have overwritten its own input.
  const bool report = o.check > 0 && (!inPlace || !(gW.coll->noInPlace || gW.coll->inPlaceUnchecked));
  int64_t wrong = 0;
  bool localWrong = false;
  static thread_local uint64_t rep = 0;
  for (int c = 0; c < o.check; ++c) {
    rankBarrier(t);  // a peer may still read our buffers just after our own stream completed
    Pattern p = makePattern(type, op, gW.coll->reduces, gW.nRanks, ++rep);
    initData(t, s, p, inPlace, type);
    launch(t, s, type, op, root, inPlace);
    complete(t);
    int64_t local = report ? checkData(t, s, p, type, op, root, inPlace) : 0;
    localWrong |= local != 0;
    // Every rank runs every repetition (no early exit): without MPI the sum below is per process.
    int64_t total = reduceAll<int64_t>(t.tid, local, kSum);
    if (!wrong) wrong = total;
  }
  if (localWrong) ++t.errors;

  for (RankCtx& r : t.ranks) {
    ncclResult_t async = ncclSuccess;
    NCCL_OK(r.comm, ncclCommGetAsyncError, (r.comm, &async));
    if (async != ncclSuccess && async != ncclInProgress) die("asynchronous operation", async, r.comm);
  }

  if (t.printer) {
    std::string time = fmtNum(sec * 1.0e6, 7), alg = fmtNum(algBw, 6), bus = fmtNum(busBw, 6);
    if (report)
      std::printf("  %7s  %6s  %6s  %6g", time.c_str(), alg.c_str(), bus.c_str(), double(wrong));
    else
      std::printf("  %7s  %6s  %6s    N/A", time.c_str(), alg.c_str(), bus.c_str());
  }
  t.bwSum += busBw;
  t.bwCount++;
}

void timeTest(ThreadCtx& t, ncclDataType_t type, ncclRedOp_t op, int root) {
  rankBarrier(t);
  for (size_t size : gW.sizes) {
    SizeSetup s;
    s.ts = typeSize(type);
    gW.coll->counts(size / s.ts, gW.nRanks, &s.c);
    gRowOpen = t.printer;
    if (t.printer)
      std::printf("%12zu  %12zu  %8s  %6s  %6d", std::max(s.c.send, s.c.recv) * s.ts, s.c.param, typeName(type),
                  gW.coll->reduces ? opName(op) : "none", root);
    benchTime(t, s, type, op, root, false);
    if (gW.coll->noInPlace) {
      // The library refuses in-place AlltoAll (its result would be undefined): nothing to time.
      if (t.printer) std::printf("  %7s  %6s  %6s    N/A", "N/A", "N/A", "N/A");
    } else {
      benchTime(t, s, type, op, root, true);
    }
    if (t.printer) {
      std::printf("\n");
      std::fflush(stdout);
    }
    gRowOpen = false;
  }
}

void threadMain(int tid) {
  ThreadCtx t;
  t.tid = tid;
  t.printer = gW.proc == 0 && tid == 0;
  initRanks(t);
  const Options& o = gW.opt;
  const std::vector<ncclRedOp_t> ops = gW.coll->reduces ? o.ops : std::vector<ncclRedOp_t>{ncclSum};
  std::vector<int> roots{-1};
  if (gW.coll->rooted) {
    roots = {o.root};
    if (o.root == -1) {
      roots.clear();
      for (int r = 0; r < gW.nRanks; ++r) roots.push_back(r);
    }
  }
  for (ncclDataType_t type : o.types)
    for (ncclRedOp_t op : ops)
      for (int root : roots) timeTest(t, type, op, root);
  rankBarrier(t);
  destroyRanks(t);
  gW.threadErrors[tid] = t.errors;
  gW.threadBw[tid] = t.bwCount ? t.bwSum / t.bwCount : 0.0;
}

// ---- Launch modes ----------------------------------------------------------------------------------

bool launchedByMpi() { return env("OMPI_COMM_WORLD_SIZE") || env("PMI_SIZE") || env("PMIX_RANK"); }

// Non-zero ranks of a multi-process launch stay quiet, even about bad flags (every rank sees them).
bool quietRank() {
  for (const char* n : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "PLEXUS_RANK", "RANK"})
    if (const char* v = env(n)) return std::strcmp(v, "0") != 0;
  return false;
}

void setupLaunch(int* argc, char*** argv) {
  const Options& o = gW.opt;
#ifdef PLEXUS_PERF_HAVE_MPI
  if (launchedByMpi()) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    gW.launch = Launch::kMpi;
    MPI_Comm_size(MPI_COMM_WORLD, &gW.nProcs);
    MPI_Comm_rank(MPI_COMM_WORLD, &gW.proc);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, gW.proc, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &gW.localProc);
    MPI_Comm_free(&node);
  }
#else
  (void)argc;
  (void)argv;
#endif
  if (gW.launch != Launch::kMpi) {
    const char *rank = env("PLEXUS_RANK"), *size = env("PLEXUS_NRANKS");
    const char *rankName = "PLEXUS_RANK", *sizeName = "PLEXUS_NRANKS";
    if (!rank && !size) rank = env("RANK"), size = env("WORLD_SIZE"), rankName = "RANK", sizeName = "WORLD_SIZE";
    if (!rank && !size && launchedByMpi()) {
      // mpirun, but this binary has no MPI: the processes can still meet through NCCL_COMM_ID.
      rank = env("OMPI_COMM_WORLD_RANK") ? env("OMPI_COMM_WORLD_RANK") : env("PMI_RANK");
      size = env("OMPI_COMM_WORLD_SIZE") ? env("OMPI_COMM_WORLD_SIZE") : env("PMI_SIZE");
      rankName = "OMPI_COMM_WORLD_RANK", sizeName = "OMPI_COMM_WORLD_SIZE";
      if (!rank || !size) fatal(2, "launched by an MPI launcher, but this plexus-perf was built without MPI");
    }
    if (rank || size) {
      if (!rank || !size)
        fatal(2, std::string(rank ? rankName : sizeName) + " is set but " + (rank ? sizeName : rankName) + " is not");
      gW.nProcs = envInt(sizeName, size, 1, PLEXUS_MAX_HOST_DEVICES);
      gW.proc = envInt(rankName, rank, 0, gW.nProcs - 1);
      if (gW.nProcs > 1) {
        // torchrun-style launchers name rank 0's host and a port: rank 0 serves the bootstrap there.
        if (!env("NCCL_COMM_ID") && env("MASTER_ADDR") && env("MASTER_PORT")) {
          const std::string addr = env("MASTER_ADDR");
          const bool v6 = addr.find(':') != std::string::npos && addr.front() != '[';
          setenv("NCCL_COMM_ID", ((v6 ? "[" + addr + "]" : addr) + ":" + env("MASTER_PORT")).c_str(), 1);
        }
        if (!env("NCCL_COMM_ID"))
          fatal(2, std::string("a multi-process run without MPI needs NCCL_COMM_ID=<ip:port> (where rank 0 "
                               "listens), or MASTER_ADDR and MASTER_PORT, in every process") +
                       (launchedByMpi() ? "; this plexus-perf was built without MPI" : ""));
        gW.launch = Launch::kEnv;
        gW.localProc = gW.proc;
        for (const char* n : {"PLEXUS_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"})
          if (const char* v = env(n)) {
            gW.localProc = envInt(n, v, 0, PLEXUS_MAX_HOST_DEVICES - 1);
            break;
          }
      }
    }
  }

  gW.perProc = o.nThreads * o.nGpus;
  gW.nRanks = gW.nProcs * gW.perProc;
  gW.devBase = gW.localProc * gW.perProc;
  if (gW.nRanks > PLEXUS_MAX_HOST_DEVICES || gW.devBase + gW.perProc > PLEXUS_MAX_HOST_DEVICES)
    fatal(2, "too many ranks: host devices are limited to " + std::to_string(PLEXUS_MAX_HOST_DEVICES));
  gW.cuda = cudaPlanned(&gW.backendWhy);
  if (gW.cuda) gW.cudaDevices = cudaDeviceCount();
  if (gW.cuda && o.cudaDevice >= gW.cudaDevices)
    fatal(2, "--cuda_device " + std::to_string(o.cudaDevice) + ": there are " + std::to_string(gW.cudaDevices) +
                 " CUDA devices");
  if (gW.coll->rooted && o.root >= gW.nRanks)
    fatal(2, "root " + std::to_string(o.root) + " is not a rank (" + std::to_string(gW.nRanks) + " ranks)");
  if (gW.coll->stepwise && o.nGpus > 1)
    fatal(2, std::string(gW.coll->name) +
                 " runs dependent steps as separate groups, which -g would merge into "
                 "one; use threads (-t) or processes instead");
  if (gW.coll->pow2Ranks && (gW.nRanks & (gW.nRanks - 1)))
    fatal(2, std::string(gW.coll->name) + " needs a power-of-two number of ranks, not " + std::to_string(gW.nRanks));

  // Every rank must hold the same id: rank 0's, broadcast by MPI, or derived from NCCL_COMM_ID.
  if (gW.launch != Launch::kMpi || gW.proc == 0) NCCL_OK(nullptr, ncclGetUniqueId, (&gW.id));
#ifdef PLEXUS_PERF_HAVE_MPI
  if (gW.launch == Launch::kMpi) MPI_Bcast(&gW.id, sizeof gW.id, MPI_BYTE, 0, MPI_COMM_WORLD);
#endif
}

void planSizes() {
  const Options& o = gW.opt;
  for (size_t s = o.minBytes; s <= o.maxBytes;) {
    gW.sizes.push_back(s);
    size_t next = o.stepFactor > 1 ? s * o.stepFactor : s + o.stepBytes;
    if (next <= s || (o.stepFactor > 1 && s > o.maxBytes / o.stepFactor + 1)) break;
    s = next;
  }
  // Buffers for the largest size of any requested type; counts grow with size.
  for (ncclDataType_t type : o.types) {
    Counts c;
    gW.coll->counts(o.maxBytes / typeSize(type), gW.nRanks, &c);
    gW.allocBytes = std::max(gW.allocBytes, std::max(c.send, c.recv) * typeSize(type));
  }
}

void printHeader() {
  const Options& o = gW.opt;
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  if (char* dot = std::strchr(host, '.')) *dot = '\0';
  std::string lines;
  for (int i = 0; i < gW.perProc; ++i) {
    char line[512];
    const int dev = gW.devBase + i;
    if (gW.cuda) {
      const int cudaDev = gW.opt.cudaDevice >= 0 ? gW.opt.cudaDevice : dev % gW.cudaDevices;
      std::snprintf(line, sizeof line, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] Plexus CUDA backend\n",
                    gW.proc * gW.perProc + i, 0, int(getpid()), host, cudaDev, cudaBusId(cudaDev).c_str());
    } else {
      std::snprintf(line, sizeof line, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [host] Plexus host backend\n",
                    gW.proc * gW.perProc + i, 0, int(getpid()), host, dev);
    }
    lines += line;
  }
#ifdef PLEXUS_PERF_HAVE_MPI
  if (gW.launch == Launch::kMpi) {
    // Rank 0 prints every process's lines, in rank order.
    const int len = int(lines.size()) + 1;
    int maxLen = 0;
    MPI_Allreduce(&len, &maxLen, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    std::vector<char> mine(maxLen, '\0'), all(gW.proc == 0 ? size_t(maxLen) * gW.nProcs : 0);
    std::memcpy(mine.data(), lines.c_str(), lines.size());
    MPI_Gather(mine.data(), maxLen, MPI_CHAR, all.data(), maxLen, MPI_CHAR, 0, MPI_COMM_WORLD);
    lines.clear();
    for (int p = 0; gW.proc == 0 && p < gW.nProcs; ++p) lines += &all[size_t(p) * maxLen];
  }
#endif
  if (gW.proc != 0) return;
  int libVersion = 0;
  if (ncclGetVersion(&libVersion) != ncclSuccess) libVersion = 0;
  std::printf("# plexus-perf %d.%d.%d (nccl-tests compatible) nccl-headers=%d nccl-library=%d\n", PLEXUS_VERSION_MAJOR,
              PLEXUS_VERSION_MINOR, PLEXUS_VERSION_PATCH, NCCL_VERSION_CODE, libVersion);
  std::printf("# Collective test starting: plexus-perf %s\n", o.collective.c_str());
  std::printf(
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: %d "
      "validation: %d graph: 0\n",
      o.nThreads, o.nGpus, o.minBytes, o.maxBytes, o.stepFactor > 1 ? o.stepFactor : o.stepBytes,
      o.stepFactor > 1 ? "factor" : "bytes", o.warmup, o.iters, o.aggIters, o.check);
  if (o.blocking == 1) std::printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
  if (o.blocking == 2) std::printf("# Blocking Enabled: wait for completion after each collective (no barrier) \n");
  std::printf("#\n# Using devices\n%s", lines.c_str());
  if (gW.launch == Launch::kEnv)
    std::printf("#  (%d more processes; without MPI only this process's ranks are listed and timed)\n", gW.nProcs - 1);
  std::printf("#\n");
  std::printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place\n", "", "", "", "",
              "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop",
              "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "",
              "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  std::fflush(stdout);
}

int run(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  gW.opt = parseOptions(argc, argv, quietRank());
  gW.coll = findCollective(gW.opt.collective);
  setupLaunch(&argc, &argv);
  planSizes();
  printHeader();

  const int n = gW.opt.nThreads;
  gW.bar = std::make_unique<std::barrier<>>(n);
  gDoubleScratch.slot.assign(n, 0.0);
  gIntScratch.slot.assign(n, 0);
  gW.threadErrors.assign(n, 0);
  gW.threadBw.assign(n, 0.0);
  std::vector<std::thread> threads;
  for (int t = 1; t < n; ++t) threads.emplace_back(threadMain, t);
  threadMain(0);  // on the main thread, the only one that calls MPI
  for (std::thread& th : threads) th.join();

  long long errors = 0;
  double bw = 0;
  for (int t = 0; t < n; ++t) errors += gW.threadErrors[t], bw += gW.threadBw[t] / n;
#ifdef PLEXUS_PERF_HAVE_MPI
  if (gW.launch == Launch::kMpi) {
    MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &bw, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    bw /= gW.nProcs;
  }
#endif
  if (gW.proc == 0) {
    std::printf("# %-20s : %lld %s\n", "Out of bounds values", errors, errors ? "FAILED" : "OK");
    std::printf("# %-20s : %g \n", "Avg bus bandwidth", bw);
    std::printf("#\n# Collective test concluded: plexus-perf %s\n", gW.opt.collective.c_str());
  }
  std::fflush(stdout);
#ifdef PLEXUS_PERF_HAVE_MPI
  if (gW.launch == Launch::kMpi) MPI_Finalize();
#endif
  return errors ? 1 : 0;
}

}  // namespace
}  // namespace perf

int main(int argc, char** argv) { return perf::run(argc, argv); }
