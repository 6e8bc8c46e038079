// The GPU tests' shared machinery: reporting, the watchdog, launching ranks, element types and the host reference.
#include "gpu_test.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace gt {
namespace {

constexpr long kMaxPrinted = 25;
std::atomic<long> gFailures{0};
std::atomic<long>* gSharedFailures = nullptr;  // processes: the parent's counter in shared memory
std::atomic<long> gRun{0};
std::atomic<long>* gSharedRun = nullptr;
std::mutex gPrintMutex;
std::mutex gPhaseMutex;
std::string gPhase = "start";
thread_local std::string tTag;  // "[rank 2] " in rank threads and processes

void vprint(FILE* f, const char* prefix, const char* fmt, va_list ap) {
  char buf[4096];
  vsnprintf(buf, sizeof buf, fmt, ap);
  std::lock_guard<std::mutex> lock(gPrintMutex);
  std::fprintf(f, "%s%s%s\n", tTag.c_str(), prefix, buf);
  std::fflush(f);
}

}  // namespace

std::string format(const char* fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

void skip(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprint(stdout, "SKIPPED: ", fmt, ap);
  va_end(ap);
  std::exit(kSkipCode);
}

void fatal(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprint(stdout, "FATAL: ", fmt, ap);
  va_end(ap);
  std::fflush(nullptr);
  std::_Exit(1);
}

void fail(const char* fmt, ...) {
  long n = ++gFailures;
  if (gSharedFailures) ++*gSharedFailures;
  if (n > kMaxPrinted) {
    if (n == kMaxPrinted + 1) {
      std::lock_guard<std::mutex> lock(gPrintMutex);
      std::printf("%s(further failures are counted, not printed)\n", tTag.c_str());
    }
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  vprint(stdout, "FAIL: ", fmt, ap);
  va_end(ap);
}

void note(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprint(stdout, "", fmt, ap);
  va_end(ap);
}

long failures() { return gFailures.load(); }

void countRun() {
  ++gRun;
  if (gSharedRun) ++*gSharedRun;
}

long runCount() { return gRun.load(); }

int finish(const std::string& name) {
  long n = failures();
  if (n == 0) {
    std::printf("PASS %s\n", name.c_str());
    return 0;
  }
  std::printf("FAIL %s: %ld failed checks\n", name.c_str(), n);
  return 1;
}

const char* lastError(ncclComm_t comm) {
  const char* s = ncclGetLastError(comm);
  return s && *s ? s : "no message";
}

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void setPhase(const std::string& phase) {
  std::lock_guard<std::mutex> lock(gPhaseMutex);
  gPhase = tTag + phase;
}

void dumpStacks(const char* why) {
  const char* off = std::getenv("PLEXUS_GPU_TEST_STACKS");
  if (off && std::strcmp(off, "0") == 0) return;
  std::fflush(nullptr);
  for (const char* debugger : {"cuda-gdb", "gdb"}) {
    const std::string cmd = std::string("command -v ") + debugger + " >/dev/null 2>&1 || exit 3; timeout 90 " +
                            debugger + " -p " + std::to_string(getpid()) +
                            " -batch -nx -ex 'set pagination off' -ex 'thread apply all bt 24' 2>&1 | "
                            "grep -E '^(Thread |#[0-9])' | head -300";
    std::printf("STACKS (%s): every thread of pid %d, by %s\n", why, (int)getpid(), debugger);
    std::fflush(nullptr);
    const int rc = std::system(cmd.c_str());
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 3) continue;
    return;
  }
  std::printf("STACKS: neither cuda-gdb nor gdb is on the PATH\n");
}

void startWatchdog(int seconds) {
  if (const char* v = std::getenv("PLEXUS_GPU_TEST_TIMEOUT")) seconds = std::max(1, std::atoi(v));
  std::thread([seconds] {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    std::string phase;
    {
      std::lock_guard<std::mutex> lock(gPhaseMutex);
      phase = gPhase;
    }
    std::printf("FAIL: TIMEOUT: still running after %d s, in: %s\n", seconds, phase.c_str());
    dumpStacks("the watchdog's timeout");
    std::fflush(nullptr);
    std::_Exit(1);
  }).detach();
}

// ---- Devices ------------------------------------------------------------------------------------------------------

static void probeDevice() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    skip("no usable CUDA device: cudaGetDeviceCount failed: %s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
  if (n == 0) skip("no usable CUDA device: cudaGetDeviceCount found none");
}

bool hostMode() {
  static const bool host = [] {
    const char* v = std::getenv("PLEXUS_GPU_TEST_HOST");
    return v && std::strcmp(v, "1") == 0;
  }();
  return host;
}

void* devAlloc(size_t bytes) {
  void* p = nullptr;
  if (hostMode()) {
    p = std::malloc(std::max<size_t>(bytes, 1));
    if (!p) fatal("malloc(%zu) failed", bytes);
    return p;
  }
  GT_CUDA(cudaMalloc(&p, bytes));
  return p;
}

void devFree(void* p) {
  if (hostMode()) return std::free(p);
  GT_CUDA(cudaFree(p));
}

void devMemset(void* p, int byte, size_t bytes, cudaStream_t s) {
  if (hostMode()) {
    std::memset(p, byte, bytes);
    return;
  }
  GT_CUDA(cudaMemsetAsync(p, byte, bytes, s));
}

void toDevice(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  if (hostMode()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  // From pageable memory the call returns once src has been staged: the caller may reuse it at once.
  GT_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
}

void toHost(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  if (hostMode()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  GT_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
  GT_CUDA(cudaStreamSynchronize(s));
}

void streamSync(cudaStream_t s) {
  if (hostMode()) {
    ncclResult_t r = plexusStreamSynchronize(s);
    if (r != ncclSuccess) fatal("plexusStreamSynchronize: %s (%s)", ncclGetErrorString(r), lastError(nullptr));
    return;
  }
  GT_CUDA(cudaStreamSynchronize(s));
}

void requireDevice(bool inChild) {
  if (hostMode()) return;
  if (!inChild) return probeDevice();
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) fatal("fork: %s", strerror(errno));
  if (pid == 0) {
    probeDevice();
    std::_Exit(0);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) fatal("waitpid: %s", strerror(errno));
  if (WIFEXITED(status) && WEXITSTATUS(status) == kSkipCode) std::exit(kSkipCode);  // the child said why
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fatal("the CUDA device probe (a child process) failed");
}

std::string envKnob(const char* name) {
  std::string plexus = std::string("PLEXUS_") + name, nccl = std::string("NCCL_") + name;
  if (const char* v = std::getenv(plexus.c_str()); v && *v) return v;
  if (const char* v = std::getenv(nccl.c_str()); v && *v) return v;
  return "";
}

// ---- Launch -------------------------------------------------------------------------------------------------------

Mode parseMode(const std::string& s) {
  if (s == "group") return Mode::Group;
  if (s == "threads") return Mode::Threads;
  if (s == "procs") return Mode::Procs;
  fatal("unknown mode '%s' (group, threads, procs)", s.c_str());
}

const char* modeName(Mode m) { return m == Mode::Group ? "group" : m == Mode::Threads ? "threads" : "procs"; }

void Driver::groupStart() const {
  if (mode == Mode::Group && ranks.size() > 1) GT_NCCL(nullptr, ncclGroupStart());
}

ncclResult_t Driver::groupEnd() const {
  if (mode == Mode::Group && ranks.size() > 1) return ncclGroupEnd();
  return ncclSuccess;
}

namespace {

// A reusable barrier for threads (C++17 has no std::barrier).
class ThreadBarrier {
 public:
  explicit ThreadBarrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    const long gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return gen_ != gen; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_, count_ = 0;
  long gen_ = 0;
};

void initStream(Rank& r) {
  if (hostMode())
    GT_NCCL(r.comm, plexusStreamCreate(&r.stream));
  else
    GT_CUDA(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
}

// Makes rank's device current before its communicator is made: CUDA device 0 (every rank on the one GPU), or in host
// mode host device `rank`.
void useDevice(int rank) {
  if (hostMode())
    GT_NCCL(nullptr, plexusSetDevice(rank));
  else
    GT_CUDA(cudaSetDevice(0));
}

void checkBackend(const Rank& r) {
  plexusBackend_t b = plexusBackendHost;
  GT_NCCL(r.comm, plexusCommGetBackend(r.comm, &b));
  if (hostMode()) {
    if (b != plexusBackendHost) fatal("rank %d: host mode, but the communicator is not on the host backend", r.rank);
    return;
  }
  if (b != plexusBackendCuda) fatal("rank %d: the communicator is not on the CUDA backend", r.rank);
  int dev = -1;
  GT_NCCL(r.comm, ncclCommCuDevice(r.comm, &dev));
  if (dev != r.device) fail("rank %d: ncclCommCuDevice says %d, expected %d", r.rank, dev, r.device);
  int count = 0, user = -1;
  GT_NCCL(r.comm, ncclCommCount(r.comm, &count));
  GT_NCCL(r.comm, ncclCommUserRank(r.comm, &user));
  if (count != r.nranks || user != r.rank)
    fail("rank %d: ncclCommCount/UserRank say %d/%d, expected %d/%d", r.rank, count, user, r.nranks, r.rank);
}

// A body that aborted its communicators set their comm to nullptr: only their streams are left to free.
void teardown(Driver& d) {
  for (Rank& r : d.ranks) streamSync(r.stream);
  for (Rank& r : d.ranks) {
    if (!r.comm) continue;
    ncclResult_t async = ncclSuccess;
    GT_NCCL(r.comm, ncclCommGetAsyncError(r.comm, &async));
    if (async != ncclSuccess) fail("rank %d: asynchronous error %s (%s)", r.rank, ncclGetErrorString(async),
                                   lastError(r.comm));
  }
  // Finalize is collective: several communicators of one thread finalize inside one group.
  if (d.ranks.size() > 1) GT_NCCL(nullptr, ncclGroupStart());
  for (Rank& r : d.ranks)
    if (r.comm) GT_NCCL(r.comm, ncclCommFinalize(r.comm));
  if (d.ranks.size() > 1) GT_NCCL(nullptr, ncclGroupEnd());
  for (Rank& r : d.ranks) {
    if (r.comm) GT_NCCL(r.comm, ncclCommDestroy(r.comm));
    if (hostMode())
      GT_NCCL(nullptr, plexusStreamDestroy(r.stream));
    else
      GT_CUDA(cudaStreamDestroy(r.stream));
  }
  d.ranks.clear();
}

long runGroup(int nranks, const std::function<void(Driver&)>& body) {
  useDevice(0);
  ncclUniqueId id;
  GT_NCCL(nullptr, ncclGetUniqueId(&id));
  Driver d;
  d.mode = Mode::Group;
  d.nranks = nranks;
  d.barrier = [] {};
  d.ranks.resize(nranks);
  setPhase("ncclCommInitRank x" + std::to_string(nranks) + " in one group");
  if (nranks > 1) GT_NCCL(nullptr, ncclGroupStart());
  for (int r = 0; r < nranks; ++r) {
    d.ranks[r].rank = r;
    d.ranks[r].nranks = nranks;
    useDevice(r);
    GT_NCCL(nullptr, ncclCommInitRank(&d.ranks[r].comm, nranks, id, r));
  }
  if (nranks > 1) GT_NCCL(nullptr, ncclGroupEnd());
  for (Rank& r : d.ranks) {
    checkBackend(r);
    initStream(r);
  }
  body(d);
  setPhase("teardown");
  teardown(d);
  return failures();
}

long runThreads(int nranks, const std::function<void(Driver&)>& body) {
  ncclUniqueId id;
  GT_NCCL(nullptr, ncclGetUniqueId(&id));
  ThreadBarrier bar(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      tTag = "[rank " + std::to_string(r) + "] ";
      Driver d;
      d.mode = Mode::Threads;
      d.nranks = nranks;
      d.barrier = [&bar] { bar.wait(); };
      d.ranks.resize(1);
      Rank& me = d.ranks[0];
      me.rank = r;
      me.nranks = nranks;
      useDevice(r);
      setPhase("ncclCommInitRank");
      GT_NCCL(nullptr, ncclCommInitRank(&me.comm, nranks, id, r));
      checkBackend(me);
      initStream(me);
      body(d);
      setPhase("teardown");
      teardown(d);
    });
  for (auto& t : threads) t.join();
  return failures();
}

bool writeAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t k = write(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k, n -= size_t(k);
  }
  return true;
}

bool readAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n) {
    ssize_t k = read(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k, n -= size_t(k);
  }
  return true;
}

struct Shared {
  pthread_barrier_t barrier;
  std::atomic<long> failures;
  std::atomic<long> run;
};

long runProcs(int nranks, int timeoutSeconds, const std::function<void(Driver&)>& body) {
  // Shared by the children: a process-shared barrier and the failure count. Made before fork, before any CUDA call.
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) fatal("mmap: %s", strerror(errno));
  auto* shared = new (mem) Shared;
  shared->failures.store(0);
  shared->run.store(0);
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&shared->barrier, &attr, unsigned(nranks));
  std::vector<int> pipes(2 * nranks);
  for (int r = 0; r < nranks; ++r)
    if (pipe(&pipes[2 * r]) != 0) fatal("pipe: %s", strerror(errno));
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) fatal("fork: %s", strerror(errno));
    if (pid == 0) {
      tTag = "[rank " + std::to_string(r) + "] ";
      gSharedFailures = &shared->failures;
      gSharedRun = &shared->run;
      startWatchdog(timeoutSeconds);
      ncclUniqueId id;
      if (r == 0) {
        // Rank 0 makes the id and hands it to every other rank through its pipe.
        GT_NCCL(nullptr, ncclGetUniqueId(&id));
        for (int p = 1; p < nranks; ++p)
          if (!writeAll(pipes[2 * p + 1], &id, sizeof id)) fatal("writing the unique id to rank %d", p);
      } else if (!readAll(pipes[2 * r], &id, sizeof id)) {
        fatal("reading the unique id from rank 0");
      }
      Driver d;
      d.mode = Mode::Procs;
      d.nranks = nranks;
      d.barrier = [shared] { pthread_barrier_wait(&shared->barrier); };
      d.ranks.resize(1);
      Rank& me = d.ranks[0];
      me.rank = r;
      me.nranks = nranks;
      useDevice(r);
      setPhase("ncclCommInitRank");
      GT_NCCL(nullptr, ncclCommInitRank(&me.comm, nranks, id, r));
      checkBackend(me);
      initStream(me);
      body(d);
      setPhase("teardown");
      teardown(d);
      std::fflush(nullptr);
      std::exit(failures() ? 1 : 0);
    }
    pids.push_back(pid);
  }
  // The parent: every child must exit 0 before the deadline; once one fails, the others get a grace period.
  long bad = 0;
  const double deadline = nowSeconds() + timeoutSeconds + 15;
  double graceEnd = 1e300;
  size_t left = pids.size();
  while (left) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      --left;
      int r = int(std::find(pids.begin(), pids.end(), pid) - pids.begin());
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        ++bad;
        if (WIFSIGNALED(status))
          note("FAIL: rank %d (pid %d) was killed by signal %d", r, int(pid), WTERMSIG(status));
        else
          note("FAIL: rank %d (pid %d) exited with status %d", r, int(pid), WEXITSTATUS(status));
        graceEnd = std::min(graceEnd, nowSeconds() + 15);
      }
      continue;
    }
    if (nowSeconds() > std::min(deadline, graceEnd)) {
      note("FAIL: %zu rank process(es) still running %s; killing them", left,
           graceEnd < deadline ? "15 s after another rank failed" : "at the deadline");
      for (pid_t p : pids) kill(p, SIGKILL);
      while (waitpid(-1, &status, 0) > 0) {
      }
      bad += long(left);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int fd : pipes) close(fd);
  long total = shared->failures.load() + bad;
  gFailures += total;
  gRun += shared->run.load();
  return total;
}

}  // namespace

