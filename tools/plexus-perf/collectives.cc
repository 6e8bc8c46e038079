// The collective table: how each benchmark sizes its buffers, converts time to bandwidth, calls the
// library, and what its result must be. Sizes and bandwidths follow nccl-tests exactly so numbers are
// comparable with NCCL's.
#include "perf.h"

// The library grows one collective at a time and may not export them all yet: weak references keep
// plexus-perf linkable against any build, and a missing entry point fails at run time like an
// unimplemented one.
#pragma weak ncclAllReduce
#pragma weak ncclAllGather
#pragma weak ncclBroadcast
#pragma weak ncclReduce
#pragma weak ncclReduceScatter
#pragma weak ncclAlltoAll
#pragma weak ncclGather
#pragma weak ncclScatter
#pragma weak ncclSend
#pragma weak ncclRecv

namespace perf {

thread_local const char* runDetail = nullptr;

namespace {

#define TRY(fn, args)                                          \
  do {                                                         \
    if (!fn) {                                                 \
      *failedCall = #fn;                                       \
      runDetail = "the loaded libplexus does not export " #fn; \
      return ncclInvalidUsage;                                 \
    }                                                          \
    ncclResult_t res_ = fn args;                               \
    if (res_ != ncclSuccess) {                                 \
      *failedCall = #fn;                                       \
      return res_;                                             \
    }                                                          \
  } while (0)

// ---- Sizes: `count` is size / typesize; see Counts. ----

void countsSame(size_t count, int, Counts* c) {  // allreduce, broadcast, reduce, sendrecv
  *c = {count, count, count, 0, 0};
}
void countsGather(size_t count, int n, Counts* c) {  // allgather, gather, hypercube: size = total received
  size_t chunk = count / n;
  *c = {chunk, chunk * n, chunk, chunk, 0};
}
void countsScatter(size_t count, int n, Counts* c) {  // reduce_scatter, scatter: size = total sent
  size_t chunk = count / n;
  *c = {chunk * n, chunk, chunk, 0, chunk};
}
void countsAlltoall(size_t count, int n, Counts* c) {
  size_t chunk = count / n;
  *c = {chunk * n, chunk * n, chunk, 0, 0};
}

// ---- Bandwidth: busbw = algbw * busFactor, the per-link traffic of an optimal algorithm. ----

int scaleOne(int) { return 1; }
int scaleRanks(int n) { return n; }
double busOne(int) { return 1.0; }
double busAllReduce(int n) { return 2.0 * (n - 1) / n; }
double busSpread(int n) { return double(n - 1) / n; }

// ---- Calls ----

ncclResult_t runAllReduce(const RunArgs& a, const char** failedCall) {
  TRY(ncclAllReduce, (a.sendbuff, a.recvbuff, a.count, a.type, a.op, a.comm, a.stream));
  return ncclSuccess;
}
ncclResult_t runAllGather(const RunArgs& a, const char** failedCall) {
  TRY(ncclAllGather, (a.sendbuff, a.recvbuff, a.count, a.type, a.comm, a.stream));
  return ncclSuccess;
}
ncclResult_t runBroadcast(const RunArgs& a, const char** failedCall) {
  TRY(ncclBroadcast, (a.sendbuff, a.recvbuff, a.count, a.type, a.root, a.comm, a.stream));
  return ncclSuccess;
}
ncclResult_t runReduce(const RunArgs& a, const char** failedCall) {
  TRY(ncclReduce, (a.sendbuff, a.recvbuff, a.count, a.type, a.op, a.root, a.comm, a.stream));
  return ncclSuccess;
}
ncclResult_t runReduceScatter(const RunArgs& a, const char** failedCall) {
  TRY(ncclReduceScatter, (a.sendbuff, a.recvbuff, a.count, a.type, a.op, a.comm, a.stream));
  return ncclSuccess;
}
ncclResult_t runAlltoAll(const RunArgs& a, const char** failedCall) {
  TRY(ncclAlltoAll, (a.sendbuff, a.recvbuff, a.count, a.type, a.comm, a.stream));
  return ncclSuccess;
}
ncclResult_t runGather(const RunArgs& a, const char** failedCall) {
  TRY(ncclGather, (a.sendbuff, a.recvbuff, a.count, a.type, a.root, a.comm, a.stream));
  return ncclSuccess;
}
ncclResult_t runScatter(const RunArgs& a, const char** failedCall) {
  TRY(ncclScatter, (a.sendbuff, a.recvbuff, a.count, a.type, a.root, a.comm, a.stream));
  return ncclSuccess;
}
// Ring shift: every rank sends to rank+1 and receives from rank-1.
ncclResult_t runSendRecv(const RunArgs& a, const char** failedCall) {
  int next = (a.rank + 1) % a.nranks, prev = (a.rank - 1 + a.nranks) % a.nranks;
  TRY(ncclGroupStart, ());
  TRY(ncclSend, (a.sendbuff, a.count, a.type, next, a.comm, a.stream));
  TRY(ncclRecv, (a.recvbuff, a.count, a.type, prev, a.comm, a.stream));
  TRY(ncclGroupEnd, ());
  return ncclSuccess;
}
// Allgather by recursive doubling over send/recv: log2(n) exchanges of growing blocks.
ncclResult_t runHypercube(const RunArgs& a, const char** failedCall) {
  char* rbuff = static_cast<char*>(a.recvbuff);
  const size_t block = a.count * typeSize(a.type);
  // Our own block: a self send/recv keeps the copy ordered on the stream (there is no memcpyAsync).
  if (rbuff + a.rank * block != a.sendbuff) {
    TRY(ncclGroupStart, ());
    TRY(ncclSend, (a.sendbuff, a.count, a.type, a.rank, a.comm, a.stream));
    TRY(ncclRecv, (rbuff + a.rank * block, a.count, a.type, a.rank, a.comm, a.stream));
    TRY(ncclGroupEnd, ());
  }
  for (int mask = 1; mask < a.nranks; mask <<= 1) {
    int have = a.rank & ~(mask - 1), peerHas = have ^ mask;
    TRY(ncclGroupStart, ());
    TRY(ncclSend, (rbuff + have * block, a.count * mask, a.type, a.rank ^ mask, a.comm, a.stream));
    TRY(ncclRecv, (rbuff + peerHas * block, a.count * mask, a.type, a.rank ^ mask, a.comm, a.stream));
    TRY(ncclGroupEnd, ());
  }
  return ncclSuccess;
}

// ---- Expected results (element idx of `rank`'s receive buffer) ----

double expectReduced(const ExpectCtx& c, int, size_t idx) { return reduceOverRanks(c, idx); }
double expectReduceScatter(const ExpectCtx& c, int rank, size_t idx) {
  return reduceOverRanks(c, size_t(rank) * c.chunk + idx);
}
double expectRootCopy(const ExpectCtx& c, int, size_t idx) { return c.pattern->value(c.root, idx); }
double expectGathered(const ExpectCtx& c, int, size_t idx) {
  return c.pattern->value(int(idx / c.chunk), idx % c.chunk);
}
double expectAlltoall(const ExpectCtx& c, int rank, size_t idx) {
  return c.pattern->value(int(idx / c.chunk), size_t(rank) * c.chunk + idx % c.chunk);
}
double expectScattered(const ExpectCtx& c, int rank, size_t idx) {
  return c.pattern->value(c.root, size_t(rank) * c.chunk + idx);
}
double expectFromPrev(const ExpectCtx& c, int rank, size_t idx) {
  return c.pattern->value((rank - 1 + c.nranks) % c.nranks, idx);
}

}  // namespace

const std::vector<Collective>& collectives() {
  static const std::vector<Collective> table{
      {.name = "all_reduce",
       .reduces = true,
       .counts = countsSame,
       .algScale = scaleOne,
       .busFactor = busAllReduce,
       .run = runAllReduce,
       .expect = expectReduced},
      {.name = "all_gather",
       .counts = countsGather,
       .algScale = scaleRanks,
       .busFactor = busSpread,
       .run = runAllGather,
       .expect = expectGathered},
      {.name = "broadcast",
       .rooted = true,
       .counts = countsSame,
       .algScale = scaleOne,
       .busFactor = busOne,
       .run = runBroadcast,
       .expect = expectRootCopy},
      {.name = "reduce",
       .reduces = true,
       .rooted = true,
       .rootOnly = true,
       .counts = countsSame,
       .algScale = scaleOne,
       .busFactor = busOne,
       .run = runReduce,
       .expect = expectReduced},
      {.name = "reduce_scatter",
       .reduces = true,
       .counts = countsScatter,
       .algScale = scaleRanks,
       .busFactor = busSpread,
       .run = runReduceScatter,
       .expect = expectReduceScatter},
      {.name = "alltoall",
       .noInPlace = true,
       .counts = countsAlltoall,
       .algScale = scaleRanks,
       .busFactor = busSpread,
       .run = runAlltoAll,
       .expect = expectAlltoall},
      {.name = "gather",
       .rooted = true,
       .rootOnly = true,
       .counts = countsGather,
       .algScale = scaleRanks,
       .busFactor = busSpread,
       .run = runGather,
       .expect = expectGathered},
      {.name = "scatter",
       .rooted = true,
       .counts = countsScatter,
       .algScale = scaleRanks,
       .busFactor = busSpread,
       .run = runScatter,
       .expect = expectScattered},
      {.name = "sendrecv",
       .inPlaceUnchecked = true,  // as nccl-tests: a rank's send and receive share one buffer, no result defined
       .counts = countsSame,
       .algScale = scaleOne,
       .busFactor = busOne,
       .run = runSendRecv,
       .expect = expectFromPrev},
      {.name = "hypercube",
       .pow2Ranks = true,
       .stepwise = true,
       .counts = countsGather,
       .algScale = scaleRanks,
       .busFactor = busSpread,
       .run = runHypercube,
       .expect = expectGathered},
  };
  return table;
}

const Collective* findCollective(const std::string& name) {
  for (const Collective& c : collectives())
    if (name == c.name) return &c;
  // nccl-tests binary names (all_reduce_perf) and dash spellings are accepted too.
  std::string n = name;
  if (n.size() > 5 && n.compare(n.size() - 5, 5, "_perf") == 0) n.resize(n.size() - 5);
  for (char& ch : n)
    if (ch == '-') ch = '_';
  for (const Collective& c : collectives())
    if (n == c.name) return &c;
  return nullptr;
}

}  // namespace perf
