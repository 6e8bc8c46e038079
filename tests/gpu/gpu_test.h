// GPU tests (ctest label gpu): programs written as an NCCL user writes them, with nvcc against nccl.h and the CUDA
// runtime, run against libplexus. Everything they check is computed here on the host, independently of Plexus's own
// code (half, bfloat16 and fp8 go through CUDA's cuda_fp16.h / cuda_bf16.h / cuda_fp8.h conversions).
//
// Without a usable CUDA device (cudaGetDeviceCount fails or finds none) every test prints one "SKIPPED: ..." line and
// exits 77, which ctest reports as skipped.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <plexus.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace gt {

constexpr int kSkipCode = 77;

// ---- Reporting ------------------------------------------------------------------------------------------------

// Prints "SKIPPED: <reason>" and exits 77.
[[noreturn]] void skip(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Prints "FATAL: <reason>" and exits 1 at once (peers that wait for this rank are ended by the watchdog or the
// parent process).
[[noreturn]] void fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Records one failed check and prints it (the first kMaxPrinted of them); the test goes on.
void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
long failures();
// Cases that ran (summed over ranks' processes), for a run whose every case the library declined.
void countRun();
long runCount();
// Ends the test: "PASS <name>" and 0, or "FAIL <name>: N failed checks" and 1.
int finish(const std::string& name);

// What the test is doing now, for the watchdog's message.
void setPhase(const std::string& phase);
// Ends the process with a message naming the phase if it runs longer than seconds (PLEXUS_GPU_TEST_TIMEOUT
// overrides, in seconds).
void startWatchdog(int seconds);
// Prints every thread's stack of this process (cuda-gdb, else gdb, attached for a moment) under a line naming why:
// where a call that should have returned sits. PLEXUS_GPU_TEST_STACKS=0 turns it off; without a debugger it says so.
void dumpStacks(const char* why);

#define GT_CUDA(call)                                                                                       \
  do {                                                                                                      \
    cudaError_t e_ = (call);                                                                                \
    if (e_ != cudaSuccess) ::gt::fatal("%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, cudaGetErrorName(e_), \
                                       cudaGetErrorString(e_));                                             \
  } while (0)
#define GT_NCCL(comm, call)                                                                                  \
  do {                                                                                                       \
    ncclResult_t r_ = (call);                                                                                \
    if (r_ != ncclSuccess) ::gt::fatal("%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, ncclGetErrorString(r_), \
                                       ::gt::lastError(comm));                                               \
  } while (0)
#define GT_CHECK(cond, ...)                                                                  \
  do {                                                                                       \
    if (!(cond)) ::gt::fail("%s:%d: %s: %s", __FILE__, __LINE__, #cond, ::gt::format(__VA_ARGS__).c_str()); \
  } while (0)

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
const char* lastError(ncclComm_t comm);
double nowSeconds();

// ---- Devices --------------------------------------------------------------------------------------------------

// Exits 77 with a reason unless a CUDA device is usable. With inChild the probe runs in a forked child, so that this
// process stays free of CUDA and may still fork ranks.
void requireDevice(bool inChild);
// NCCL_PROTO / NCCL_ALGO as the library sees them (a PLEXUS_ twin wins), "" when unset.
std::string envKnob(const char* name);

// ---- Memory and streams -------------------------------------------------------------------------------------------

// PLEXUS_GPU_TEST_HOST=1: the harness on Plexus's host backend (host memory, host streams, plexusSetDevice per rank),
// which checks the tests' own reference and bookkeeping without a GPU (ctest gpu_harness.*); never set for the gpu
// label.
bool hostMode();
// Allocation and freeing may wait for the whole device (CUDA's implicit synchronisation): with ranks as threads,
// call them only while no rank's collective is in flight (the tests put barriers around them).
void* devAlloc(size_t bytes);
void devFree(void* p);
// Ordered on the rank's stream (so before the collective enqueued next on it), never on the legacy default stream,
// which could wait for another rank's kernel that waits for this rank. toHost returns once the bytes are there.
void devMemset(void* p, int byte, size_t bytes, cudaStream_t s);
void toDevice(void* dst, const void* src, size_t bytes, cudaStream_t s);
void toHost(void* dst, const void* src, size_t bytes, cudaStream_t s);
void streamSync(cudaStream_t s);

// ---- Launch: ranks as one thread's group, as threads, as processes ----------------------------------------------

enum class Mode { Group, Threads, Procs };
Mode parseMode(const std::string& s);
const char* modeName(Mode m);

struct Rank {
  int rank = 0;
  int nranks = 1;
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// One driver runs the ranks it owns: all of them (Group), one per thread (Threads) or one per process (Procs).
struct Driver {
  Mode mode = Mode::Group;
  int nranks = 1;
  std::vector<Rank> ranks;
  // All drivers meet (threads: a shared barrier; processes: a process-shared one; group: nothing to do).
  std::function<void()> barrier;
  bool printer() const { return ranks.front().rank == 0; }
  // Group mode calls ncclGroupStart/End around the ranks' calls; the others call straight through.
  void groupStart() const;
  ncclResult_t groupEnd() const;
};

// Creates nranks communicators on CUDA device 0 (one thread per rank with cudaSetDevice(0) and ncclCommInitRank;
// one thread's ncclGroupStart/ncclCommInitRank.../ncclGroupEnd; or processes forked before any CUDA call, the unique
// id passed through a pipe), each with its own non-blocking stream; runs body in every driver; destroys everything.
// Returns the number of failed checks over all drivers (processes: plus any that did not exit cleanly).
long runTeam(Mode mode, int nranks, int timeoutSeconds, const std::function<void(Driver&)>& body);

// ---- Element types ---------------------------------------------------------------------------------------------

struct TypeInfo {
  ncclDataType_t type;
  const char* name;
  size_t size;
  bool isFloat;
  bool isSigned;
  int mantissaBits;  // significant bits (floats), value bits (integers)
};
const std::vector<TypeInfo>& allTypes();
const TypeInfo& typeInfo(ncclDataType_t t);

// An element as the checker sees it: floats as the double they convert to, integers as their two's complement bits
// sign-extended to 64.
double loadFloat(ncclDataType_t t, const void* p);
void storeFloat(ncclDataType_t t, double v, void* p);  // rounds to nearest even (fp8: saturating)
uint64_t loadInt(ncclDataType_t t, const void* p);
void storeInt(ncclDataType_t t, uint64_t v, void* p);  // keeps the low bits

// ---- Reductions -------------------------------------------------------------------------------------------------

// What a reducing collective combines with: NCCL's ops, plus a PreMulSum made by ncclRedOpCreatePreMulSum with the
// scalar on the host (ncclScalarHostImmediate) or in device memory (ncclScalarDevice).
enum class Op { Sum, Prod, Max, Min, Avg, PreMulHost, PreMulDevice };
const std::vector<Op>& allOps();
const char* opName(Op op);
// The scalar a PreMulSum case multiplies by (as a double; integers take 3).
double preMulScalar(ncclDataType_t t);

// The input a rank holds at index i for one case (seed), chosen per type and op so that every reduction the test
// checks has one right answer: integers without signed overflow (unsigned ones wrap, as NCCL's do), floats exact
// where the arithmetic is exact by construction, else compared within tolerance().
struct Inputs {
  ncclDataType_t type;
  Op op;
  bool reduces;
  int nranks;
  uint64_t seed;
  // Writes element i of rank's input to p (storage of the element type).
  void store(int rank, size_t i, void* p) const;
};

// The expected value of one reduced element and how far a float result may be from it.
struct Expected {
  double f = 0;     // floats
  uint64_t u = 0;   // integers (low bits significant)
  double tol = 0;   // floats: allowed |got - f|
};
// The reduction over all ranks of their inputs at index i.
Expected reduceAt(const Inputs& in, size_t i);
// Whether got (an element of the type) matches e.
bool matches(const Inputs& in, const Expected& e, const void* got);
std::string showElement(ncclDataType_t t, const void* p);
std::string showExpected(const Inputs& in, const Expected& e);

ncclRedOp_t ncclOpOf(Op op);  // the built-in op (not for PreMul*)

// ---- Our own kernels ----------------------------------------------------------------------------------------------

// Sets *started (when not null), then spins until *flag becomes non-zero (both host-mapped memory).
void launchGate(cudaStream_t s, volatile int* flag, volatile int* started);
// out[i] = float(i % 1000) * (rank + 1) + seed, for n floats.
void launchFill(cudaStream_t s, float* out, size_t n, int rank, float seed);
// out[i] = in[i] * 2 + 1.
void launchTwicePlusOne(cudaStream_t s, const float* in, float* out, size_t n);
// Spins for about the given number of device clock cycles.
void launchSpin(cudaStream_t s, long long cycles);

}  // namespace gt
