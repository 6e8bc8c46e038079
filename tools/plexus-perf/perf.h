// plexus-perf: an nccl-tests compatible benchmark for Plexus. Shared declarations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "nccl.h"
#include "plexus.h"

namespace perf {

// ---- Command line -------------------------------------------------------------------------------

struct Options {
  std::string collective;
  size_t minBytes = 32u << 20;
  size_t maxBytes = 32u << 20;
  size_t stepBytes = 1u << 20;
  size_t stepFactor = 1;
  int iters = 20;
  int warmup = 1;
  int aggIters = 1;
  int check = 1;
  int blocking = 0;  // 1: sync + barrier after each launch, 2: sync only (nccl-tests -z)
  int nThreads = 1;
  int nGpus = 1;
  int average = 1;  // 0 rank 0, 1 mean, 2 min, 3 max
  int root = 0;     // -1: every root in turn
  int localRegister = 0;  // -R: 1 ncclMemAlloc + ncclCommRegister, 2 + ncclCommWindowRegister (symmetric)
  int cudaDevice = -1;    // --cuda_device: every CUDA rank of this process on this device; -1: host device % count
  std::vector<ncclDataType_t> types{ncclFloat};
  std::vector<ncclRedOp_t> ops{ncclSum};
};

// Parses argv; prints usage and exits 0 on -h, prints the problem plus usage and exits 2 on bad input.
// `quiet` suppresses all output (non-zero ranks of a multi-process launch) but keeps the exit codes.
Options parseOptions(int argc, char** argv, bool quiet);
void printUsage(FILE* out);

// ---- Data types and values ----------------------------------------------------------------------

size_t typeSize(ncclDataType_t type);
const char* typeName(ncclDataType_t type);
const char* opName(ncclRedOp_t op);
bool parseType(const std::string& s, ncclDataType_t* type);
bool parseOp(const std::string& s, ncclRedOp_t* op);
const std::vector<ncclDataType_t>& allTypes();
const std::vector<ncclRedOp_t>& allOps();

// Deterministic per-(rank, index) input values. Every value, and every reduction of them over the
// communicator, is a small integer that the element type represents exactly, so results can be
// compared bit for bit (except averages of floating-point types, which are compared with a tolerance).
struct Pattern {
  enum Kind { kMod, kOneHot, kPow2 } kind = kMod;
  uint64_t mod = 1;  // kMod: values in [0, mod)
  int maxTwos = 0;   // kPow2: at most this many ranks contribute a 2, the rest a 1
  int nranks = 1;
  uint64_t seed = 0;

  double value(int rank, size_t i) const {
    switch (kind) {
      case kMod: return double((uint64_t(i) * 7 + uint64_t(rank) * 13 + seed) % mod);
      case kOneHot: return (uint64_t(i) + seed) % uint64_t(nranks) == uint64_t(rank) ? 1.0 : 0.0;
      case kPow2: {
        uint64_t twos = (uint64_t(i) + seed) % uint64_t(maxTwos + 1);
        return (uint64_t(i) + uint64_t(rank)) % uint64_t(nranks) < twos ? 2.0 : 1.0;
      }
    }
    return 0;
  }
  uint64_t maxValue() const { return kind == kMod ? mod - 1 : kind == kOneHot ? 1 : 2; }
};

// `reduces`: the collective combines values with `op` (otherwise values only need to be exact).
Pattern makePattern(ncclDataType_t type, ncclRedOp_t op, bool reduces, int nranks, uint64_t seed);

// What the collective's result holds at one element, given the pattern: the helpers build on this.
struct ExpectCtx {
  const Pattern* pattern;
  ncclDataType_t type;
  ncclRedOp_t op;
  int nranks;
  int root;
  size_t chunk;  // the per-rank element count passed to the NCCL call
};

// `op` applied over every rank's value at input index `idx`.
double reduceOverRanks(const ExpectCtx& c, size_t idx);

// buf[i] = pattern.value(rank, i), i in [0, n).
void fillPattern(void* buf, ncclDataType_t type, const Pattern& p, int rank, size_t n);

using ExpectFn = double (*)(const ExpectCtx&, int rank, size_t idx);
// Number of elements of buf[0, n) that differ from expect(ctx, rank, i).
int64_t countWrong(const void* buf, size_t n, const ExpectCtx& ctx, int rank, ExpectFn expect);

// ---- Collectives --------------------------------------------------------------------------------

// Element counts for one benchmark size, as nccl-tests' getCollByteCount.
struct Counts {
  size_t send = 0;               // elements each rank sends
  size_t recv = 0;               // elements each rank receives
  size_t param = 0;              // the count argument of the NCCL call
  size_t sendInplaceOffset = 0;  // in-place: sendbuff = recvbuff + sendInplaceOffset * rank
  size_t recvInplaceOffset = 0;  // in-place: recvbuff = recvbuff + recvInplaceOffset * rank
};

struct RunArgs {
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  int rank;
  int nranks;
  ncclComm_t comm;
  cudaStream_t stream;
};

struct Collective {
  const char* name = nullptr;
  bool reduces = false;    // uses -o; the redop column shows the op, else "none"
  bool rooted = false;     // uses -r; the root column shows the root, else -1
  bool rootOnly = false;   // only the root's receive buffer holds a defined result
  bool noInPlace = false;  // the library refuses in-place (alltoall): the in-place columns read N/A
  bool inPlaceUnchecked = false;  // in-place is timed but its result undefined (sendrecv): #wrong reads N/A
  bool pow2Ranks = false;  // needs a power-of-two rank count
  bool stepwise = false;   // issues dependent groups one after another; -g would merge them into one
  void (*counts)(size_t count, int nranks, Counts* c) = nullptr;
  int (*algScale)(int nranks) = nullptr;  // algbw = count * typesize * algScale / time
  double (*busFactor)(int nranks) = nullptr;
  // Enqueues the collective; on failure returns the error and names the NCCL call in *failedCall.
  ncclResult_t (*run)(const RunArgs& a, const char** failedCall) = nullptr;
  ExpectFn expect = nullptr;  // value of element idx of the receive buffer on `rank`
};

const std::vector<Collective>& collectives();
// Set by a Collective::run that failed without calling the library (an entry point it lacks).
extern thread_local const char* runDetail;
const Collective* findCollective(const std::string& name);

}  // namespace perf
