// Every collective x 12 types x every op (sum, prod, max, min, avg, PreMulSum with the scalar on the host and on the
// device) x in and out of place, on device buffers and CUDA streams, with ranks as one thread's group, as threads or
// as processes on one GPU; each result element checked against the host reference of gpu_test.cu, plus a guard
// after each result that must stay untouched and (out of place) a send buffer that must not change.
//
// NCCL_PROTO / NCCL_ALGO (set by ctest for the forced-protocol runs) restrict what may run: a case the library
// declines with "no loaded algorithm can run" counts as not served; for every other case of an algorithm-chosen
// collective the decision (plexusCommLastDecision) must name the forced algorithm and protocol.
#include <strings.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "gpu_test.h"

namespace gt {
namespace {

enum class Coll { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter, SendRecv };

struct CollInfo {
  Coll coll;
  const char* name;
  bool reduces;
  bool rooted;
  bool tuned;      // the tuner picks an algorithm and protocol (the rest run as grouped point-to-point)
  bool inPlaceOk;  // NCCL defines an in-place form
};

const std::vector<CollInfo>& collInfos() {
  static const std::vector<CollInfo> v = {
      {Coll::AllReduce, "AllReduce", true, false, true, true},
      {Coll::Broadcast, "Broadcast", false, true, true, true},
      {Coll::Reduce, "Reduce", true, true, true, true},
      {Coll::AllGather, "AllGather", false, false, true, true},
      {Coll::ReduceScatter, "ReduceScatter", true, false, true, true},
      {Coll::AlltoAll, "AlltoAll", false, false, false, false},
      {Coll::Gather, "Gather", false, true, false, true},
      {Coll::Scatter, "Scatter", false, true, false, true},
      {Coll::SendRecv, "SendRecv", false, false, false, false},
  };
  return v;
}

const CollInfo& info(Coll c) { return collInfos()[size_t(c)]; }

struct Case {
  Coll coll;
  ncclDataType_t type;
  Op op;
  size_t count;  // the count argument of the call
  bool inPlace;
  bool misalign;  // buffers one element past an aligned address
  int root;
  uint64_t seed;
};

// Element counts of one rank's buffers, and where the send and receive parts sit in the one buffer of an in-place
// call.
struct Layout {
  size_t send = 0, recv = 0;
  size_t sendOff = 0, recvOff = 0;  // in place: offsets (elements) inside the shared buffer
  size_t region = 0;                // in place: elements the shared buffer spans
  bool sends = true, receives = true;
};

Layout layout(const Case& k, int rank, int n) {
  Layout l;
  const size_t c = k.count;
  switch (k.coll) {
    case Coll::AllReduce: l.send = l.recv = c; break;
    case Coll::Broadcast:
      l.send = l.recv = c;
      l.sends = rank == k.root;
      break;
    case Coll::Reduce:
      l.send = l.recv = c;
      l.receives = rank == k.root;
      break;
    case Coll::AllGather:
      l.send = c, l.recv = n * c;
      l.sendOff = rank * c;
      break;
    case Coll::ReduceScatter:
      l.send = n * c, l.recv = c;
      l.recvOff = rank * c;
      break;
    case Coll::AlltoAll: l.send = l.recv = n * c; break;
    case Coll::Gather:
      l.send = c, l.recv = n * c;
      l.sendOff = rank * c;
      l.receives = rank == k.root;
      break;
    case Coll::Scatter:
      l.send = n * c, l.recv = c;
      l.recvOff = rank * c;
      l.sends = rank == k.root;
      break;
    case Coll::SendRecv: l.send = l.recv = 2 * c; break;
  }
  l.region = std::max(l.sendOff + l.send, l.recvOff + l.recv);
  return l;
}

// Where element j of rank's result comes from: the reduction at index `index` (reducing collectives), or element
// `index` of rank `src`'s input.
struct Source {
  int src;
  size_t index;
};

Source source(const Case& k, int rank, int n, size_t j) {
  const size_t c = k.count;
  switch (k.coll) {
    case Coll::AllReduce:
    case Coll::Reduce: return {-1, j};
    case Coll::ReduceScatter: return {-1, rank * c + j};
    case Coll::Broadcast: return {k.root, j};
    case Coll::AllGather:
    case Coll::Gather: return {int(j / c), j % c};
    case Coll::AlltoAll: return {int(j / c), rank * c + j % c};
    case Coll::Scatter: return {k.root, rank * c + j};
    case Coll::SendRecv:
      // Rank r sends its first block to r+1 and its second to r-1; it receives r-1's first block, then r+1's second.
      return j < c ? Source{(rank + n - 1) % n, j} : Source{(rank + 1) % n, j};
  }
  return {0, 0};
}

constexpr size_t kGuard = 64;  // elements after each result that must keep the poison
constexpr size_t kCheckThreads = 4;  // threads comparing a result of a million elements or more

struct Profile {
  std::vector<Coll> colls;
  std::vector<size_t> typeOpSizes;     // every type x op (or those below)
  std::vector<ncclDataType_t> types;   // empty: all 12
  std::vector<Op> ops;                 // empty: all
  std::vector<size_t> edgeSizes;       // a few types, sum
  std::vector<size_t> boundaryBytes;   // +-1 element around each, a few types, sum
  std::vector<ncclDataType_t> boundaryTypes;
  size_t largeBytes = 0;  // one large case per collective (0: none); the largest buffer's size
  std::vector<Coll> largeColls;
};

Profile makeProfile(const std::string& name, bool forced) {
  Profile p;
  for (const CollInfo& ci : collInfos())
    if (!forced || ci.tuned) p.colls.push_back(ci.coll);
  p.largeColls = p.colls;
  if (name == "full") {
    p.typeOpSizes = {1, 97, 65537};
    p.edgeSizes = {0, 2, 3};
    p.boundaryBytes = {16, 4096, 65536, 524288, 4u << 20};
    p.boundaryTypes = {ncclInt8, ncclFloat16, ncclFloat32, ncclFloat64};
    p.largeBytes = 64u << 20;
  } else if (name == "medium") {
    p.typeOpSizes = {1, 4099};
    p.edgeSizes = {0, 3};
    p.boundaryBytes = {4096, 524288};
    p.boundaryTypes = {ncclInt8, ncclFloat32};
    p.largeBytes = 32u << 20;
    p.largeColls = {Coll::AllReduce, Coll::AllGather};
  } else if (name == "proto") {
    p.typeOpSizes = {1, 97, 20000};
    p.edgeSizes = {2};
    p.boundaryBytes = {16, 4096, 65536, 524288};
    p.boundaryTypes = {ncclInt8, ncclFloat32};
    p.largeBytes = 16u << 20;
    p.largeColls = {Coll::AllReduce};
  } else if (name == "procs") {
    // Ranks as processes share the GPU by time slices (no MPS): fewer, smaller cases.
    p.typeOpSizes = {97};
    p.edgeSizes = {0};
    p.largeBytes = 8u << 20;
    p.largeColls = {Coll::AllReduce};
  } else if (name == "quick") {
    p.typeOpSizes = {1, 4099};
    p.types = {ncclFloat32, ncclInt8, ncclBfloat16};
    p.ops = {Op::Sum, Op::Avg, Op::PreMulDevice};
  } else if (name == "small") {
    p.typeOpSizes = {1, 97};
    p.edgeSizes = {0};
  } else if (name == "host") {
    // The harness checked on the host backend (PLEXUS_GPU_TEST_HOST=1): every collective, type and op, small sizes.
    p.typeOpSizes = {1, 97};
    p.edgeSizes = {0, 3};
    p.boundaryBytes = {4096};
    p.boundaryTypes = {ncclInt8, ncclFloat64};
  } else {
    fatal("unknown profile '%s' (full, medium, proto, procs, quick, small, host)", name.c_str());
  }
  return p;
}

std::vector<Case> makeCases(const Profile& p, int n) {
  std::vector<Case> cases;
  uint64_t seed = 1;
  auto add = [&](Coll c, ncclDataType_t t, Op op, size_t count, bool inPlace, bool misalign) {
    const CollInfo& ci = info(c);
    if (inPlace && !ci.inPlaceOk) return;
    const int root = ci.rooted ? int((cases.size() * 7 + 1) % size_t(n)) : -1;
    cases.push_back(Case{c, t, op, count, inPlace, misalign, root, seed++});
  };
  for (Coll c : p.colls) {
    const CollInfo& ci = info(c);
    const std::vector<Op> ops = !ci.reduces ? std::vector<Op>{Op::Sum} : p.ops.empty() ? allOps() : p.ops;
    std::vector<ncclDataType_t> types = p.types;
    if (types.empty())
      for (const TypeInfo& t : allTypes()) types.push_back(t.type);
    for (size_t count : p.typeOpSizes)
      for (ncclDataType_t t : types)
        for (Op op : ops)
          for (bool inPlace : {false, true}) add(c, t, op, count, inPlace, false);
    for (size_t count : p.edgeSizes)
      for (ncclDataType_t t : {ncclFloat32, ncclInt8, ncclFloat16, ncclUint64})
        for (bool inPlace : {false, true}) add(c, t, Op::Sum, count, inPlace, count == 3);
    for (size_t bytes : p.boundaryBytes)
      for (ncclDataType_t t : p.boundaryTypes) {
        const size_t ts = typeInfo(t).size;
        // Collectives whose count is per rank get the boundary on the whole buffer.
        const size_t per = (c == Coll::AllGather || c == Coll::ReduceScatter || c == Coll::AlltoAll ||
                            c == Coll::Gather || c == Coll::Scatter) ? size_t(n) : 1;
        for (long d : {-1L, 0L, 1L}) {
          const long count = long(bytes / ts / per) + d;
          if (count <= 0) continue;
          for (bool inPlace : {false, true}) add(c, t, Op::Sum, size_t(count), inPlace, d == 1);
        }
      }
  }
  if (p.largeBytes)
    for (Coll c : p.largeColls) {
      const size_t per = (c == Coll::AllGather || c == Coll::ReduceScatter || c == Coll::AlltoAll ||
                          c == Coll::Gather || c == Coll::Scatter) ? size_t(n) : c == Coll::SendRecv ? 2 : 1;
      const ncclDataType_t t = c == Coll::AllReduce ? ncclBfloat16 : ncclFloat32;
      add(c, t, Op::Sum, p.largeBytes / typeInfo(t).size / per + 3, false, false);
    }
  return cases;
}

bool equalsIgnoreCase(const std::string& a, const char* b) { return b && strcasecmp(a.c_str(), b) == 0; }

// A single name in NCCL_PROTO / NCCL_ALGO (no list, no exclusion): what every tuned case must then run.
std::string forcedName(const char* knob) {
  std::string v = envKnob(knob);
  if (v.empty() || v[0] == '^' || v.find(',') != std::string::npos) return "";
  return v;
}

struct RankBuffers {
  char* send = nullptr;  // device
  char* recv = nullptr;  // device: the result, or the shared buffer in place
  void* scalar = nullptr;  // device: PreMulSum's scalar
  std::vector<unsigned char> hostIn, hostOut;
};

struct Stats {
  long run = 0, notServed = 0, wrongCases = 0;
  std::map<std::string, long> decisions;
};

class Runner {
 public:
  Runner(Driver& d, std::vector<Case> cases, std::string label)
      : d_(d), cases_(std::move(cases)), label_(std::move(label)) {
    forcedProto_ = forcedName("PROTO");
    forcedAlgo_ = forcedName("ALGO");
  }

