// profiler-trace: an NCCL profiler plugin (ncclProfiler_v6 and _v5) that writes each communicator's events as a
// Chrome trace-event file per rank, loadable in Perfetto (ui.perfetto.dev) or chrome://tracing:
//
//   NCCL_PROFILER_PLUGIN=trace PLEXUS_PROFILER_TRACE=/tmp/run ./app    ->  /tmp/run-<commHash>-rank<r>.json
//
// One process per rank, one lane (thread) per application thread (GroupApi > CollApi/P2pApi > KernelLaunch, nested
// by time), one lane for the collectives and point-to-point operations (each from its hand-over to the device until
// its last channel finished), one lane per channel (KernelCh: the channel's part of each launch), and across nodes
// lanes per proxy connection (ProxyOp: an operation's traffic on it; under it each ProxyStep on the lane of its slot,
// with the net plugin's NetPlugin events inside). The files are
// written at the communicator's finalize. PLEXUS_PROFILER_TRACE_MASK chooses the events (ncclProfile* bits; default
// all this plugin draws), PLEXUS_PROFILER_TRACE_MAX bounds the events kept per communicator (default 1000000; the
// rest are counted and dropped).
#include <plexus/profiler.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr int kDrawn = ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi | ncclProfileKernelLaunch |
                       ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileKernelCh |
                       ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileNetPlugin;
constexpr int kOpsLane = 100000;      // the collectives' lane
constexpr int kProxyLanes = 150000;   // proxy connections: kProxyLanes + 100 x the connection's order + sub-lane
constexpr int kThreadLanes = 200000;  // application threads: kThreadLanes + the thread's order of appearance

uint64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);  // the clock Plexus's KernelCh timers use
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct Context;

struct Event {
  Context* ctx;
  uint64_t type;
  std::string name, args;  // args: a JSON object's members
  int lane = 0;
  uint64_t start = 0, end = 0;  // ns; end 0: never stopped
  Event* parent = nullptr;
  std::string group;  // proxy events: the lanes they are packed on ("net ch 0 send to 1", "... steps")
};

struct Context {
  std::mutex mu;
  std::deque<Event> events;  // a deque: handles stay valid as it grows
  std::map<long, int> threadLanes;
  std::string path;
  int rank = 0;
  size_t max = 1000000;
  uint64_t dropped = 0;
};

std::string jsonEscape(const char* s) {
  std::string out;
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') out += '\\';
    if ((unsigned char)*s < 0x20) continue;
    out += *s;
  }
  return out;
}

std::string str(const char* key, const char* value) {
  return "\"" + std::string(key) + "\": \"" + jsonEscape(value) + "\"";
}
std::string num(const char* key, uint64_t value) { return "\"" + std::string(key) + "\": " + std::to_string(value); }

int threadLane(Context* c) {
  const long tid = syscall(SYS_gettid);
  auto it = c->threadLanes.find(tid);
  if (it != c->threadLanes.end()) return it->second;
  const int lane = kThreadLanes + (int)c->threadLanes.size();
  c->threadLanes[tid] = lane;
  return lane;
}

ncclResult_t init(void** context, uint64_t commId, int* eActivationMask, const char* commName, int, int nranks, int rank,
                  ncclDebugLogger_t logfn) {
  *context = nullptr;
  const char* prefix = getenv("PLEXUS_PROFILER_TRACE");
  if (!prefix || !*prefix) {
    if (logfn)
      logfn(NCCL_LOG_WARN, NCCL_INIT, __FILE__, __LINE__,
            "profiler-trace: PLEXUS_PROFILER_TRACE is not set: no trace is written (set it to a file prefix)");
    return ncclSuccess;  // loaded, and idle: the mask stays as it is
  }
  auto* c = new Context();
  char file[64];
  snprintf(file, sizeof file, "-%016" PRIx64 "-rank%d.json", commId, rank);
  c->path = std::string(prefix) + file;
  c->rank = rank;
  if (const char* m = getenv("PLEXUS_PROFILER_TRACE_MAX")) c->max = std::max(1L, atol(m));
  const char* mask = getenv("PLEXUS_PROFILER_TRACE_MASK");
  __atomic_fetch_or(eActivationMask, mask ? (int)strtol(mask, nullptr, 0) : kDrawn, __ATOMIC_RELAXED);
  if (logfn)
    logfn(NCCL_LOG_INFO, NCCL_INIT, __FILE__, __LINE__, "profiler-trace: rank %d of %d%s%s: tracing to %s", rank,
          nranks, commName ? " of " : "", commName ? commName : "", c->path.c_str());
  *context = c;
  return ncclSuccess;
}

