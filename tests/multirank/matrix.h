// The correctness matrix: every collective x datatype x operator x in/out of place x root x size
// class (0, 1, odd, chunk boundary -1/0/+1, several chunks) x protocol (Simple, LL, LL128), ranks as threads
// or processes. Data driven: a Plan selects the types, operators and sizes; cases() expands it for
// one collective, runRank() runs the cases on one rank and checks every element against check.h's
// host references, the guard zones after every buffer, the inputs that must not change, and that the
// planner chose the protocol and chunk the size classes were derived from.
//
// The full matrix is tests/full/test_matrix.cc (ctest -L full); a sample runs in the default suite
// (tests/multirank/test_matrix_sample.cc).
#pragma once

#include <nccl.h>
#include <plexus.h>
#include <plexus/device/p2p.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "check.h"
#include "harness.h"

namespace matrix {

using check::typeSize;

// ---- the dimensions ----

enum class Coll { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter, SendRecv };
constexpr Coll kAllColls[] = {Coll::AllReduce, Coll::Broadcast, Coll::Reduce,  Coll::AllGather, Coll::ReduceScatter,
                              Coll::AlltoAll,  Coll::Gather,    Coll::Scatter, Coll::SendRecv};

inline const char* collName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "AllReduce";
    case Coll::Broadcast: return "Broadcast";
    case Coll::Reduce: return "Reduce";
    case Coll::AllGather: return "AllGather";
    case Coll::ReduceScatter: return "ReduceScatter";
    case Coll::AlltoAll: return "AlltoAll";
    case Coll::Gather: return "Gather";
    case Coll::Scatter: return "Scatter";
    case Coll::SendRecv: return "SendRecv";
  }
  return "?";
}
inline bool reduces(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }
// Point-to-point underneath (grouped ncclSend/ncclRecv): always the Simple protocol, one slot per slice.
inline bool isP2p(Coll c) {
  return c == Coll::AlltoAll || c == Coll::Gather || c == Coll::Scatter || c == Coll::SendRecv;
}
// Collectives run once per root. SendRecv's "root" is a shift: rank r sends to r + shift and receives
// from r - shift (shift 0: to itself).
inline bool hasRoot(Coll c) {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter || c == Coll::SendRecv;
}
// Every collective but send/recv has an in-place form in NCCL. AlltoAll's is refused by Plexus with
// ncclInvalidArgument, and the matrix checks exactly that.
inline bool hasInPlace(Coll c) { return c != Coll::SendRecv; }

enum class Op { Sum, Prod, Max, Min, Avg, PreMulSumHost, PreMulSumDevice };
constexpr Op kAllOps[] = {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Avg, Op::PreMulSumHost, Op::PreMulSumDevice};

inline const char* opName(Op o) {
  switch (o) {
    case Op::Sum: return "Sum";
    case Op::Prod: return "Prod";
    case Op::Max: return "Max";
    case Op::Min: return "Min";
    case Op::Avg: return "Avg";
    case Op::PreMulSumHost: return "PreMulSum(host-immediate scalar)";
    case Op::PreMulSumDevice: return "PreMulSum(in-memory scalar)";
  }
  return "?";
}
inline bool isPreMulSum(Op o) { return o == Op::PreMulSumHost || o == Op::PreMulSumDevice; }
// The built-in operator whose check::fill() inputs a case uses (PreMulSum: Sum's).
inline ncclRedOp_t inputOp(Op o) {
  switch (o) {
    case Op::Prod: return ncclProd;
    case Op::Max: return ncclMax;
    case Op::Min: return ncclMin;
    case Op::Avg: return ncclAvg;
    default: return ncclSum;
  }
}
// PreMulSum's factor: 3, or 2 for fp8, where 2 keeps every product and partial sum of check's 0/1
// inputs exact (e5m2 cannot hold 9).
inline int preMulScalar(ncclDataType_t t) { return t == ncclFloat8e4m3 || t == ncclFloat8e5m2 ? 2 : 3; }

constexpr ncclDataType_t kAllTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,     ncclInt64,
                                        ncclUint64,  ncclFloat16, ncclFloat32, ncclFloat64,    ncclBfloat16,
                                        ncclFloat8e4m3, ncclFloat8e5m2};
inline const char* typeName(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "float16";
    case ncclFloat32: return "float32";
    case ncclFloat64: return "float64";
    case ncclBfloat16: return "bfloat16";
    case ncclFloat8e4m3: return "float8e4m3";
    case ncclFloat8e5m2: return "float8e5m2";
    default: return "?";
  }
}

// ---- protocol, buffer size and the chunk boundaries derived from them ----

