// A net plugin that behaves as plugins in the field do where they bend NCCL's rules, one behaviour per word of
// FIELD_QUIRKS (comma-separated). NCCL runs over such plugins; so must Plexus, while plexus-net-check reports
// them to plugin authors. Built as field-v6 (ncclNetPlugin_v6 alone, an NCCL 2.18-era plugin) and field-v12.
//   blocking-accept  accept waits until the peer's connect arrives (v4-v6-era plugins)
//   no-size          test never fills sizes
//   requests-8       fails any call that would put more than NCCL_NET_MAX_REQUESTS_V6 requests in flight on a comm
//   host-flush-fails claims forceFlush (v9+), and iflush fails on host memory: NCCL never flushes host memory
//   odd-props        speed 0, maxRecvs 0, latency -1, no name
//   setenv-init      init sets environment variables (as some plugins do to configure their libraries)
//   hang-connect-node1  connect of the process whose PLEXUS_HOSTID ends in "node1" waits FIELD_HANG_SECONDS
//                    (default 20) and then fails: its peer's accept never returns in the meantime
//   pci-devices      one device per PCI bus id in FIELD_DEVICES (space-separated; default two), each with that
//                    pciPath, all carried by the socket net's first device
//   props-fail-0     getProperties(0) fails (a NIC whose port is down, say): the runtime must never use device 0
//   prof-callback    (v12) calls the profiler callback init got around every isend and irecv without checking it,
//                    as plugins written for NCCL (which always passes one) may
// FIELD_USES_FILE: each listen and connect appends "listen <dev>" / "connect <dev>" to that file (which device the
// runtime chose, for the tests).
// Everything forwards to libplexus's built-in socket net (plexusSocketNet_v12, found with dlsym(RTLD_DEFAULT)).
#include <dlfcn.h>
#include <fcntl.h>
#include <plexus/net.h>
#include <plexus/profiler_common.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <sstream>
#include <thread>
#include <vector>

#ifndef NET_VERSION
#error "NET_VERSION (6 or 12) selects the ABI version the plugin exports"
#endif