long runTeam(Mode mode, int nranks, int timeoutSeconds, const std::function<void(Driver&)>& body) {
  switch (mode) {
    case Mode::Group: return runGroup(nranks, body);
    case Mode::Threads: return runThreads(nranks, body);
    case Mode::Procs: return runProcs(nranks, timeoutSeconds, body);
  }
  return 1;
}

// ---- Types -------------------------------------------------------------------------------------------------------

const std::vector<TypeInfo>& allTypes() {
  static const std::vector<TypeInfo> types = {
      {ncclInt8, "int8", 1, false, true, 7},          {ncclUint8, "uint8", 1, false, false, 8},
      {ncclInt32, "int32", 4, false, true, 31},       {ncclUint32, "uint32", 4, false, false, 32},
      {ncclInt64, "int64", 8, false, true, 63},       {ncclUint64, "uint64", 8, false, false, 64},
      {ncclFloat16, "half", 2, true, true, 11},       {ncclFloat32, "float", 4, true, true, 24},
      {ncclFloat64, "double", 8, true, true, 53},     {ncclBfloat16, "bfloat16", 2, true, true, 8},
      {ncclFloat8e4m3, "f8e4m3", 1, true, true, 4},   {ncclFloat8e5m2, "f8e5m2", 1, true, true, 3},
  };
  return types;
}