  void run() {
    allocate();
    d_.barrier();  // no rank allocates while another's collective waits for it
    for (size_t i = 0; i < cases_.size(); ++i) runCase(cases_[i]);
    d_.barrier();
    release();
    if (d_.printer()) report();
  }

 private:
  Driver& d_;
  std::vector<Case> cases_;
  std::string label_;
  std::string forcedProto_, forcedAlgo_;
  std::vector<RankBuffers> bufs_;
  std::map<Coll, Stats> stats_;
  const bool barrierEachCase_ = std::getenv("PLEXUS_GPU_TEST_BARRIER") != nullptr;

  std::string describe(const Case& k) const {
    return format("%s %s %s count %zu %s%s%s", info(k.coll).name, typeInfo(k.type).name,
                  info(k.coll).reduces ? opName(k.op) : "", k.count, k.inPlace ? "in-place" : "out-of-place",
                  k.misalign ? " misaligned" : "", info(k.coll).rooted ? format(" root %d", k.root).c_str() : "");
  }

  void allocate() {
    size_t maxBytes = 0;
    for (const Case& k : cases_)
      for (const Rank& r : d_.ranks) {
        Layout l = layout(k, r.rank, d_.nranks);
        const size_t elems = std::max(std::max(l.send, l.recv), l.region) + kGuard + 1;
        maxBytes = std::max(maxBytes, elems * typeInfo(k.type).size);
      }
    bufs_.resize(d_.ranks.size());
    for (RankBuffers& b : bufs_) {
      b.send = static_cast<char*>(devAlloc(maxBytes));
      b.recv = static_cast<char*>(devAlloc(maxBytes));
      b.scalar = devAlloc(16);
      b.hostIn.resize(maxBytes);
      b.hostOut.resize(maxBytes);
    }
  }