ncclResult_t startEvent(void* context, void** eHandle, ncclProfilerEventDescr_v6_t* d) {
  *eHandle = nullptr;
  auto* c = static_cast<Context*>(context);
  if (!c || !(d->type & kDrawn)) return ncclSuccess;
  std::lock_guard<std::mutex> lock(c->mu);
  if (c->events.size() >= c->max) {
    c->dropped++;
    return ncclSuccess;
  }
  c->events.push_back(Event{c, d->type, "", ""});
  Event& e = c->events.back();
  e.start = nowNs();
  e.parent = static_cast<Event*>(d->parentObj);
  if (d->type & (ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi | ncclProfileKernelLaunch |
                 ncclProfileGroup))
    e.lane = threadLane(c);
  switch (d->type) {
    case ncclProfileGroupApi:
      e.name = d->groupApi.groupDepth > 1 ? "ncclGroupStart..End" : "call";
      e.args = num("depth", (uint64_t)d->groupApi.groupDepth);
      break;
    case ncclProfileCollApi:
      e.name = std::string("nccl") + d->collApi.func;
      e.args = num("count", d->collApi.count) + ", " + str("datatype", d->collApi.datatype) + ", " +
               num("root", (uint64_t)d->collApi.root);
      break;
    case ncclProfileP2pApi:
      e.name = std::string("nccl") + d->p2pApi.func;
      e.args = num("count", d->p2pApi.count) + ", " + str("datatype", d->p2pApi.datatype);
      break;
    case ncclProfileKernelLaunch: e.name = "launch"; break;
    case ncclProfileGroup: e.name = "group"; break;
    case ncclProfileColl:
      e.lane = kOpsLane;
      e.name = d->coll.func;
      e.args = num("seq", d->coll.seqNumber) + ", " + num("count", d->coll.count) + ", " +
               str("datatype", d->coll.datatype) + ", " + str("algo", d->coll.algo) + ", " +
               str("proto", d->coll.proto) + ", " + num("channels", d->coll.nChannels);
      e.parent = nullptr;  // drawn on its own lane; its CollApi is on the thread's
      break;
    case ncclProfileP2p:
      e.lane = kOpsLane;
      e.name = std::string(d->p2p.func) + (d->p2p.func[0] == 'S' ? " to " : " from ") + std::to_string(d->p2p.peer);
      e.args = num("count", d->p2p.count) + ", " + str("datatype", d->p2p.datatype) + ", " +
               num("peer", (uint64_t)d->p2p.peer);
      e.parent = nullptr;
      break;
    case ncclProfileProxyOp:
      e.group = "net ch " + std::to_string(d->proxyOp.channelId) + (d->proxyOp.isSend ? " send to " : " recv from ") +
                std::to_string(d->proxyOp.peer);
      e.name = (e.parent ? e.parent->name : std::string("operation")) + (d->proxyOp.isSend ? " send" : " recv");
      e.args = num("channel", d->proxyOp.channelId) + ", " + num("peer", (uint64_t)d->proxyOp.peer) + ", " +
               num("stepBytes", (uint64_t)d->proxyOp.chunkSize);
      break;
    case ncclProfileProxyStep:
      e.group = (e.parent ? e.parent->group : std::string("proxy")) + " steps";
      e.name = "step " + std::to_string(d->proxyStep.step);
      e.args = num("step", (uint64_t)d->proxyStep.step);
      break;
    case ncclProfileNetPlugin:
      e.group = e.parent ? e.parent->group : std::string("net plugin");
      e.name = "net plugin";
      e.args = num("pluginId", (uint64_t)d->netPlugin.id);
      break;
    case ncclProfileKernelCh:
      e.lane = d->kernelCh.channelId;
      e.start = d->kernelCh.pTimer ? d->kernelCh.pTimer : e.start;
      e.name = e.parent ? e.parent->name : "kernel";
      e.args = num("channel", d->kernelCh.channelId);
      break;
  }
  *eHandle = &e;
  return ncclSuccess;
}

// Under the context's lock: the operation an event belongs to lasts until its last channel has finished.
void extendOp(Event* e) {
  for (Event* p = e->parent; p; p = p->parent)
    if (p->type & (ncclProfileColl | ncclProfileP2p)) p->end = std::max(p->end, e->end);
}

ncclResult_t stopEvent(void* eHandle) {
  auto* e = static_cast<Event*>(eHandle);
  if (!e) return ncclSuccess;
  std::lock_guard<std::mutex> lock(e->ctx->mu);
  if (e->type == ncclProfileKernelCh) {
    if (!e->end) e->end = nowNs();
    extendOp(e);
    return ncclSuccess;
  }
  e->end = std::max(e->end, nowNs());
  return ncclSuccess;
}