const TypeInfo& typeInfo(ncclDataType_t t) {
  const std::vector<TypeInfo>& types = allTypes();  // in ncclDataType_t order
  if (int(t) < 0 || size_t(t) >= types.size() || types[size_t(t)].type != t) fatal("unknown data type %d", int(t));
  return types[size_t(t)];
}

double loadFloat(ncclDataType_t t, const void* p) {
  switch (t) {
    case ncclFloat16: {
      __half h;
      std::memcpy(&h, p, 2);
      return __half2float(h);
    }
    case ncclBfloat16: {
      __nv_bfloat16 b;
      std::memcpy(&b, p, 2);
      return __bfloat162float(b);
    }
    case ncclFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case ncclFloat64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: {
      __nv_fp8_storage_t s;
      std::memcpy(&s, p, 1);
      __half h = __half(__nv_cvt_fp8_to_halfraw(s, t == ncclFloat8e4m3 ? __NV_E4M3 : __NV_E5M2));
      return __half2float(h);
    }
    default: fatal("loadFloat of a non-float type %d", int(t));
  }
}

void storeFloat(ncclDataType_t t, double v, void* p) {
  switch (t) {
    case ncclFloat16: {
      __half h = __double2half(v);
      std::memcpy(p, &h, 2);
      return;
    }
    case ncclBfloat16: {
      __nv_bfloat16 b = __double2bfloat16(v);
      std::memcpy(p, &b, 2);
      return;
    }
    case ncclFloat32: {
      float f = float(v);
      std::memcpy(p, &f, 4);
      return;
    }
    case ncclFloat64: std::memcpy(p, &v, 8); return;
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: {
      __nv_fp8_storage_t s = __nv_cvt_double_to_fp8(v, __NV_SATFINITE, t == ncclFloat8e4m3 ? __NV_E4M3 : __NV_E5M2);
      std::memcpy(p, &s, 1);
      return;
    }
    default: fatal("storeFloat of a non-float type %d", int(t));
  }
}