// What the communicators of a run were created with: NCCL_PROTO, NCCL_BUFFSIZE and
// NCCL_MIN_NCHANNELS, read from the environment as communicator creation reads them (runOne sets
// them, and clears their PLEXUS_ twins, which would win).
struct Setup {
  int proto = PLEXUS_PROTO_SIMPLE;
  size_t buffSize = 4 << 20;
  int channels = 0;  // NCCL_MIN_NCHANNELS (with PLEXUS_MIN_CHANNEL_BYTES small): 0 = the default
  bool tree = false;  // NCCL_ALGO=tree: AllReduce's pipeline steps are single chunks
  // NCCL_ALGO unset, one node, a core per rank's channel: AlltoAll may run as one collective (algo-direct)
  bool directAlltoAll = true;
};
// AlltoAll runs as one collective (algo-direct) where the planner chooses and its blocks are below the size from which
// sends and receives go zero-copy; as grouped sends and receives elsewhere.
inline bool alltoAllDirect(const Setup& s, size_t blockBytes) {
  return s.directAlltoAll && blockBytes < PLEXUS_P2P_ZERO_COPY_MIN_BYTES;
}
// Whether coll's size classes follow point-to-point's slots: AlltoAll's follow the collective's where it may be one.
inline bool sizedAsP2p(Coll c, const Setup& s) { return isP2p(c) && !(c == Coll::AlltoAll && s.directAlltoAll); }
inline Setup currentSetup(ncclComm_t comm, int nranks) {
  Setup s;
  const char* proto = getenv("NCCL_PROTO");
  const char* buff = getenv("NCCL_BUFFSIZE");
  const char* channels = getenv("NCCL_MIN_NCHANNELS");
  s.proto = proto && strcmp(proto, "LL") == 0       ? PLEXUS_PROTO_LL
            : proto && strcmp(proto, "LL128") == 0 ? PLEXUS_PROTO_LL128
                                                   : PLEXUS_PROTO_SIMPLE;
  if (buff) s.buffSize = (size_t)strtoull(buff, nullptr, 10);
  s.buffSize &= ~(size_t)(4096 * PLEXUS_STEPS - 1);  // init rounds it to page-aligned slots
  if (channels) s.channels = atoi(channels);
  const char* algo = getenv("NCCL_ALGO");
  s.tree = algo && strcmp(algo, "tree") == 0;
  // runProcesses' nodes name themselves plexus-test-node<k>; algo-direct serves one node only.
  const char* host = getenv("PLEXUS_HOSTID");
  // Where the node's ranks (each with its channels) outnumber its cores, AlltoAll stays sends and receives.
  s.directAlltoAll =
      !algo && !(host && strncmp(host, "plexus-test-node", 16) == 0) && !harness::coreUse(comm, nranks).shared;
  return s;
}
inline const char* protoName(const Setup& s) {
  return s.proto == PLEXUS_PROTO_LL ? "LL" : s.proto == PLEXUS_PROTO_LL128 ? "LL128" : "Simple";
}

// Bytes per pipeline chunk the planner gives coll: Simple: two of the PLEXUS_STEPS slots of
// NCCL_BUFFSIZE; LL: one slot of PLEXUS_LL_SLOT_LINES lines of 8 payload bytes; LL128: one step of
// lines of 120 payload bytes, PLEXUS_LL128_SLOT_LINES or as many as a Simple slot holds (64 with the
// matrix's NCCL_BUFFSIZE); point-to-point (Simple whatever NCCL_PROTO says, LL up to 64 B): one slot.
inline size_t chunkBytes(Coll c, const Setup& s) {
  const size_t step = s.buffSize / PLEXUS_STEPS;
  if (sizedAsP2p(c, s)) return step;
  if (s.proto == PLEXUS_PROTO_LL) return (size_t)PLEXUS_LL_SLOT_LINES * 8;
  if (s.proto == PLEXUS_PROTO_LL128) return std::min<size_t>(PLEXUS_LL128_SLOT_LINES, step / 128) * 120;
  return step * 2;
}
// Chunks a connector holds before its slots wrap around (LL: the LL slots runOne sets, PLEXUS_LL_HOST_SLOTS).
inline size_t chunksPerConnector(Coll c, const Setup& s) {
  if (!sizedAsP2p(c, s) && s.proto == PLEXUS_PROTO_LL) return PLEXUS_LL_HOST_SLOTS;
  return sizedAsP2p(c, s) || s.proto != PLEXUS_PROTO_SIMPLE ? PLEXUS_STEPS : PLEXUS_STEPS / 2;
}
// Count at which a new pipeline step begins: the chunk in elements, or for AllReduce on the ring
// (whose loop covers nranks chunks) nranks of them. The per-rank count for AllGather, ReduceScatter, AlltoAll,
// Gather and Scatter, whose blocks are chunked one by one.
inline size_t boundaryCount(Coll c, ncclDataType_t t, const Setup& s, int nranks) {
  const size_t elems = std::max<size_t>(chunkBytes(c, s) / typeSize(t), 1);
  return c == Coll::AllReduce && !s.tree ? elems * (size_t)nranks : elems;
}