  void release() {
    for (RankBuffers& b : bufs_) {
      devFree(b.send);
      devFree(b.recv);
      devFree(b.scalar);
    }
  }

  // Pointers of one rank's call.
  void pointers(const Case& k, size_t li, char** send, char** recv) {
    const Rank& r = d_.ranks[li];
    const size_t ts = typeInfo(k.type).size;
    const size_t skew = k.misalign ? ts : 0;
    Layout l = layout(k, r.rank, d_.nranks);
    if (k.inPlace) {
      char* base = bufs_[li].recv + skew;
      *send = base + l.sendOff * ts;
      *recv = base + l.recvOff * ts;
    } else {
      *send = bufs_[li].send + skew;
      *recv = bufs_[li].recv + skew;
    }
  }

  Inputs inputsOf(const Case& k) const {
    return Inputs{k.type, k.op, info(k.coll).reduces, d_.nranks, k.seed};
  }

  // Poisons the result (and guard) and writes the rank's input.
  void prepare(const Case& k, size_t li) {
    const Rank& r = d_.ranks[li];
    RankBuffers& b = bufs_[li];
    const size_t ts = typeInfo(k.type).size;
    Layout l = layout(k, r.rank, d_.nranks);
    char *send, *recv;
    pointers(k, li, &send, &recv);
    const Inputs in = inputsOf(k);
    for (size_t i = 0; i < l.send; ++i) in.store(r.rank, i, &b.hostIn[i * ts]);
    if (k.inPlace) {
      char* base = bufs_[li].recv + (k.misalign ? ts : 0);
      devMemset(base, 0xFF, (l.region + kGuard) * ts, r.stream);
    } else {
      devMemset(recv, 0xFF, (l.recv + kGuard) * ts, r.stream);
    }
    // Ranks that send nothing (Broadcast's and Scatter's non-roots) still get their input written: the library must
    // not take it.
    if (l.send) toDevice(send, b.hostIn.data(), l.send * ts, r.stream);
  }