uint64_t loadInt(ncclDataType_t t, const void* p) {
  switch (t) {
    case ncclInt8: return uint64_t(int64_t(*static_cast<const int8_t*>(p)));
    case ncclUint8: return *static_cast<const uint8_t*>(p);
    case ncclInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return uint64_t(int64_t(v));
    }
    case ncclUint32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case ncclInt64:
    case ncclUint64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    default: fatal("loadInt of a non-integer type %d", int(t));
  }
}

void storeInt(ncclDataType_t t, uint64_t v, void* p) { std::memcpy(p, &v, typeInfo(t).size); }  // little endian

// ---- Ops and inputs -------------------------------------------------------------------------------------------------

const std::vector<Op>& allOps() {
  static const std::vector<Op> ops = {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Avg, Op::PreMulHost, Op::PreMulDevice};
  return ops;
}

const char* opName(Op op) {
  switch (op) {
    case Op::Sum: return "sum";
    case Op::Prod: return "prod";
    case Op::Max: return "max";
    case Op::Min: return "min";
    case Op::Avg: return "avg";
    case Op::PreMulHost: return "premulsum(host scalar)";
    case Op::PreMulDevice: return "premulsum(device scalar)";
  }
  return "?";
}

ncclRedOp_t ncclOpOf(Op op) {
  switch (op) {
    case Op::Sum: return ncclSum;
    case Op::Prod: return ncclProd;
    case Op::Max: return ncclMax;
    case Op::Min: return ncclMin;
    case Op::Avg: return ncclAvg;
    default: fatal("ncclOpOf(%s): PreMulSum ops are made by ncclRedOpCreatePreMulSum", opName(op));
  }
}