namespace {

const ncclNet_v12_t* sock = nullptr;
std::string quirks;
ncclDebugLogger_t logger = nullptr;

bool has(const char* q) {
  const std::string list = "," + quirks + ",";
  return list.find("," + std::string(q) + ",") != std::string::npos;
}

#define LOG(level, ...)                                                               \
  do {                                                                                \
    if (logger) logger(level, NCCL_NET, __FILE__, __LINE__, "net field: " __VA_ARGS__); \
  } while (0)

// requests-8: requests in flight per comm, and the comm of each request.
std::mutex mu;
std::map<void*, int> inFlight;
std::map<void*, void*> commOf;

ncclResult_t admit(void* comm) {
  if (!has("requests-8")) return ncclSuccess;
  std::lock_guard<std::mutex> lock(mu);
  if (inFlight[comm] >= NCCL_NET_MAX_REQUESTS_V6) {
    LOG(NCCL_LOG_WARN, "comm %p: a 9th request in flight; this plugin was written for NCCL_NET_MAX_REQUESTS_V6", comm);
    return ncclInternalError;
  }
  return ncclSuccess;
}
void posted(void* comm, void* request) {
  if (!has("requests-8") || !request) return;
  std::lock_guard<std::mutex> lock(mu);
  inFlight[comm]++;
  commOf[request] = comm;
}
void finished(void* request) {
  if (!has("requests-8")) return;
  std::lock_guard<std::mutex> lock(mu);
  auto it = commOf.find(request);
  if (it == commOf.end()) return;
  inFlight[it->second]--;
  commOf.erase(it);
}

ncclProfilerCallback_t profiler = nullptr;
// prof-callback: a NetPlugin event around a request, as a socket net built with NCCL's NET_PROFILER would emit.
void profiled(void* phandle, int op, size_t bytes) {
  if (!has("prof-callback")) return;
  ncclProfilerNetSockDescr_v1_t d{};
  d.type = 1;  // ncclProfileSocket
  d.sock.op = op;
  d.sock.length = bytes;
  void* handle = nullptr;
  profiler(&handle, 0 /* start */, phandle, (int64_t)((2u << 16) | 1) /* NCCL_PROFILER_NET_TYPE_SOCK | v1 */, &d);
  profiler(&handle, 3 /* update and stop */, phandle, 0, &d);
}
ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t log,
                  ncclProfilerCallback_t prof) {
  logger = log;
  sock = (const ncclNet_v12_t*)dlsym(RTLD_DEFAULT, "plexusSocketNet_v12");
  if (!sock) return ncclSystemError;  // outside a process with libplexus's socket net
  const char* q = getenv("FIELD_QUIRKS");
  quirks = q ? q : "";
  if (has("setenv-init"))
    for (int i = 0; i < 64; i++) setenv("FIELD_NET_CONFIGURED", std::to_string(i).c_str(), 1);
  profiler = prof;
  return sock->init(ctx, commId, config, log, prof);
}
// pci-devices: the devices' sysfs paths and names.
std::vector<std::string> pciPaths, names;
void pciDevices() {
  if (!pciPaths.empty()) return;
  const char* list = getenv("FIELD_DEVICES");
  std::istringstream in(list && *list ? list : "0000:15:00.0 0000:35:00.0");
  for (std::string id; in >> id;) {
    pciPaths.push_back("/sys/devices/pci0000:00/" + id);
    names.push_back("field" + std::to_string(names.size()));
  }
}
// The socket net's device that carries `dev`.
int carrier(int dev) { return has("pci-devices") ? 0 : dev; }
void recordUse(const char* what, int dev) {
  const char* file = getenv("FIELD_USES_FILE");
  if (!file || !*file) return;
  const int fd = open(file, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return;
  const std::string line = std::string(what) + " " + std::to_string(dev) + "\n";
  (void)!write(fd, line.data(), line.size());  // one write: lines of several processes never interleave
  close(fd);
}

ncclResult_t devices(int* n) {
  if (!has("pci-devices")) return sock->devices(n);
  pciDevices();
  *n = (int)pciPaths.size();
  return ncclSuccess;
}
ncclResult_t getProperties(int dev, ncclNetProperties_v12_t* p) {
  if (has("props-fail-0") && dev == 0) {
    LOG(NCCL_LOG_WARN, "getProperties(0) fails on purpose (props-fail-0)");
    return ncclInternalError;
  }
  ncclResult_t r = sock->getProperties(carrier(dev), p);
  if (has("pci-devices") && r == ncclSuccess) {
    pciDevices();
    if (dev < 0 || dev >= (int)pciPaths.size()) return ncclInvalidArgument;
    p->name = const_cast<char*>(names[dev].c_str());
    p->pciPath = const_cast<char*>(pciPaths[dev].c_str());
  }
  if (has("host-flush-fails")) p->forceFlush = 1;
  if (has("odd-props")) {
    p->speed = 0;
    p->maxRecvs = 0;
    p->latency = -1;
    p->name = nullptr;
  }
  return r;
}
ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) {
  recordUse("listen", dev);
  return sock->listen(ctx, carrier(dev), handle, listenComm);
}
ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t** devComm) {
  recordUse("connect", dev);
  const char* host = getenv("PLEXUS_HOSTID");
  if (has("hang-connect-node1") && host && strlen(host) >= 5 && strcmp(host + strlen(host) - 5, "node1") == 0) {
    const char* s = getenv("FIELD_HANG_SECONDS");
    std::this_thread::sleep_for(std::chrono::seconds(s ? atoi(s) : 20));
    return ncclSystemError;
  }
  return sock->connect(ctx, carrier(dev), handle, sendComm, devComm);
}
ncclResult_t accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v12_t** devComm) {
  if (!has("blocking-accept")) return sock->accept(listenComm, recvComm, devComm);
  // Bounded, as every loop in a test: a peer that never connects ends in an error after 120 s.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    ncclResult_t r = sock->accept(listenComm, recvComm, devComm);
    if (r != ncclSuccess || *recvComm) return r;
    if (std::chrono::steady_clock::now() > deadline) return ncclSystemError;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}