  ncclResult_t issue(const Case& k, size_t li, ncclRedOp_t op) {
    const Rank& r = d_.ranks[li];
    char *send, *recv;
    pointers(k, li, &send, &recv);
    const size_t c = k.count, ts = typeInfo(k.type).size;
    const int n = d_.nranks;
    switch (k.coll) {
      case Coll::AllReduce: return ncclAllReduce(send, recv, c, k.type, op, r.comm, r.stream);
      case Coll::Broadcast: return ncclBroadcast(send, recv, c, k.type, k.root, r.comm, r.stream);
      case Coll::Reduce: return ncclReduce(send, recv, c, k.type, op, k.root, r.comm, r.stream);
      case Coll::AllGather: return ncclAllGather(send, recv, c, k.type, r.comm, r.stream);
      case Coll::ReduceScatter: return ncclReduceScatter(send, recv, c, k.type, op, r.comm, r.stream);
      case Coll::AlltoAll: return ncclAlltoAll(send, recv, c, k.type, r.comm, r.stream);
      case Coll::Gather: return ncclGather(send, recv, c, k.type, k.root, r.comm, r.stream);
      case Coll::Scatter: return ncclScatter(send, recv, c, k.type, k.root, r.comm, r.stream);
      case Coll::SendRecv: {
        ncclResult_t res = ncclGroupStart();
        const int next = (r.rank + 1) % n, prev = (r.rank + n - 1) % n;
        if (res == ncclSuccess) res = ncclSend(send, c, k.type, next, r.comm, r.stream);
        if (res == ncclSuccess) res = ncclSend(send + c * ts, c, k.type, prev, r.comm, r.stream);
        if (res == ncclSuccess) res = ncclRecv(recv, c, k.type, prev, r.comm, r.stream);
        if (res == ncclSuccess) res = ncclRecv(recv + c * ts, c, k.type, next, r.comm, r.stream);
        ncclResult_t end = ncclGroupEnd();
        return res != ncclSuccess ? res : end;
      }
    }
    return ncclInternalError;
  }