double preMulScalar(ncclDataType_t t) {
  const TypeInfo& ti = typeInfo(t);
  if (!ti.isFloat) return 3;
  return ti.size == 1 ? 0.5 : 1.5;
}

static inline uint64_t mix(uint64_t seed, int rank, size_t i) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + uint64_t(rank + 1) * 0xD1B54A32D192ED03ull + uint64_t(i) * 0x8CB92BA72F3D8DD7ull;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

void Inputs::store(int rank, size_t i, void* p) const {
  const TypeInfo& ti = typeInfo(type);
  const uint64_t h = mix(seed, rank, i);
  const bool sumLike = reduces && (op == Op::Sum || op == Op::Avg || op == Op::PreMulHost || op == Op::PreMulDevice);
  if (!ti.isFloat) {
    if (!reduces || op == Op::Max || op == Op::Min || (!ti.isSigned && sumLike)) return storeInt(type, h, p);
    if (op == Op::Prod) {
      if (!ti.isSigned) return storeInt(type, 1 + h % 3, p);
      // {1, -1, 2}, with at most valueBits-1 ranks contributing a 2: no signed overflow.
      int64_t v = int64_t(h % 3) == 0 ? 1 : int64_t(h % 3) == 1 ? -1 : 2;
      if (v == 2 && rank >= ti.mantissaBits - 1) v = 1;
      return storeInt(type, uint64_t(v), p);
    }
    // Signed sums: |value| <= max / (nranks * multiplier), so no partial sum overflows.
    const uint64_t maxPos = ti.mantissaBits == 63 ? uint64_t(INT64_MAX) : (uint64_t(1) << ti.mantissaBits) - 1;
    const uint64_t mul = (op == Op::PreMulHost || op == Op::PreMulDevice) ? 3 : 1;
    const uint64_t a = maxPos / (uint64_t(nranks) * mul);
    const int64_t v = int64_t(h % (2 * a + 1)) - int64_t(a);
    return storeInt(type, uint64_t(v), p);
  }
  double v;
  if (!reduces || op == Op::Max || op == Op::Min) {
    v = (double(int64_t(h % 4001)) - 2000.0) / 16.0;
  } else if (op == Op::Prod) {
    static const double pick[4] = {1.0, -1.0, 2.0, 0.5};
    v = pick[h % 4];
  } else if (ti.size == 1) {
    // fp8: integers whose every partial sum is exact (e4m3 up to 16, e5m2 up to 8).
    const int64_t b = std::max<int64_t>(1, (type == ncclFloat8e4m3 ? 16 : 8) / nranks);
    v = double(int64_t(h % uint64_t(2 * b + 1)) - b);
  } else {
    v = (double(int64_t(h % 257)) - 128.0) / 64.0;
  }
  storeFloat(type, v, p);
}