// host-flush-fails: the memory type of each registration, for iflush.
std::map<void*, int> mrType;
ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  ncclResult_t r = sock->regMr(comm, data, size, type, mhandle);
  if (r == ncclSuccess) {
    std::lock_guard<std::mutex> lock(mu);
    mrType[*mhandle] = type;
  }
  return r;
}
ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  return sock->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle);
}
ncclResult_t deregMr(void* comm, void* mhandle) {
  {
    std::lock_guard<std::mutex> lock(mu);
    mrType.erase(mhandle);
  }
  return sock->deregMr(comm, mhandle);
}
ncclResult_t isend(void* comm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request) {
  *request = nullptr;
  if (admit(comm) != ncclSuccess) return ncclInternalError;
  ncclResult_t r = sock->isend(comm, data, size, tag, mhandle, phandle, request);
  if (r == ncclSuccess) posted(comm, *request);
  if (r == ncclSuccess && *request) profiled(phandle, 0, size);
  return r;
}
ncclResult_t irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                   void** request) {
  *request = nullptr;
  if (admit(comm) != ncclSuccess) return ncclInternalError;
  ncclResult_t r = sock->irecv(comm, n, data, sizes, tags, mhandles, phandles, request);
  if (r == ncclSuccess) posted(comm, *request);
  if (r == ncclSuccess && *request) profiled(phandles ? phandles[0] : nullptr, 1, sizes[0]);
  return r;
}
ncclResult_t iflush(void* comm, int n, void** data, int* sizes, void** mhandles, void** request) {
  if (has("host-flush-fails")) {
    std::lock_guard<std::mutex> lock(mu);
    for (int i = 0; i < n; i++)
      if (mrType[mhandles[i]] == NCCL_PTR_HOST) {
        LOG(NCCL_LOG_WARN, "iflush on host memory: this plugin flushes GPU memory only");
        return ncclInternalError;
      }
  }
  if (admit(comm) != ncclSuccess) return ncclInternalError;
  ncclResult_t r = sock->iflush(comm, n, data, sizes, mhandles, request);
  if (r == ncclSuccess) posted(comm, *request);
  return r;
}
ncclResult_t test(void* request, int* done, int* sizes) {
  int ignored[8] = {};  // the socket net's maxRecvs
  ncclResult_t r = sock->test(request, done, has("no-size") && sizes ? ignored : sizes);
  if (r == ncclSuccess && *done) finished(request);
  return r;
}
ncclResult_t closeSend(void* c) { return sock->closeSend(c); }
ncclResult_t closeRecv(void* c) { return sock->closeRecv(c); }
ncclResult_t closeListen(void* c) { return sock->closeListen(c); }
ncclResult_t finalize(void* ctx) { return sock->finalize(ctx); }

const ncclNet_v12_t fieldNet = {
    "field",  init,    devices, getProperties, listen,    connect, accept,  regMr,   regMrDmaBuf, deregMr, isend,
    irecv,    iflush,  test,    closeSend,     closeRecv, closeListen,
    nullptr, /* getDeviceMr */
    nullptr, /* irecvConsumed */
    nullptr, /* makeVDevice */
    finalize,
    nullptr, /* setNetAttr */
};

}  // namespace

#if NET_VERSION == 12
extern "C" {
__attribute__((visibility("default"))) extern const ncclNet_v12_t ncclNetPlugin_v12;
}
const ncclNet_v12_t ncclNetPlugin_v12 = fieldNet;
#else
#define PLEXUS_NET_EXPORT_IMPL fieldNet
#include <plexus/net_export.h>
#define EXPORT_VERSION2(v) PLEXUS_NET_EXPORT_V##v
#define EXPORT_VERSION(v) EXPORT_VERSION2(v)
EXPORT_VERSION(NET_VERSION)
#endif