  bool notServed(ncclResult_t res) const {
    if (res != ncclInvalidUsage) return false;
    for (const Rank& r : d_.ranks)
      if (std::strstr(lastError(r.comm), "no loaded algorithm can run")) return true;
    return std::strstr(lastError(nullptr), "no loaded algorithm can run") != nullptr;
  }

  void runCase(const Case& k) {
    const std::string what = describe(k);
    setPhase(what);
    Stats& st = stats_[k.coll];
    if (barrierEachCase_) d_.barrier();
    for (size_t li = 0; li < d_.ranks.size(); ++li) prepare(k, li);

    // PreMulSum operators, one per communicator; the host scalar is overwritten once the call returned (NCCL reads
    // it during the call), the device one lives until the stream is done.
    const bool preMul = info(k.coll).reduces && (k.op == Op::PreMulHost || k.op == Op::PreMulDevice);
    std::vector<ncclRedOp_t> ops(d_.ranks.size(), ncclSum);
    std::vector<std::array<unsigned char, 8>> hostScalars(d_.ranks.size());
    for (size_t li = 0; li < d_.ranks.size(); ++li) {
      const Rank& r = d_.ranks[li];
      if (!preMul) {
        ops[li] = info(k.coll).reduces ? ncclOpOf(k.op) : ncclSum;
        continue;
      }
      unsigned char* hs = hostScalars[li].data();
      const TypeInfo& ti = typeInfo(k.type);
      if (ti.isFloat)
        storeFloat(k.type, preMulScalar(k.type), hs);
      else
        storeInt(k.type, uint64_t(preMulScalar(k.type)), hs);
      void* scalar = hs;
      ncclScalarResidence_t where = ncclScalarHostImmediate;
      if (k.op == Op::PreMulDevice) {
        toDevice(bufs_[li].scalar, hs, ti.size, r.stream);
        scalar = bufs_[li].scalar;
        where = ncclScalarDevice;
      }
      GT_NCCL(r.comm, ncclRedOpCreatePreMulSum(&ops[li], scalar, k.type, where, r.comm));
    }

    d_.groupStart();
    ncclResult_t res = ncclSuccess;
    for (size_t li = 0; li < d_.ranks.size() && res == ncclSuccess; ++li) res = issue(k, li, ops[li]);
    ncclResult_t end = d_.groupEnd();
    if (res == ncclSuccess) res = end;
    if (preMul) {
      for (auto& hs : hostScalars) std::memset(hs.data(), 0x5A, hs.size());  // too late to matter
      for (size_t li = 0; li < d_.ranks.size(); ++li) GT_NCCL(d_.ranks[li].comm, ncclRedOpDestroy(ops[li], d_.ranks[li].comm));
    }
    if (res != ncclSuccess) {
      if (notServed(res)) {
        ++st.notServed;
        return;
      }
      fatal("%s: %s (%s)", what.c_str(), ncclGetErrorString(res),
            lastError(d_.ranks.size() == 1 ? d_.ranks[0].comm : nullptr));
    }
    ++st.run;
    countRun();
    if (info(k.coll).tuned && k.count > 0) checkDecision(k, what, st);
    for (const Rank& r : d_.ranks) streamSync(r.stream);
    for (const Rank& r : d_.ranks) {
      ncclResult_t async = ncclSuccess;
      GT_NCCL(r.comm, ncclCommGetAsyncError(r.comm, &async));
      if (async != ncclSuccess)
        fatal("%s: rank %d: asynchronous error %s (%s)", what.c_str(), r.rank, ncclGetErrorString(async),
              lastError(r.comm));
    }
    bool bad = false;
    for (size_t li = 0; li < d_.ranks.size(); ++li) bad |= !verify(k, li, what);
    if (bad) ++st.wrongCases;
  }