static double unitRoundoff(const TypeInfo& ti) { return std::ldexp(1.0, -ti.mantissaBits); }

static double tiny(ncclDataType_t t) {
  switch (t) {
    case ncclFloat8e4m3: return std::ldexp(1.0, -8);
    case ncclFloat8e5m2: return std::ldexp(1.0, -15);
    case ncclFloat16: return std::ldexp(1.0, -23);
    default: return 1e-30;
  }
}

Expected reduceAt(const Inputs& in, size_t i) {
  const TypeInfo& ti = typeInfo(in.type);
  const int n = in.nranks;
  unsigned char buf[8];
  Expected e;
  const bool preMul = in.op == Op::PreMulHost || in.op == Op::PreMulDevice;
  if (!ti.isFloat) {
    const uint64_t mask = ti.size == 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * ti.size)) - 1;
    uint64_t acc = 0;
    for (int r = 0; r < n; ++r) {
      in.store(r, i, buf);
      uint64_t v = loadInt(in.type, buf);
      if (r == 0) {
        acc = preMul ? v * 3 : v;
        continue;
      }
      switch (in.op) {
        case Op::Sum:
        case Op::Avg: acc += v; break;
        case Op::PreMulHost:
        case Op::PreMulDevice: acc += v * 3; break;
        case Op::Prod: acc *= v; break;
        case Op::Max: acc = ti.isSigned ? uint64_t(std::max(int64_t(acc), int64_t(v))) : std::max(acc, v); break;
        case Op::Min: acc = ti.isSigned ? uint64_t(std::min(int64_t(acc), int64_t(v))) : std::min(acc, v); break;
      }
    }
    if (in.op == Op::Avg) {
      // NCCL divides the sum, kept in the element type, by nranks (toward zero for signed types).
      acc &= mask;
      if (ti.isSigned) {
        const int shift = 64 - 8 * int(ti.size);
        const int64_t s = shift ? int64_t(acc << shift) >> shift : int64_t(acc);
        acc = uint64_t(s / n);
      } else {
        acc = acc / uint64_t(n);
      }
    }
    e.u = acc & mask;
    return e;
  }
  double acc = 0, mag = 0;
  const double s = preMul ? preMulScalar(in.type) : 1.0;
  for (int r = 0; r < n; ++r) {
    in.store(r, i, buf);
    const double v = loadFloat(in.type, buf);
    if (r == 0) {
      acc = v * s;
      mag = std::fabs(v * s);
      continue;
    }
    switch (in.op) {
      case Op::Sum:
      case Op::Avg:
      case Op::PreMulHost:
      case Op::PreMulDevice: acc += v * s; break;
      case Op::Prod: acc *= v; break;
      case Op::Max: acc = std::max(acc, v); break;
      case Op::Min: acc = std::min(acc, v); break;
    }
    mag += std::fabs(v * s);
  }
  if (in.op == Op::Avg) {
    acc /= n;
    mag /= n;
  }
  // Exact by construction: max, min, products of powers of two, sums of the chosen inputs in every type whose
  // precision holds them (all but bfloat16). Otherwise each of the n-1 additions, the scaling and the final rounding
  // may each cost one rounding of at most the sum of the magnitudes.
  const bool exact = in.op == Op::Max || in.op == Op::Min || in.op == Op::Prod ||
                     (in.op == Op::Sum && in.type != ncclBfloat16);
  e.f = acc;
  e.tol = exact ? 0.0 : double(n + 2) * unitRoundoff(ti) * mag + tiny(in.type);
  return e;
}