enum class Size { Zero, One, Odd, BoundaryMinus1, Boundary, BoundaryPlus1, MultiChunk };
constexpr Size kAllSizes[] = {Size::Zero,     Size::One,           Size::Odd,       Size::BoundaryMinus1,
                              Size::Boundary, Size::BoundaryPlus1, Size::MultiChunk};
inline const char* sizeName(Size z) {
  switch (z) {
    case Size::Zero: return "zero";
    case Size::One: return "one";
    case Size::Odd: return "odd";
    case Size::BoundaryMinus1: return "chunk boundary-1";
    case Size::Boundary: return "chunk boundary";
    case Size::BoundaryPlus1: return "chunk boundary+1";
    case Size::MultiChunk: return "multi-chunk (slots wrap)";
  }
  return "?";
}
inline size_t sizeCount(Size z, Coll c, ncclDataType_t t, const Setup& s, int nranks) {
  const size_t b = boundaryCount(c, t, s, nranks);
  switch (z) {
    case Size::Zero: return 0;
    case Size::One: return 1;
    case Size::Odd: return 37;  // below every chunk; not a whole number of 8-byte LL lines for int8
    case Size::BoundaryMinus1: return b - 1;
    case Size::Boundary: return b;
    case Size::BoundaryPlus1: return b + 1;
    case Size::MultiChunk: return (chunksPerConnector(c, s) + 1) * b + 3;  // every slot, then a wrap, then a tail
  }
  return 0;
}

// ---- plans and cases ----

// Which part of the matrix to run. Empty vectors: every type, operator, size.
struct Plan {
  std::vector<ncclDataType_t> types;
  std::vector<Op> ops;
  std::vector<Size> sizes;
  bool everyRoot = true;  // false: roots 0 and nranks - 1 only
};

struct Case {
  Coll coll;
  ncclDataType_t type;
  Op op;  // Sum where the collective does not reduce
  int root;  // -1 where it has none
  Size size;
  size_t count;
  bool inPlace;
};

template <typename T, size_t N> std::vector<T> orAll(const std::vector<T>& v, const T (&all)[N]) {
  return v.empty() ? std::vector<T>(all, all + N) : v;
}

// Every case of plan for coll on nranks ranks, in the same order on every rank.
inline std::vector<Case> cases(Coll c, int nranks, const Setup& s, const Plan& plan) {
  std::vector<Case> out;
  std::vector<int> roots{-1};
  if (hasRoot(c)) {
    roots.clear();
    for (int r = 0; r < nranks; r++)
      if (plan.everyRoot || r == 0 || r == nranks - 1) roots.push_back(r);
  }
  const std::vector<Op> ops = reduces(c) ? orAll(plan.ops, kAllOps) : std::vector<Op>{Op::Sum};
  for (ncclDataType_t t : orAll(plan.types, kAllTypes))
    for (Op op : ops)
      for (Size z : orAll(plan.sizes, kAllSizes)) {
        const size_t count = sizeCount(z, c, t, s, nranks);
        for (bool inPlace : {false, true}) {
          if (inPlace && !hasInPlace(c)) continue;
          if (inPlace && c == Coll::AlltoAll && count == 0) continue;  // nothing to refuse
          for (int root : roots) out.push_back(Case{c, t, op, root, z, count, inPlace});
        }
      }
  return out;
}

// ---- one case on one rank ----

constexpr size_t kGuardBytes = 64;
constexpr unsigned char kGuard = 0x5A, kUnwritten = 0xEE;

// A host buffer of `bytes` (initialized to init) and a guard zone after it that nothing may write.
struct Buf {
  std::vector<unsigned char> v;
  size_t bytes;
  Buf(size_t n, unsigned char init) : v(n + kGuardBytes, init), bytes(n) {
    std::fill(v.begin() + (ptrdiff_t)n, v.end(), kGuard);
  }
  unsigned char* data() { return v.data(); }
  unsigned char* at(size_t off) { return v.data() + off; }
  size_t guardWrong() const {
    size_t w = 0;
    for (size_t j = bytes; j < v.size(); j++) w += v[j] != kGuard;
    return w;
  }
};

inline size_t bytesNot(const unsigned char* p, size_t n, unsigned char value) {
  size_t w = 0;
  for (size_t j = 0; j < n; j++) w += p[j] != value;
  return w;
}
inline size_t bytesDiffer(const unsigned char* a, const unsigned char* b, size_t n) {
  size_t w = 0;
  for (size_t j = 0; j < n; j++) w += a[j] != b[j];
  return w;
}