  void checkDecision(const Case& k, const std::string& what, Stats& st) {
    for (const Rank& r : d_.ranks) {
      plexusDecision_t dec{};
      ncclResult_t res = plexusCommLastDecision(r.comm, &dec);
      if (res != ncclSuccess) {
        fail("%s: rank %d: plexusCommLastDecision: %s", what.c_str(), r.rank, ncclGetErrorString(res));
        return;
      }
      if (r.rank == d_.ranks.front().rank)
        ++st.decisions[format("%s/%s", dec.algorithm ? dec.algorithm : "?", dec.protocol ? dec.protocol : "?")];
      if (!forcedAlgo_.empty() && !equalsIgnoreCase(forcedAlgo_, dec.algorithm))
        fail("%s: rank %d ran algorithm %s, but NCCL_ALGO=%s", what.c_str(), r.rank, dec.algorithm,
             forcedAlgo_.c_str());
      if (!forcedProto_.empty() && !equalsIgnoreCase(forcedProto_, dec.protocol))
        fail("%s: rank %d ran protocol %s, but NCCL_PROTO=%s", what.c_str(), r.rank, dec.protocol,
             forcedProto_.c_str());
    }
    (void)k;
  }

  // Reads back one rank's result, guard and (out of place) send buffer and compares them with the reference.
  bool verify(const Case& k, size_t li, const std::string& what) {
    const Rank& r = d_.ranks[li];
    RankBuffers& b = bufs_[li];
    const TypeInfo& ti = typeInfo(k.type);
    const size_t ts = ti.size;
    const Layout l = layout(k, r.rank, d_.nranks);
    const Inputs in = inputsOf(k);
    char *send, *recv;
    pointers(k, li, &send, &recv);
    bool ok = true;
    long wrong = 0;
    if (l.receives) {
      // The result plus the guard after it (in place: after the whole shared buffer).
      const size_t span = k.inPlace ? l.region - l.recvOff + kGuard : l.recv + kGuard;
      toHost(b.hostOut.data(), recv, span * ts, r.stream);
      // Large results are compared by several threads, each keeping its first mismatches for the report.
      struct Part {
        long wrong = 0;
        std::vector<std::string> first;
      };
      const size_t nParts = l.recv >= (1u << 20) ? kCheckThreads : 1;
      std::vector<Part> parts(nParts);
      auto check = [&](size_t part) {
        const size_t from = l.recv * part / nParts, to = l.recv * (part + 1) / nParts;
        unsigned char want[8];
        Part& p = parts[part];
        for (size_t j = from; j < to; ++j) {
          const unsigned char* got = &b.hostOut[j * ts];
          const Source s = source(k, r.rank, d_.nranks, j);
          bool good;
          std::string expectText;
          if (s.src < 0) {
            const Expected e = reduceAt(in, s.index);
            good = matches(in, e, got);
            if (!good) expectText = showExpected(in, e);
          } else {
            in.store(s.src, s.index, want);
            good = std::memcmp(got, want, ts) == 0;
            if (!good) expectText = showElement(k.type, want) + format(" (rank %d's element %zu)", s.src, s.index);
          }
          if (!good && p.wrong++ < 3)
            p.first.push_back(format("element %zu of %zu is %s, expected %s", j, l.recv,
                                     showElement(k.type, got).c_str(), expectText.c_str()));
        }
      };
      if (nParts == 1) {
        check(0);
      } else {
        std::vector<std::thread> threads;
        for (size_t part = 0; part < nParts; ++part) threads.emplace_back(check, part);
        for (std::thread& t : threads) t.join();
      }
      for (const Part& p : parts) {
        for (const std::string& m : p.first)
          if (wrong++ < 3) fail("%s: rank %d: %s", what.c_str(), r.rank, m.c_str());
        wrong += p.wrong - long(p.first.size());
      }
      const size_t guardFrom = k.inPlace ? l.region - l.recvOff : l.recv;
      for (size_t j = guardFrom; j < span; ++j)
        if (b.hostOut[j * ts] != 0xFF || b.hostOut[j * ts + ts - 1] != 0xFF) {
          fail("%s: rank %d: wrote past its result: element %zu after the %zu-element result changed", what.c_str(),
               r.rank, j - guardFrom, guardFrom);
          ok = false;
          break;
        }
    }
    if (wrong > 3) fail("%s: rank %d: %ld wrong elements of %zu in all", what.c_str(), r.rank, wrong, l.recv);
    // Out of place, the send buffer must come back unchanged (large buffers skipped: time).
    if (!k.inPlace && l.send && l.send * ts <= (8u << 20)) {
      toHost(b.hostOut.data(), send, l.send * ts, r.stream);
      if (std::memcmp(b.hostOut.data(), b.hostIn.data(), l.send * ts) != 0) {
        fail("%s: rank %d: the send buffer changed", what.c_str(), r.rank);
        ok = false;
      }
    }
    return ok && wrong == 0;
  }