bool matches(const Inputs& in, const Expected& e, const void* got) {
  const TypeInfo& ti = typeInfo(in.type);
  if (!ti.isFloat) {
    const uint64_t mask = ti.size == 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * ti.size)) - 1;
    return (loadInt(in.type, got) & mask) == e.u;
  }
  const double g = loadFloat(in.type, got);
  if (std::isnan(g)) return false;
  if (e.tol == 0) return g == e.f;
  return std::fabs(g - e.f) <= e.tol;
}

std::string showElement(ncclDataType_t t, const void* p) {
  const TypeInfo& ti = typeInfo(t);
  uint64_t bits = 0;
  std::memcpy(&bits, p, ti.size);
  if (ti.isFloat) return format("%.9g (bits 0x%llx)", loadFloat(t, p), (unsigned long long)bits);
  uint64_t v = loadInt(t, p);
  return ti.isSigned ? format("%lld", (long long)int64_t(v)) : format("%llu", (unsigned long long)bits);
}

std::string showExpected(const Inputs& in, const Expected& e) {
  const TypeInfo& ti = typeInfo(in.type);
  if (ti.isFloat) return e.tol ? format("%.9g +- %.3g", e.f, e.tol) : format("%.9g", e.f);
  if (ti.isSigned) {
    const int shift = 64 - 8 * int(ti.size);
    const int64_t s = shift ? int64_t(e.u << shift) >> shift : int64_t(e.u);
    return format("%lld", (long long)s);
  }
  return format("%llu", (unsigned long long)e.u);
}

}  // namespace gt