ncclResult_t recordEventState(void* eHandle, ncclProfilerEventState_v6_t state, ncclProfilerEventStateArgs_v6_t* args) {
  auto* e = static_cast<Event*>(eHandle);
  if (!e) return ncclSuccess;
  std::lock_guard<std::mutex> lock(e->ctx->mu);
  if (state == ncclProfilerKernelChStop && args && args->kernelCh.pTimer) e->end = args->kernelCh.pTimer;
  return ncclSuccess;
}

void write(Context* c) {
  FILE* f = fopen(c->path.c_str(), "w");
  if (!f) return;
  fprintf(f, "{\"displayTimeUnit\": \"ns\", \"otherData\": {\"writer\": \"plexus profiler-trace\", \"dropped\": %" PRIu64
          "},\n\"traceEvents\": [\n", c->dropped);
  fprintf(f, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"args\": {\"name\": \"rank %d\"}}", c->rank,
          c->rank);
  std::map<int, std::string> lanes;
  auto endOf = [](const Event& e) { return e.end ? std::max(e.end, e.start) : e.start; };
  // Events that overlap (the next operation is handed over while the last still runs; a connection's steps are in
  // flight together): each goes to the first lane of its group free at its start, so that a lane's events nest as
  // the format wants. A NetPlugin event is drawn inside its step.
  auto pack = [&](std::vector<Event*> group, int base, const std::string& name) {
    std::sort(group.begin(), group.end(), [](const Event* a, const Event* b) { return a->start < b->start; });
    std::vector<uint64_t> laneEnds;
    for (Event* e : group) {
      size_t k = 0;
      while (k < laneEnds.size() && laneEnds[k] > e->start) k++;
      if (k == laneEnds.size()) laneEnds.push_back(0);
      laneEnds[k] = endOf(*e);
      e->lane = base + (int)k;
      lanes[e->lane] = k ? name + " " + std::to_string(k + 1) : name;
    }
  };
  std::vector<Event*> ops;
  std::map<std::string, std::vector<Event*>> proxy;
  std::vector<std::string> proxyOrder;  // groups by first appearance
  for (Event& e : c->events) {
    if (e.lane == kOpsLane) ops.push_back(&e);
    if (!(e.type & (ncclProfileProxyOp | ncclProfileProxyStep))) continue;
    const std::string conn = e.type == ncclProfileProxyOp ? e.group : e.group.substr(0, e.group.size() - 6);
    if (std::find(proxyOrder.begin(), proxyOrder.end(), conn) == proxyOrder.end()) proxyOrder.push_back(conn);
    proxy[e.group].push_back(&e);
  }
  pack(ops, kOpsLane, "operations");
  for (size_t i = 0; i < proxyOrder.size(); i++) {
    const int base = kProxyLanes + 100 * (int)i;
    pack(proxy[proxyOrder[i]], base, proxyOrder[i]);
    pack(proxy[proxyOrder[i] + " steps"], base + 10, proxyOrder[i] + " steps");
  }
  for (Event& e : c->events)
    if (e.type == ncclProfileNetPlugin) e.lane = e.parent ? e.parent->lane : kProxyLanes - 1;
  for (const Event& e : c->events) {
    if (e.lane >= kThreadLanes) lanes[e.lane] = "thread " + std::to_string(e.lane - kThreadLanes);
    else if (e.lane < kOpsLane) lanes[e.lane] = "channel " + std::to_string(e.lane);
    else if (!lanes.count(e.lane)) lanes[e.lane] = "net plugin";
    const uint64_t end = endOf(e);
    // Microseconds since the epoch, so that every rank's file shares one time line (readers parse them as doubles:
    // a quarter of a microsecond apart at today's dates).
    fprintf(f, ",\n{\"ph\": \"X\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
            "\"args\": {%s}}", jsonEscape(e.name.c_str()).c_str(), c->rank, e.lane, e.start / 1e3,
            (end - e.start) / 1e3, e.args.c_str());
  }
  for (const auto& [lane, name] : lanes) {
    fprintf(f, ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s\"}}",
            c->rank, lane, name.c_str());
    fprintf(f, ",\n{\"ph\": \"M\", \"name\": \"thread_sort_index\", \"pid\": %d, \"tid\": %d, \"args\": "
            "{\"sort_index\": %d}}", c->rank, lane, lane);
  }
  fprintf(f, "\n]}\n");
  fclose(f);
}

ncclResult_t finalize(void* context) {
  auto* c = static_cast<Context*>(context);
  if (!c) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    write(c);
  }
  delete c;
  return ncclSuccess;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const ncclProfiler_v6_t ncclProfiler_v6 = {
    "profiler-trace", init, startEvent, stopEvent, recordEventState, finalize};