// What one case got wrong on one rank.
struct Wrong {
  size_t output = 0;  // elements (reductions) or bytes (data that only moves) of the result
  size_t input = 0;   // bytes of inputs, or of buffers nobody may write, that changed
  size_t guard = 0;   // bytes written past the end of a buffer
  long calls = 0;     // calls that returned something else than expected
  long plan = 0;      // a protocol, chunk or channel choice other than the one the size classes assume
  std::string why;    // the first failed call or wrong choice
  std::string algo;   // the algorithm the planner chose (for the report)
  size_t total() const { return output + input + guard + (size_t)calls + (size_t)plan; }
};

struct RankCtx {
  int rank, nranks;
  ncclComm_t comm;
  cudaStream_t stream;
  Setup setup;
  const char* mode;  // "threads" or "processes"
};

inline std::string describe(const Case& k, const RankCtx& x) {
  char root[16] = "-";
  if (k.root >= 0) snprintf(root, sizeof root, "%d", k.root);
  char buf[512];
  char channels[32] = "";
  if (x.setup.channels) snprintf(channels, sizeof channels, " channels=%d", x.setup.channels);
  snprintf(buf, sizeof buf, "%s type=%s op=%s %s=%s count=%zu (%s) %s proto=%s%s nranks=%d (%s)", collName(k.coll),
           typeName(k.type), reduces(k.coll) ? opName(k.op) : "-", k.coll == Coll::SendRecv ? "shift" : "root", root,
           k.count, sizeName(k.size), k.inPlace ? "in-place" : "out-of-place", protoName(x.setup), channels, x.nranks,
           x.mode);
  return buf;
}