  void report() {
    for (auto& [coll, st] : stats_) {
      std::string dec;
      for (auto& [name, count] : st.decisions) dec += format(" %s x%ld", name.c_str(), count);
      note("%-14s %5ld cases run, %4ld not served, %3ld with wrong results%s%s", info(coll).name, st.run, st.notServed,
           st.wrongCases, dec.empty() ? "" : ";", dec.c_str());
    }
  }
};

}  // namespace

int testCollectives(int argc, char** argv) {
  if (argc < 3) fatal("usage: collectives <group|threads|procs> <nranks> [full|medium|proto|procs|quick|small|host]");
  const Mode mode = parseMode(argv[1]);
  const int n = std::atoi(argv[2]);
  const std::string profileName = argc > 3 ? argv[3] : "full";
  if (n < 1 || n > 8) fatal("nranks %d: 1 to 8 (the reference's exact sums assume at most 8)", n);
  requireDevice(mode == Mode::Procs);
  startWatchdog(900);
  const std::string proto = envKnob("PROTO"), algo = envKnob("ALGO");
  const bool forced = !proto.empty() || !algo.empty();
  const Profile profile = makeProfile(profileName, forced);
  const std::vector<Case> cases = makeCases(profile, n);
  const std::string label = format("collectives %s %d ranks%s, profile %s, NCCL_PROTO=%s NCCL_ALGO=%s", modeName(mode),
                                   n, hostMode() ? " on the host backend" : "", profileName.c_str(), proto.empty() ? "(unset)" : proto.c_str(),
                                   algo.empty() ? "(unset)" : algo.c_str());
  note("%s: %zu cases", label.c_str(), cases.size());
  const double t0 = nowSeconds();
  runTeam(mode, n, 840, [&](Driver& d) { Runner(d, cases, label).run(); });
  note("%.1f s", nowSeconds() - t0);
  if (failures() == 0 && runCount() == 0)
    skip("%s: the library served none of the cases (each was declined with \"no loaded algorithm can run\")",
         label.c_str());
  return finish(label);
}

}  // namespace gt