#define MATRIX_CALL(w, call)                                                                              \
  do {                                                                                                    \
    ncclResult_t r_ = (call);                                                                             \
    if (r_ != ncclSuccess) {                                                                              \
      (w).calls++;                                                                                        \
      if ((w).why.empty()) (w).why = std::string(#call) + " -> " + ncclGetErrorString(r_) + " (" +          \
                                     ncclGetLastError(x.comm) + ")";                                      \
      return;                                                                                             \
    }                                                                                                     \
  } while (0)

// The reduction operator of a case, created on the communicator where it is a PreMulSum (and destroyed
// with this object). The host-immediate scalar is overwritten right after creation, so the library must
// have copied it; the in-memory scalar is written only after creation, so it must be read when the
// collective runs.
struct CaseOp {
  ncclRedOp_t op = ncclSum;
  ncclComm_t comm = nullptr;
  alignas(8) unsigned char hostScalar[8] = {}, memScalar[8] = {};
  ncclResult_t create(const Case& k, ncclComm_t c) {
    switch (k.op) {
      case Op::Sum: op = ncclSum; return ncclSuccess;
      case Op::Prod: op = ncclProd; return ncclSuccess;
      case Op::Max: op = ncclMax; return ncclSuccess;
      case Op::Min: op = ncclMin; return ncclSuccess;
      case Op::Avg: op = ncclAvg; return ncclSuccess;
      default: break;
    }
    auto scalarBits = [&](unsigned char* dst) {
      check::withType(k.type, [&](auto t) {
        auto v = check::fromInt<decltype(t)>(preMulScalar(k.type));
        memcpy(dst, &v, sizeof v);
        return 0;
      });
    };
    ncclResult_t r;
    if (k.op == Op::PreMulSumHost) {
      scalarBits(hostScalar);
      r = ncclRedOpCreatePreMulSum(&op, hostScalar, k.type, ncclScalarHostImmediate, c);
      memset(hostScalar, 0, sizeof hostScalar);
    } else {
      r = ncclRedOpCreatePreMulSum(&op, memScalar, k.type, ncclScalarDevice, c);
      scalarBits(memScalar);
    }
    if (r == ncclSuccess) comm = c;
    return r;
  }
  ~CaseOp() {
    if (comm) ncclRedOpDestroy(op, comm);
  }
};

// Wrong elements of count reduced elements whose inputs sit at fill() indices first .. first+count-1.
inline size_t verifyReducedCase(const Case& k, const void* buf, size_t count, int nranks, size_t first) {
  return check::withType(k.type, [&](auto t) -> size_t {
    using T = decltype(t);
    if (isPreMulSum(k.op))
      return check::verifyPreMulSum<T>(buf, count, check::fromInt<T>(preMulScalar(k.type)), nranks, first);
    return check::verifyReduced<T>(buf, count, inputOp(k.op), nranks, first);
  });
}
// Bytes of buf (count elements) that differ from this rank's fill() input.
inline size_t changedInput(const Case& k, const unsigned char* buf, size_t count, int rank) {
  std::vector<unsigned char> expect(count * typeSize(k.type) + 1);
  check::withType(k.type, [&](auto t) {
    check::fill<decltype(t)>(expect.data(), count, inputOp(k.op), rank);
    return 0;
  });
  return bytesDiffer(buf, expect.data(), count * typeSize(k.type));
}
inline void fillInput(const Case& k, unsigned char* buf, size_t count, int rank) {
  check::withType(k.type, [&](auto t) {
    check::fill<decltype(t)>(buf, count, inputOp(k.op), rank);
    return 0;
  });
}

// Runs case k on this rank: buffers, call, synchronize, then every check.
inline void runCase(const RankCtx& x, const Case& k, Wrong& w) {
  const int rank = x.rank, n = x.nranks;
  const size_t count = k.count, bytes = count * typeSize(k.type), all = bytes * (size_t)n;
  const bool isRoot = rank == k.root;
  CaseOp op;
  if (reduces(k.coll)) MATRIX_CALL(w, op.create(k, x.comm));
  bool expectRefusal = false;
  auto sync = [&]() -> ncclResult_t { return plexusStreamSynchronize(x.stream); };

  switch (k.coll) {
    case Coll::AllReduce: {
      Buf send(bytes, 0), recv(bytes, kUnwritten);
      fillInput(k, send.data(), count, rank);
      void* out = k.inPlace ? send.data() : recv.data();
      MATRIX_CALL(w, ncclAllReduce(send.data(), out, count, k.type, op.op, x.comm, x.stream));
      MATRIX_CALL(w, sync());
      w.output += verifyReducedCase(k, out, count, n, 0);
      if (!k.inPlace) w.input += changedInput(k, send.data(), count, rank);
      w.guard += send.guardWrong() + recv.guardWrong();
      break;
    }
    case Coll::Broadcast: {
      // In place through ncclBcast; out of place, non-root ranks pass no sendbuff.
      Buf send(bytes, kUnwritten), recv(bytes, kUnwritten);
      if (isRoot) check::fillPattern(k.inPlace ? recv.data() : send.data(), bytes, k.root);
      if (k.inPlace) MATRIX_CALL(w, ncclBcast(recv.data(), count, k.type, k.root, x.comm, x.stream));
      else
        MATRIX_CALL(w, ncclBroadcast(isRoot ? send.data() : nullptr, recv.data(), count, k.type, k.root, x.comm,
                                     x.stream));
      MATRIX_CALL(w, sync());
      w.output += check::verifyBroadcast(recv.data(), bytes, k.root);
      if (!k.inPlace)
        w.input += isRoot ? check::verifyPattern(send.data(), bytes, k.root) : bytesNot(send.data(), bytes, kUnwritten);
      w.guard += send.guardWrong() + recv.guardWrong();
      break;
    }
    case Coll::Reduce: {
      // Out of place, non-root ranks pass no recvbuff; in place they pass their sendbuff, which must
      // stay as it was.
      Buf send(bytes, 0), recv(bytes, kUnwritten);
      fillInput(k, send.data(), count, rank);
      void* out = k.inPlace ? send.data() : isRoot ? recv.data() : nullptr;
      MATRIX_CALL(w, ncclReduce(send.data(), out, count, k.type, op.op, k.root, x.comm, x.stream));
      MATRIX_CALL(w, sync());
      if (isRoot) w.output += verifyReducedCase(k, out, count, n, 0);
      if (!isRoot || !k.inPlace) w.input += changedInput(k, send.data(), count, rank);
      if (!isRoot && !k.inPlace) w.input += bytesNot(recv.data(), bytes, kUnwritten);
      w.guard += send.guardWrong() + recv.guardWrong();
      break;
    }
    case Coll::AllGather: {
      // In place: sendbuff is this rank's block of recvbuff.
      Buf send(bytes, 0), recv(all, kUnwritten);
      unsigned char* in = k.inPlace ? recv.at((size_t)rank * bytes) : send.data();
      check::fillPattern(in, bytes, rank);
      MATRIX_CALL(w, ncclAllGather(in, recv.data(), count, k.type, x.comm, x.stream));
      MATRIX_CALL(w, sync());
      w.output += check::verifyAllGather(recv.data(), bytes, n);
      if (!k.inPlace) w.input += check::verifyPattern(send.data(), bytes, rank);
      w.guard += send.guardWrong() + recv.guardWrong();
      break;
    }
    case Coll::ReduceScatter: {
      // In place: recvbuff is this rank's block of sendbuff; the other blocks must stay as they were.
      Buf send(all, 0), recv(bytes, kUnwritten);
      fillInput(k, send.data(), count * n, rank);
      unsigned char* out = k.inPlace ? send.at((size_t)rank * bytes) : recv.data();
      MATRIX_CALL(w, ncclReduceScatter(send.data(), out, count, k.type, op.op, x.comm, x.stream));
      MATRIX_CALL(w, sync());
      w.output += verifyReducedCase(k, out, count, n, (size_t)rank * count);
      if (!k.inPlace) {
        w.input += changedInput(k, send.data(), count * n, rank);
      } else {
        std::vector<unsigned char> expect(all + 1);
        fillInput(k, expect.data(), count * n, rank);
        for (int b = 0; b < n; b++)
          if (b != rank) w.input += bytesDiffer(send.at((size_t)b * bytes), expect.data() + (size_t)b * bytes, bytes);
      }
      w.guard += send.guardWrong() + recv.guardWrong();
      break;
    }
    case Coll::AlltoAll: {
      // Block p of this rank's sendbuff goes to rank p: pattern(rank) at offsets p * bytes ...
      Buf send(all, 0), recv(all, kUnwritten);
      check::fillPattern(send.data(), all, rank);
      if (k.inPlace) {
        expectRefusal = true;
        ncclResult_t r = ncclAlltoAll(send.data(), send.data(), count, k.type, x.comm, x.stream);
        if (r != ncclInvalidArgument) {
          w.calls++;
          w.why = std::string("in-place ncclAlltoAll -> ") + ncclGetErrorString(r) + ", expected ncclInvalidArgument";
        }
        MATRIX_CALL(w, sync());  // nothing was launched: nothing to fail
        w.input += check::verifyPattern(send.data(), all, rank);
      } else {
        MATRIX_CALL(w, ncclAlltoAll(send.data(), recv.data(), count, k.type, x.comm, x.stream));
        MATRIX_CALL(w, sync());
        for (int p = 0; p < n; p++)
          w.output += check::verifyPattern(recv.at((size_t)p * bytes), bytes, p, (size_t)rank * bytes);
        w.input += check::verifyPattern(send.data(), all, rank);
      }
      w.guard += send.guardWrong() + recv.guardWrong();
      break;
    }
    case Coll::Gather: {
      // In place: sendbuff is this rank's block of recvbuff, on every rank (non-root ranks' recvbuff
      // is not used: its other blocks must stay unwritten). Out of place, non-root ranks pass no recvbuff.
      Buf send(bytes, 0), recv(all, kUnwritten);
      unsigned char* in = k.inPlace ? recv.at((size_t)rank * bytes) : send.data();
      check::fillPattern(in, bytes, rank);
      void* out = k.inPlace || isRoot ? recv.data() : nullptr;
      MATRIX_CALL(w, ncclGather(in, out, count, k.type, k.root, x.comm, x.stream));
      MATRIX_CALL(w, sync());
      if (isRoot) {
        w.output += check::verifyAllGather(recv.data(), bytes, n);
      } else {
        for (int b = 0; b < n; b++)
          if (!(k.inPlace && b == rank)) w.input += bytesNot(recv.at((size_t)b * bytes), bytes, kUnwritten);
      }
      if (!isRoot || !k.inPlace) w.input += check::verifyPattern(in, bytes, rank);
      w.guard += send.guardWrong() + recv.guardWrong();
      break;
    }
    case Coll::Scatter: {
      // Root's sendbuff holds pattern(root); rank p receives its block p. In place: recvbuff is this
      // rank's block of sendbuff on every rank (non-root ranks' sendbuff is not read: its other blocks
      // must stay unwritten). Out of place, non-root ranks pass no sendbuff.
      Buf send(all, kUnwritten), recv(bytes, kUnwritten);
      if (isRoot) check::fillPattern(send.data(), all, k.root);
      unsigned char* out = k.inPlace ? send.at((size_t)rank * bytes) : recv.data();
      const void* in = k.inPlace || isRoot ? send.data() : nullptr;
      MATRIX_CALL(w, ncclScatter(in, out, count, k.type, k.root, x.comm, x.stream));
      MATRIX_CALL(w, sync());
      w.output += check::verifyPattern(out, bytes, k.root, (size_t)rank * bytes);
      if (isRoot) {
        w.input += check::verifyPattern(send.data(), all, k.root);
      } else {
        for (int b = 0; b < n; b++)
          if (!(k.inPlace && b == rank)) w.input += bytesNot(send.at((size_t)b * bytes), bytes, kUnwritten);
      }
      w.guard += send.guardWrong() + recv.guardWrong();
      break;
    }
    case Coll::SendRecv: {
      // One group: send to rank + shift, receive from rank - shift (even ranks post the send first).
      const int to = (rank + k.root) % n, from = (rank + n - k.root) % n;
      Buf send(bytes, 0), recv(bytes, kUnwritten);
      check::fillPattern(send.data(), bytes, rank);
      MATRIX_CALL(w, ncclGroupStart());
      ncclResult_t r1, r2;
      if (rank % 2 == 0) {
        r1 = ncclSend(send.data(), count, k.type, to, x.comm, x.stream);
        r2 = ncclRecv(recv.data(), count, k.type, from, x.comm, x.stream);
      } else {
        r2 = ncclRecv(recv.data(), count, k.type, from, x.comm, x.stream);
        r1 = ncclSend(send.data(), count, k.type, to, x.comm, x.stream);
      }
      ncclResult_t r3 = ncclGroupEnd();
      MATRIX_CALL(w, r1);
      MATRIX_CALL(w, r2);
      MATRIX_CALL(w, r3);
      MATRIX_CALL(w, sync());
      w.output += check::verifyPattern(recv.data(), bytes, from);
      w.input += check::verifyPattern(send.data(), bytes, rank);
      w.guard += send.guardWrong() + recv.guardWrong();
      break;
    }
  }

  // The planner chose what the size classes were derived from (a collective of count 0 plans nothing).
  if (count > 0 && !expectRefusal) {
    plexusDecision_t d;
    MATRIX_CALL(w, plexusCommLastDecision(x.comm, &d));
    w.algo = d.algorithm;
    // A collective the tuner gave to algo-p2p (a large AllGather, a two-rank Broadcast) runs as sends and receives;
    // a small AlltoAll as one collective.
    const bool direct = k.coll == Coll::AlltoAll && alltoAllDirect(x.setup, bytes);
    const bool asP2p = (isP2p(k.coll) && !direct) || w.algo == "p2p";
    if (k.coll == Coll::AlltoAll && (w.algo == "direct") != direct) {
      w.plan++;
      if (w.why.empty())
        w.why = "AlltoAll of " + std::to_string(bytes) + " B blocks ran on " + w.algo + "; the matrix assumes " +
                (direct ? "direct" : "p2p");
    }
    // Sends and receives of up to NCCL_P2P_LL_THRESHOLD bytes (64 by default) are LL, whatever NCCL_PROTO says.
    const char* proto = !asP2p ? protoName(x.setup) : bytes <= 64 ? "LL" : "Simple";
    const size_t chunk = asP2p ? x.setup.buffSize / PLEXUS_STEPS : chunkBytes(k.coll, x.setup);
    // With several channels, ring and tree split a multi-chunk collective over all of them.
    const int channels = x.setup.channels && k.size == Size::MultiChunk && !asP2p && w.algo != "direct" && n > 1
                             ? x.setup.channels
                             : d.nChannels;
    if (std::string(d.protocol) != proto || d.chunkBytes != chunk || d.nChannels != channels) {
      w.plan++;
      char msg[200];
      snprintf(msg, sizeof msg, "planned %s with chunk %zu B on %d channel(s); the matrix assumes %s with chunk %zu B "
               "on %d", d.protocol, d.chunkBytes, d.nChannels, proto, chunk, channels);
      if (w.why.empty()) w.why = msg;
    }
  }
}
#undef MATRIX_CALL

// Runs every case of plan for coll on this rank. Stops at the first failed call (the other ranks
// then fail theirs when PLEXUS_TIMEOUT runs out, rather than all waiting forever). Returns the
// number of problems.
inline long runRank(Coll c, const Plan& plan, const char* mode, int rank, int nranks, ncclComm_t comm,
                    cudaStream_t stream) {
  RankCtx x{rank, nranks, comm, stream, currentSetup(comm, nranks), mode};
  constexpr int kMaxReports = 20;
  int reports = 0;
  long bad = 0, badCases = 0;
  const std::vector<Case> all = cases(c, nranks, x.setup, plan);
  for (const Case& k : all) {
    Wrong w;
    runCase(x, k, w);
    if (w.total() == 0) continue;
    bad += (long)w.total();
    badCases++;
    if (reports++ < kMaxReports)
      fprintf(stderr,
              "matrix FAILED: %s%s%s, rank %d: %zu wrong output %s, %zu changed input/unwritten bytes, %zu guard "
              "bytes overwritten, %ld failed call(s), %ld wrong plan(s)%s%s\n",
              describe(k, x).c_str(), w.algo.empty() ? "" : " algo=", w.algo.c_str(), rank, w.output,
              reduces(c) ? "elements" : "bytes", w.input, w.guard, w.calls, w.plan, w.why.empty() ? "" : ": ",
              w.why.c_str());
    if (w.calls) {
      fprintf(stderr, "matrix: rank %d stops after a failed call; %zu case(s) not run\n", rank,
              all.size() - (size_t)(&k - all.data()) - 1);
      break;
    }
  }
  if (badCases)
    fprintf(stderr, "matrix: %s on %d ranks (%s, %s), rank %d: %ld of %zu case(s) failed\n", collName(c), nranks, mode,
            protoName(x.setup), rank, badCases, all.size());
  return bad;
}

// ---- launching ----

// Sets (or, with nullptr, unsets) environment variables for its lifetime, then restores them.
class ScopedEnv {
 public:
  void set(const char* name, const char* value) {
    const char* old = getenv(name);
    saved_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) setenv(it->first.c_str(), it->second->c_str(), 1);
      else unsetenv(it->first.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// NCCL_BUFFSIZE of the matrix: 64 KiB, so Simple chunks are 16 KiB and the multi-chunk class stays
// small.
constexpr const char* kBuffSize = "65536";
// NCCL_LL_BUFFSIZE of the matrix: PLEXUS_LL_HOST_SLOTS slots of 4 KiB.
constexpr const char* kLLBuffSize = "262144";
static_assert(PLEXUS_LL_HOST_SLOTS * PLEXUS_LL_SLOT_BYTES == 262144);

struct Launch {
  bool processes;
  int nranks;
  int channels = 0;  // > 0: NCCL_MIN_NCHANNELS=channels and PLEXUS_MIN_CHANNEL_BYTES=4096, so that
                     // collectives beyond a few KiB are split over that many channels
  const char* algo = nullptr;  // NCCL_ALGO (nullptr: the planner's choice)
  int ranksPerNode = 0;        // processes: > 0 makes nodes of that many ranks (the net transport between them)
};

inline std::string scenarioName(const std::string& prefix, Coll c) { return prefix + collName(c); }

// Registers one process scenario per collective (prefix + name) that runs plan; call at static
// initialization of the test file (the children are this binary again).
inline bool registerScenarios(const std::string& prefix, const Plan* plan) {
  for (Coll c : kAllColls)
    harness::registerScenario(scenarioName(prefix, c),
                              [c, plan](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
                                return runRank(c, *plan, "processes", rank, nranks, comm, stream);
                              });
  return true;
}

// Cases a run of coll under plan makes on nranks (for the log).
inline size_t caseCount(Coll c, const Plan& plan, const char* proto, int nranks) {
  Setup s;
  s.proto = strcmp(proto, "LL") == 0 ? PLEXUS_PROTO_LL : strcmp(proto, "LL128") == 0 ? PLEXUS_PROTO_LL128 : PLEXUS_PROTO_SIMPLE;
  s.buffSize = (size_t)atoi(kBuffSize);
  return cases(c, nranks, s, plan).size();
}

// One run of the matrix for coll: plan on one launch under one protocol ("Simple", "LL" or "LL128"). Returns
// the number of problems (or failed processes).
inline long runOne(Coll c, const Plan& plan, const std::string& scenarioPrefix, const char* proto, Launch l) {
  ScopedEnv env;
  env.set("NCCL_PROTO", proto);
  env.set("NCCL_BUFFSIZE", kBuffSize);
  env.set("PLEXUS_PROTO", nullptr);  // the PLEXUS_ twins would win
  env.set("PLEXUS_BUFFSIZE", nullptr);
  // 64 LL slots on every launch, those whose ranks outnumber the cores too (1024 by default there): the multi-chunk
  // class wraps them at a 16th of the cost.
  env.set("NCCL_LL_BUFFSIZE", kLLBuffSize);
  env.set("PLEXUS_LL_BUFFSIZE", nullptr);
  env.set("PLEXUS_ALGO", nullptr);
  env.set("NCCL_ALGO", l.algo);
  const std::string channels = std::to_string(l.channels);
  env.set("NCCL_MIN_NCHANNELS", l.channels ? channels.c_str() : nullptr);
  env.set("PLEXUS_MIN_NCHANNELS", nullptr);
  env.set("PLEXUS_MIN_CHANNEL_BYTES", l.channels ? "4096" : nullptr);
  env.set("NCCL_MIN_CHANNEL_BYTES", nullptr);
  // A hang becomes ncclTimeout on the waiting ranks instead of a test that never ends.
  if (!getenv("PLEXUS_TIMEOUT") && !getenv("NCCL_TIMEOUT")) env.set("PLEXUS_TIMEOUT", "120");
  auto t0 = std::chrono::steady_clock::now();
  auto body = [&](int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
    return runRank(c, plan, "threads", rank, nranks, comm, stream);
  };
  long bad = l.processes ? harness::runProcesses(scenarioName(scenarioPrefix, c), l.nranks, 1200, l.ranksPerNode)
                         : harness::runThreads(l.nranks, body);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string nodes = l.ranksPerNode ? " in nodes of " + std::to_string(l.ranksPerNode) : "";
  fprintf(stderr, "matrix: %-13s %-6s %d ranks as %-9s%s%s%s%s %5zu cases %6.1f s%s\n", collName(c), proto, l.nranks,
          l.processes ? "processes" : "threads", nodes.c_str(), l.channels ? (" " + channels + " channels").c_str() : "",
          l.algo ? " NCCL_ALGO=" : "", l.algo ? l.algo : "", caseCount(c, plan, proto, l.nranks),
          secs, bad ? "  FAILED" : "");
  return bad;
}

}  // namespace matrix
