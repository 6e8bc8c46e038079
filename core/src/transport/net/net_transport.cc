#include "transport/net/net_transport.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "device/runtime.h"
#include "misc/check.h"
#include "misc/debug.h"
#include "misc/env.h"
#include "nccl.h"
#include "plugin/net.h"
#include "proxy/proxy_profile.h"
#include "topo/hw_topo.h"

namespace plexus {

namespace {

using Clock = std::chrono::steady_clock;

// What one communicator uses: the net plugin chosen for it (at its first net connection: a job within
// one node never needs one) and that plugin's context.
struct NetComm {
  plexusTransportComm_v1_t info{};
  std::string netName, netPlugin;
  std::mutex mu;
  bool chosen = false;
  ncclResult_t chooseResult = ncclSuccess;
  const NetPlugin* plugin = nullptr;
  void* ctx = nullptr;
  std::vector<ncclNetProperties_v12_t> props;  // per device
  std::vector<bool> usable;                     // getProperties answered
  // The devices this rank uses, nearest first (netDeviceOrder), and how many lead equally near; made on the first
  // connection, which knows the rank's GPU.
  std::vector<int> order;
  int nearest = 0;
  bool ordered = false;
  int acceptsLeft = 0;  // accepts left blocked in the plugin: its context is not finalized under them
};

// Control words of one side, in its own memory: the kernel and the proxy share them.
struct alignas(128) Ctrl {
  volatile uint64_t tail;
  char pad0[120];
  volatile uint64_t head;
  char pad1[120];
  volatile uint64_t wanted;  // receiver: steps the kernel is about to consume (recvWanted)
  char pad2[120];
  plexusConnFifo_v1_t connFifo[PLEXUS_STEPS];
};

// What the receiver tells the sender.
struct RecvInfo {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  int dev;
  int stepSize;
};
static_assert(sizeof(RecvInfo) <= PLEXUS_CONNECT_INFO_BYTES, "connect info");

// accept may block until the peer's connect arrives (several v4-v6-era plugins do): it runs on a thread of its
// own, so that this rank's connect loop keeps going (its own connects, the setup deadline, abort). Shared with
// that thread, which may outlive the connection when the plugin never returns.
struct Acceptor {
  std::atomic<bool> finished{false}, cancelled{false};
  ncclResult_t result = ncclSuccess;
  void* comm = nullptr;
  std::thread thread;
};

// A connection posts at most PLEXUS_STEPS requests to its comm (a receiver's flush goes to a slot whose receive is
// done), within what plugins written for NCCL_NET_MAX_REQUESTS_V6 take: ABI v6 plugins are used as they are.
static_assert(PLEXUS_STEPS <= NCCL_NET_MAX_REQUESTS_V6, "requests in flight per comm");

// What test() leaves in sizes when it does not fill them (the kernel never needs the size; a flush does).
constexpr int kSizeUnset = -0x5a5a5a5a;

// A flush still to be posted (the plugin asked for one, or gave a NULL request last time).
void* const kFlushPending = (void*)&kFlushPending;

struct NetConn {
  NetComm* net = nullptr;
  bool isSend = false;
  int self = -1, peer = -1, channel = -1, dev = 0;
  int stepSize = 0;
  size_t buffBytes = 0;
  char* buff = nullptr;  // PLEXUS_STEPS slots of stepSize bytes, as the plugin is given them
  Ctrl* ctrl = nullptr;  // as the proxy reads and writes them
  // CUDA: the memory (host-mapped slots, or device slots the plugin reaches directly: GPUDirect), and what the
  // kernel is given of it. Host backend: rt is null and the kernel uses buff and ctrl themselves.
  DeviceRuntime* rt = nullptr;
  DeviceMem buffMem, ctrlMem;
  bool gdr = false;
  char* kernelBuff = nullptr;
  Ctrl* kernelCtrl = nullptr;
  void* mhandle = nullptr;
  void* listenComm = nullptr;
  std::shared_ptr<Acceptor> acceptor;  // receiver, while it connects
  void* comm = nullptr;  // sendComm or recvComm
  RecvInfo peerInfo{};    // sender: the receiver's handle, one buffer for every connect call (as NCCL's)
  bool connecting = false;
  void* flushing = nullptr;  // receiver: the iflush of the oldest received step, when the plugin wants one
  int flushSize = 0;
  // Steps, counted from the connection's start: posted to the plugin, completed by it (sender: sent;
  // receiver: received and exposed through tail), and released (receiver: consumed by the kernel).
  uint64_t posted = 0, completed = 0, released = 0;
  void* requests[PLEXUS_STEPS] = {};
  Clock::time_point oldestSince{};  // when the oldest incomplete request was posted
  Clock::time_point refusedSince{};  // when the plugin began to give NULL requests for what waits to be posted
  bool refusing = false;
  ProxyProfile* profile = nullptr;  // host backend: the steps' profiler handles (phandle)
  void* phandles[PLEXUS_STEPS] = {};
  // Steps the kernel gave by pointer (PLEXUS_CONN_NET_PTR): the registration of each, from its posting until its
  // completion (sender) or release (receiver).
  void* ptrHandles[PLEXUS_STEPS] = {};

  void* stepHandle(uint64_t step) const { return profile ? profile->stepHandle(step) : nullptr; }
  const NetPlugin& plugin() const { return *net->plugin; }
  std::string where() const {
    const char* devName = net->props.size() > (size_t)dev && net->props[dev].name ? net->props[dev].name : "?";
    char buf[256];
    snprintf(buf, sizeof buf, "%s device %d (%s), %s rank %d on channel %d", plugin().label.c_str(), dev, devName,
             isSend ? "sending to" : "receiving from", peer, channel);
    return buf;
  }
};

ncclResult_t fail(const NetConn& c, ncclResult_t r, const char* what) {
  WARN("net transport: rank %d: %s failed with %s (%s)", c.self, what, ncclGetErrorString(r), c.where().c_str());
  return r == ncclInProgress ? ncclInternalError : r;
}

// Properties real plugins give that NCCL tolerates (speed 0, no maxRecvs, no name): logged, and a default used.
void sanitize(const std::string& label, int dev, ncclNetProperties_v12_t* p) {
  std::string fixed;
  if (!p->name) {
    static const char kUnnamed[] = "unnamed";
    p->name = (char*)kUnnamed;
    fixed += " name NULL (\"unnamed\" used);";
  }
  if (p->speed <= 0) {
    fixed += " speed " + std::to_string(p->speed) + " Mbps (10000 used);";
    p->speed = 10000;  // NCCL's default for a link of unknown speed
  }
  if (p->maxRecvs <= 0) {
    fixed += " maxRecvs " + std::to_string(p->maxRecvs) + " (1 used);";
    p->maxRecvs = 1;
  }
  if (p->latency < 0) {
    fixed += " latency " + std::to_string(p->latency) + " us (0, the default, used);";
    p->latency = 0;
  }
  if (!fixed.empty())
    INFO(NCCL_INIT | NCCL_NET, "net transport: %s: device %d reports%s plexus-net-check reports these to the "
         "plugin's authors", label.c_str(), dev, fixed.c_str());
}

// Chooses the communicator's net plugin once.
ncclResult_t chooseNet(NetComm* n) {
  std::lock_guard<std::mutex> lock(n->mu);
  if (n->chosen) return n->chooseResult;
  n->chosen = true;
  ncclNetCommConfig_v12_t config{n->info.trafficClass};
  std::string report;
  n->chooseResult =
      netPluginChoose(n->netPlugin, n->netName, n->info.commHash, config, debugLog, &n->plugin, &n->ctx, &report);
  if (n->chooseResult != ncclSuccess) return n->chooseResult;
  int ndev = 0;
  n->plugin->api->devices(&ndev);
  n->props.resize(ndev);
  n->usable.assign(ndev, false);
  std::string devs;
  for (int d = 0; d < ndev; d++) {
    if (n->plugin->api->getProperties(d, &n->props[d]) != ncclSuccess) {
      WARN("net transport: %s: getProperties(%d) failed; the device is not used", n->plugin->label.c_str(), d);
      n->props[d] = ncclNetProperties_v12_t{};
      continue;
    }
    n->usable[d] = true;
    sanitize(n->plugin->label, d, &n->props[d]);
    const ncclNetProperties_v12_t& p = n->props[d];
    char one[256];
    snprintf(one, sizeof one, "%s%d:%s (%d Mbps, maxRecvs %d%s)", devs.empty() ? "" : ", ", d, p.name ? p.name : "?",
             p.speed, p.maxRecvs, p.forceFlush ? ", iflush after every receive" : "");
    devs += one;
    if (!(p.ptrSupport & NCCL_PTR_HOST)) {
      n->chooseResult = ncclSystemError;
      WARN("net transport: %s: device %d cannot send from host memory (ptrSupport 0x%x); the host backend needs "
           "NCCL_PTR_HOST. Choose another plugin (NCCL_NET_PLUGIN / NCCL_NET)", n->plugin->label.c_str(), d,
           p.ptrSupport);
      return n->chooseResult;
    }
  }
  INFO(NCCL_INIT | NCCL_NET, "rank %d: %s; devices %s", n->info.rank, report.c_str(), devs.c_str());
  return ncclSuccess;
}

ncclResult_t netInit(void** ctx, ncclDebugLogger_t) {
  *ctx = nullptr;
  return ncclSuccess;
}

// Every pair can fall back to the network; the core asks the transports in order, so ranks of one
// node use p2p-nvlink first.
ncclResult_t netCanConnect(void*, const plexusPeerInfo_v1_t*, const plexusPeerInfo_v1_t*, int* ret) {
  *ret = 1;
  return ncclSuccess;
}

ncclResult_t netCommInit(void*, const plexusTransportComm_v1_t* info, void** commCtx) {
  auto* n = new (std::nothrow) NetComm();
  if (!n) return ncclSystemError;
  n->info = *info;
  if (info->netName) n->netName = info->netName;
  if (info->netPlugin) n->netPlugin = info->netPlugin;
  n->info.netName = n->netName.c_str();
  n->info.netPlugin = n->netPlugin.c_str();
  *commCtx = n;
  return ncclSuccess;
}

ncclResult_t netCommFinalize(void* commCtx) {
  auto* n = (NetComm*)commCtx;
  if (n->plugin && n->ctx && !n->acceptsLeft) n->plugin->api->finalize(n->ctx);
  delete n;
  return ncclSuccess;
}

// CUDA (NCCL's NET path on GPUs): the control words in host-mapped memory, which the kernel and the proxy both
// poll; the slots in device memory when the plugin reads and writes GPU memory itself (ptrSupport NCCL_PTR_CUDA or
// NCCL_PTR_DMABUF; PLEXUS_NET_GDR=0 turns it off), else in host-mapped memory the kernel writes across the bus.
ncclResult_t allocateCuda(NetConn* c) {
  NCCLCHECK(deviceRuntime(plexusBackendCuda, &c->rt));
  const int ptr = c->net->props[c->dev].ptrSupport;
  c->gdr = (ptr & (NCCL_PTR_CUDA | NCCL_PTR_DMABUF)) && envInt("NET_GDR", 1) != 0;
  if (c->rt->alloc(c->gdr ? MemKind::Device : MemKind::HostMapped, c->buffBytes, &c->buffMem) != ncclSuccess ||
      c->rt->alloc(MemKind::HostMapped, sizeof(Ctrl), &c->ctrlMem) != ncclSuccess) {
    WARN("net transport: rank %d: cannot allocate the connection with rank %d on the GPU (%zu bytes of %s memory): %s",
         c->self, c->peer, c->buffBytes, c->gdr ? "device" : "host-mapped", c->rt->lastError().c_str());
    return ncclUnhandledCudaError;
  }
  c->kernelBuff = (char*)c->buffMem.ptr;
  c->buff = c->gdr ? c->kernelBuff : (char*)c->buffMem.host;
  c->ctrl = new (c->ctrlMem.host) Ctrl{};
  c->kernelCtrl = (Ctrl*)c->ctrlMem.ptr;
  for (auto& f : c->ctrl->connFifo) f.size = PLEXUS_CONNFIFO_FREE;
  INFO(NCCL_NET, "net transport: rank %d: connection %s rank %d on channel %d stages through %s memory%s", c->self,
       c->isSend ? "to" : "from", c->peer, c->channel, c->gdr ? "device" : "host-mapped",
       c->gdr ? " (GPUDirect: the plugin reads and writes GPU memory)" : "");
  return ncclSuccess;
}

// The device of a connection: among the devices nearest to the rank's GPU (CUDA) or CPUs (host), by the machine's
// topology (core/src/topo/hw_topo.h), channels and the node's ranks spread round-robin; never one whose
// getProperties failed.
ncclResult_t chooseDevice(NetConn* c, const plexusTransportSetup_v1_t* setup) {
  NetComm* n = c->net;
  std::lock_guard<std::mutex> lock(n->mu);
  if (!n->ordered) {
    n->ordered = true;
    const HwTopology* topo = HwTopology::process();
    std::vector<std::string> busIds;
    for (const ncclNetProperties_v12_t& p : n->props) busIds.push_back(p.pciPath ? normalizeBusId(p.pciPath) : "");
    const std::string gpu = setup->self->backend == plexusBackendCuda ? cudaBusId(setup->self->device) : "";
    std::string why;
    n->order = netDeviceOrder(topo, busIds, n->usable, gpu, topo ? topo->usableCpuList() : "", &n->nearest, &why);
    const std::string from = gpu.empty() ? "its CPUs" : "its GPU " + gpu;
    std::string order;
    for (int d : n->order) order += (order.empty() ? "" : ", ") + std::to_string(d);
    INFO(NCCL_NET | NCCL_GRAPH, "rank %d: %s devices nearest first from %s: %s (channels spread over the first %d)\n%s",
         c->self, c->plugin().label.c_str(), from.c_str(), order.c_str(), n->nearest, why.c_str());
  }
  if (n->order.empty()) {
    WARN("net transport: rank %d: %s has no usable device (every getProperties failed); choose another net plugin "
         "(NCCL_NET_PLUGIN / NCCL_NET)", c->self, c->plugin().label.c_str());
    return ncclSystemError;
  }
  c->dev = n->order[(size_t)(n->info.localRank + setup->channelId) % (size_t)std::max(1, n->nearest)];
  return ncclSuccess;
}

// Buffer and control words of one side.
ncclResult_t allocate(NetConn* c, const plexusTransportSetup_v1_t* setup) {
  c->net = (NetComm*)setup->commCtx;
  if (!c->net) return ncclInternalError;
  NCCLCHECK(chooseNet(c->net));
  c->self = setup->self->rank;
  c->peer = setup->peer->rank;
  c->channel = setup->channelId;
  NCCLCHECK(chooseDevice(c, setup));
  c->stepSize = setup->buffSizes[PLEXUS_PROTO_SIMPLE] / PLEXUS_STEPS;
  c->buffBytes = (size_t)c->stepSize * PLEXUS_STEPS;
  if (setup->self->backend == plexusBackendCuda) return allocateCuda(c);
  void* mem = mmap(nullptr, c->buffBytes + sizeof(Ctrl), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    WARN("net transport: rank %d: cannot allocate %zu bytes for the connection with rank %d: %s", c->self,
         c->buffBytes, c->peer, strerror(errno));
    return ncclSystemError;
  }
  c->buff = c->kernelBuff = (char*)mem;
  c->ctrl = c->kernelCtrl = new (c->buff + c->buffBytes) Ctrl{};
  for (auto& f : c->ctrl->connFifo) f.size = PLEXUS_CONNFIFO_FREE;
  return ncclSuccess;
}

// Ends the accept thread: at once if accept returns (a comm it made late is closed), else the thread is left
// inside the plugin with the listen comm, which is never closed under it.
void stopAcceptor(NetConn* c) {
  std::shared_ptr<Acceptor> a = std::move(c->acceptor);
  if (!a) return;
  a->cancelled.store(true);
  const auto deadline = Clock::now() + std::chrono::milliseconds(200);
  while (!a->finished.load() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!a->finished.load()) {
    WARN("net transport: rank %d: accept of %s has not returned; leaving it blocked in the plugin (its listen comm is "
         "not closed)", c->self, c->where().c_str());
    a->thread.detach();
    c->listenComm = nullptr;
    c->net->acceptsLeft++;
    return;
  }
  a->thread.join();
  if (a->comm) c->plugin().api->closeRecv(a->comm);
}

void release(NetConn* c) {
  stopAcceptor(c);
  if (c->net && c->net->plugin) {
    NetApi* a = c->net->plugin->api.get();
    if (c->mhandle) a->deregMr(c->comm, c->mhandle);
    for (void*& h : c->ptrHandles)  // steps given by pointer that were in flight (an abort)
      if (h) a->deregMr(c->comm, h), h = nullptr;
    if (c->comm) (c->isSend ? a->closeSend(c->comm) : a->closeRecv(c->comm));
    if (c->listenComm) a->closeListen(c->listenComm);
  }
  if (c->rt) {
    if (c->buffMem.ptr) c->rt->free(&c->buffMem);
    if (c->ctrlMem.ptr) c->rt->free(&c->ctrlMem);
  } else if (c->buff) {
    munmap(c->buff, c->buffBytes + sizeof(Ctrl));
  }
  delete c;
}

ncclResult_t netRecvSetup(void*, const plexusTransportSetup_v1_t* setup, plexusConnectInfo_v1_t* info,
                          void** resources) {
  auto* c = new (std::nothrow) NetConn();
  if (!c) return ncclSystemError;
  c->isSend = false;
  ncclResult_t r = allocate(c, setup);
  RecvInfo ri{};
  if (r == ncclSuccess) {
    r = c->plugin().api->listen(c->net->ctx, c->dev, ri.handle, &c->listenComm);
    if (r == ncclSuccess && !c->listenComm) r = ncclInternalError;  // the ABI promises a listenComm
    if (r != ncclSuccess) r = fail(*c, r, "listen");
  }
  if (r != ncclSuccess) {
    release(c);
    return r;
  }
  ri.dev = c->dev;
  ri.stepSize = c->stepSize;
  memset(info, 0, sizeof(*info));
  memcpy(info->data, &ri, sizeof(ri));
  *resources = c;
  return ncclSuccess;
}

ncclResult_t netSendSetup(void*, const plexusTransportSetup_v1_t* setup, plexusConnectInfo_v1_t* info,
                          void** resources) {
  auto* c = new (std::nothrow) NetConn();
  if (!c) return ncclSystemError;
  c->isSend = true;
  ncclResult_t r = allocate(c, setup);
  if (r != ncclSuccess) {
    release(c);
    return r;
  }
  memset(info, 0, sizeof(*info));
  *resources = c;
  return ncclSuccess;
}

// The connector its kernel sees: the local slots and control words.
void fillConn(const NetConn* c, plexusConnInfo_v1_t* conn) {
  memset(conn, 0, sizeof(*conn));
  conn->buffs[PLEXUS_PROTO_SIMPLE] = c->kernelBuff;
  conn->buffs[PLEXUS_PROTO_LL] = c->kernelBuff;  // LL and LL128 lines travel in the Simple slots
  conn->buffs[PLEXUS_PROTO_LL128] = c->kernelBuff;
  conn->mhandles[PLEXUS_PROTO_SIMPLE] = c->mhandle;
  conn->tail = &c->kernelCtrl->tail;
  conn->head = &c->kernelCtrl->head;
  conn->connFifo = c->kernelCtrl->connFifo;
  conn->stepSize = c->stepSize;
  conn->flags = PLEXUS_CONN_LL_IN_SLOTS;
  // Host backend: large point-to-point messages and collectives' steps go from and into the user's buffers (host
  // memory, which every plugin registers) with no copy through the slots, which on a CPU would cost as much as the
  // network's own copies.
  if (!c->rt && envInt("NET_PTR", 1) != 0) conn->flags |= PLEXUS_CONN_NET_PTR;
  if (!c->isSend) conn->recvWanted = &c->kernelCtrl->wanted;
}

// The slots, registered with the plugin: host memory, or GPU memory through a dmabuf where the plugin takes one
// (regMrDmaBuf), else as NCCL_PTR_CUDA.
ncclResult_t registerBuffer(NetConn* c) {
  NetApi* api = c->plugin().api.get();
  if (!c->gdr) {
    ncclResult_t r = api->regMr(c->comm, c->buff, c->buffBytes, NCCL_PTR_HOST, &c->mhandle);
    return r == ncclSuccess ? r : fail(*c, r, "regMr of the connection's host buffer");
  }
  int fd = -1;
  uint64_t offset = 0;
  if ((c->net->props[c->dev].ptrSupport & NCCL_PTR_DMABUF) && c->rt->exportDmabuf(c->buffMem, &fd, &offset) == ncclSuccess) {
    ncclResult_t r = api->regMrDmaBuf(c->comm, c->buff, c->buffBytes, NCCL_PTR_CUDA, offset, fd, &c->mhandle);
    close(fd);
    if (r == ncclSuccess) return r;
    INFO(NCCL_NET, "net transport: regMrDmaBuf failed (%s); trying regMr with NCCL_PTR_CUDA", ncclGetErrorString(r));
  }
  ncclResult_t r = api->regMr(c->comm, c->buff, c->buffBytes, NCCL_PTR_CUDA, &c->mhandle);
  return r == ncclSuccess ? r : fail(*c, r, "regMr of the connection's GPU buffer (NCCL_PTR_CUDA)");
}

ncclResult_t netSendConnect(void* resources, const plexusConnectInfo_v1_t* peerInfo, plexusConnInfo_v1_t* conn) {
  auto* c = (NetConn*)resources;
  if (!c->comm) {
    RecvInfo& ri = c->peerInfo;
    if (!c->connecting) {  // the first call: later calls pass the same handle, which plugins may keep state in
      memcpy(&ri, peerInfo->data, sizeof(ri));
      c->connecting = true;
    }
    if (ri.stepSize != c->stepSize) {
      WARN("net transport: rank %d: rank %d's receive slots are %d bytes, this rank's %d: every rank must use the "
           "same NCCL_BUFFSIZE", c->self, c->peer, ri.stepSize, c->stepSize);
      return ncclInvalidUsage;
    }
    ncclResult_t r = c->plugin().api->connect(c->net->ctx, c->dev, ri.handle, &c->comm);
    if (r != ncclSuccess) return fail(*c, r, "connect");
    if (!c->comm) return ncclInProgress;
    NCCLCHECK(registerBuffer(c));
  }
  fillConn(c, conn);
  return ncclSuccess;
}

void acceptLoop(std::shared_ptr<Acceptor> a, NetApi* api, void* listenComm) {
  // A plugin whose accept does not block answers "not yet" (comm NULL): ask again, a little less often each time.
  for (int wait = 0;;) {
    void* comm = nullptr;
    ncclResult_t r = api->accept(listenComm, &comm);
    if (r != ncclSuccess || comm || a->cancelled.load()) {
      a->result = r;
      a->comm = comm;
      a->finished.store(true);
      return;
    }
    wait = std::min(wait + 10, 1000);
    std::this_thread::sleep_for(std::chrono::microseconds(wait));
  }
}

ncclResult_t netRecvConnect(void* resources, const plexusConnectInfo_v1_t*, plexusConnInfo_v1_t* conn) {
  auto* c = (NetConn*)resources;
  if (!c->comm) {
    if (!c->acceptor) {
      c->acceptor = std::make_shared<Acceptor>();
      try {
        c->acceptor->thread = std::thread(acceptLoop, c->acceptor, c->plugin().api.get(), c->listenComm);
      } catch (const std::system_error& e) {
        c->acceptor.reset();
        WARN("net transport: rank %d: cannot start a thread to accept %s: %s", c->self, c->where().c_str(), e.what());
        return ncclSystemError;
      }
    }
    if (!c->acceptor->finished.load()) return ncclInProgress;
    c->acceptor->thread.join();
    const ncclResult_t r = c->acceptor->result;
    c->comm = c->acceptor->comm;
    c->acceptor.reset();
    if (r != ncclSuccess) return fail(*c, r, "accept");
    c->plugin().api->closeListen(c->listenComm);
    c->listenComm = nullptr;
    NCCLCHECK(registerBuffer(c));
  }
  fillConn(c, conn);
  return ncclSuccess;
}

ncclResult_t netFree(void* resources) {
  release((NetConn*)resources);
  return ncclSuccess;
}

// Seconds a request may stay incomplete while its step is wanted (PLEXUS_NET_TIMEOUT); 0: forever.
double requestTimeout() {
  static const double s = (double)envInt("NET_TIMEOUT", 0);
  return s;
}

ncclResult_t stalled(const NetConn& c, char* error, int errorLen) {
  snprintf(error, errorLen, "%s: a %s has not completed after %.0f s (PLEXUS_NET_TIMEOUT); the peer or the plugin "
           "is stuck", c.where().c_str(), c.isSend ? "send" : "receive", requestTimeout());
  WARN("net transport: rank %d: %s", c.self, error);
  return ncclSystemError;
}

// A NULL request means "full, ask again"; one that lasts PLEXUS_NET_TIMEOUT with nothing of ours in
// flight is a plugin that never takes the request.
ncclResult_t refused(NetConn* c, bool gotRequest, char* error, int errorLen) {
  if (gotRequest) {
    c->refusing = false;
    return ncclSuccess;
  }
  if (!c->refusing) {
    c->refusing = true;
    c->refusedSince = Clock::now();
  }
  if (requestTimeout() <= 0 ||
      std::chrono::duration<double>(Clock::now() - c->refusedSince).count() <= requestTimeout())
    return ncclSuccess;
  snprintf(error, errorLen, "%s: the plugin has answered every %s with a NULL request for %.0f s "
           "(PLEXUS_NET_TIMEOUT) while none of ours was in flight; the plugin is stuck",
           c->where().c_str(), c->isSend ? "isend" : "irecv", requestTimeout());
  WARN("net transport: rank %d: %s", c->self, error);
  return ncclSystemError;
}

ncclResult_t failed(const NetConn& c, ncclResult_t r, const char* what, char* error, int errorLen) {
  snprintf(error, errorLen, "%s: %s failed with %s", c.where().c_str(), what, ncclGetErrorString(r));
  WARN("net transport: rank %d: %s", c.self, error);
  return r == ncclRemoteError ? r : ncclSystemError;
}

// Where step `slot`'s bytes are and their registration: the slot, or the user's memory the kernel gave by pointer
// (registered now; kept in ptrHandles until the step is over).
ncclResult_t stepMemory(NetConn* c, int slot, void** data, size_t* size, void** mhandle, char* error, int errorLen) {
  const plexusConnFifo_v1_t& f = c->ctrl->connFifo[slot];
  if (f.mode != PLEXUS_MODE_PTR) {
    *data = c->buff + (size_t)slot * c->stepSize;
    *mhandle = c->mhandle;
    return ncclSuccess;
  }
  *data = f.ptr;
  *size = (size_t)f.size;
  if (!c->ptrHandles[slot]) {
    ncclResult_t r = c->plugin().api->regMr(c->comm, f.ptr, (size_t)f.size, NCCL_PTR_HOST, &c->ptrHandles[slot]);
    if (r != ncclSuccess) return failed(*c, r, "regMr of a point-to-point buffer", error, errorLen);
  }
  *mhandle = c->ptrHandles[slot];
  return ncclSuccess;
}

ncclResult_t releaseStepMemory(NetConn* c, int slot, char* error, int errorLen) {
  if (!c->ptrHandles[slot]) return ncclSuccess;
  ncclResult_t r = c->plugin().api->deregMr(c->comm, c->ptrHandles[slot]);
  c->ptrHandles[slot] = nullptr;
  return r == ncclSuccess ? r : failed(*c, r, "deregMr of a point-to-point buffer", error, errorLen);
}

// nccl-abi.md §5.3: post what the kernel published, test, free the slot and return credit.
ncclResult_t sendProgress(NetConn* c, int* idle, char* error, int errorLen) {
  NetApi& api = *c->plugin().api;
  const uint64_t tail = __atomic_load_n(&c->ctrl->tail, __ATOMIC_ACQUIRE);
  bool moved = false;
  while (c->posted < tail) {
    const int slot = (int)(c->posted % PLEXUS_STEPS);
    const int64_t size = c->ctrl->connFifo[slot].size;
    if (size < 0 || size > c->stepSize)
      return failed(*c, ncclInternalError, "a kernel step of a bad size", error, errorLen);
    void* req = nullptr;
    void* data = nullptr;
    void* mhandle = nullptr;
    size_t bytes = (size_t)size;
    NCCLCHECK(stepMemory(c, slot, &data, &bytes, &mhandle, error, errorLen));
    ncclResult_t r = api.isend(c->comm, data, bytes, c->self, mhandle, c->stepHandle(c->posted), &req);
    if (r != ncclSuccess) return failed(*c, r, "isend", error, errorLen);
    if (c->completed == c->posted) NCCLCHECK(refused(c, req != nullptr, error, errorLen));
    if (!req) break;  // the plugin is full: try again later
    if (c->posted == c->completed) c->oldestSince = Clock::now();
    c->requests[slot] = req;
    c->posted++;
    moved = true;
  }
  while (c->completed < c->posted) {
    const int slot = (int)(c->completed % PLEXUS_STEPS);
    int done = 0, size = 0;
    ncclResult_t r = api.test(c->requests[slot], &done, &size);
    if (r != ncclSuccess) return failed(*c, r, "a send (test)", error, errorLen);
    if (!done) break;
    c->requests[slot] = nullptr;
    NCCLCHECK(releaseStepMemory(c, slot, error, errorLen));
    c->ctrl->connFifo[slot].mode = PLEXUS_MODE_NORMAL;
    c->ctrl->connFifo[slot].size = PLEXUS_CONNFIFO_FREE;
    c->completed++;
    c->oldestSince = Clock::now();
    __atomic_store_n(&c->ctrl->head, c->completed, __ATOMIC_RELEASE);  // credit back to the kernel
    moved = true;
  }
  if (c->completed < c->posted && requestTimeout() > 0 &&
      std::chrono::duration<double>(Clock::now() - c->oldestSince).count() > requestTimeout())
    return stalled(*c, error, errorLen);
  // Steps handed over and not yet completed must finish whether or not a kernel runs.
  *idle = !moved && c->completed == tail;
  return ncclSuccess;
}

// nccl-abi.md §5.4: post a receive in each slot the kernel has released, for the steps it has said it
// will consume; test them in order, expose each through tail, and tell the plugin when the kernel has
// consumed it.
ncclResult_t recvProgress(NetConn* c, int* idle, char* error, int errorLen) {
  NetApi& api = *c->plugin().api;
  const uint64_t head = __atomic_load_n(&c->ctrl->head, __ATOMIC_ACQUIRE);
  bool moved = false;
  // Slots the kernel has consumed go back to the plugin first: only then may a slot take a new receive.
  for (; c->released < head && c->released < c->completed; c->released++) {
    const int slot = (int)(c->released % PLEXUS_STEPS);
    if (api.hasIrecvConsumed()) {
      ncclResult_t r = api.irecvConsumed(c->comm, 1, c->requests[slot]);
      if (r != ncclSuccess) return failed(*c, r, "irecvConsumed", error, errorLen);
    }
    c->requests[slot] = nullptr;
    NCCLCHECK(releaseStepMemory(c, slot, error, errorLen));
    moved = true;
  }
  // Only steps the kernel will consume: a receive posted for data that never comes would fail when
  // the peer closes its side.
  const uint64_t wanted = __atomic_load_n(&c->ctrl->wanted, __ATOMIC_ACQUIRE);
  while (c->posted < wanted && c->posted < c->released + PLEXUS_STEPS) {
    const int slot = (int)(c->posted % PLEXUS_STEPS);
    void* data = nullptr;
    size_t size = (size_t)c->stepSize;
    void* mhandle = nullptr;
    NCCLCHECK(stepMemory(c, slot, &data, &size, &mhandle, error, errorLen));
    int tag = c->peer;
    void* req = nullptr;
    c->phandles[slot] = c->stepHandle(c->posted);  // kept: a plugin may read it until the receive completes
    ncclResult_t r = api.irecv(c->comm, 1, &data, &size, &tag, &mhandle, &c->phandles[slot], &req);
    if (r != ncclSuccess) return failed(*c, r, "irecv", error, errorLen);
    if (c->completed == c->posted) NCCLCHECK(refused(c, req != nullptr, error, errorLen));
    if (!req) break;
    c->requests[slot] = req;
    c->posted++;
    moved = true;
  }
  while (c->completed < c->posted) {
    const int slot = (int)(c->completed % PLEXUS_STEPS);
    if (!c->flushing) {
      int done = 0, size = kSizeUnset;
      ncclResult_t r = api.test(c->requests[slot], &done, &size);
      if (r != ncclSuccess) return failed(*c, r, "a receive (test)", error, errorLen);
      if (!done) break;
      if (size == kSizeUnset) size = c->stepSize;  // plugins in the field leave it unfilled: the whole slot, then
      if (size < 0 || size > c->stepSize)
        return failed(*c, ncclInternalError, "a receive reporting a bad size", error, errorLen);
      // Receives into GPU memory (GPUDirect) get an iflush before the kernel sees them: the NIC may still hold
      // their writes when the request completes. Never host memory, forceFlush or not: NCCL flushes only GDR
      // receives, and plugins in the field fail iflush on host memory.
      if (c->gdr && size > 0) {
        c->flushing = kFlushPending;
        c->flushSize = size;
      }
    }
    if (c->flushing == kFlushPending) {
      void* data = c->buff + (size_t)slot * c->stepSize;
      void* req = nullptr;
      ncclResult_t r = api.iflush(c->comm, 1, &data, &c->flushSize, &c->mhandle, &req);
      if (r != ncclSuccess) return failed(*c, r, "iflush", error, errorLen);
      if (!req) break;  // the plugin is full: ask again on a later pass
      c->flushing = req;
      moved = true;
    }
    if (c->flushing) {
      int done = 0;
      ncclResult_t r = api.test(c->flushing, &done, nullptr);
      if (r != ncclSuccess) return failed(*c, r, "a flush (test)", error, errorLen);
      if (!done) break;
      c->flushing = nullptr;
    }
    c->completed++;
    __atomic_store_n(&c->ctrl->tail, c->completed, __ATOMIC_RELEASE);  // the kernel may read the slot
    moved = true;
  }
  // Posted receives wait for the peer; a kernel that wants one keeps the proxy running (a launch).
  *idle = !moved;
  return ncclSuccess;
}

ncclResult_t netProxyProgress(void* resources, int* idle, char* error, int errorLen) {
  auto* c = (NetConn*)resources;
  *idle = 1;
  if (!c->comm) return ncclSuccess;
  return c->isSend ? sendProgress(c, idle, error, errorLen) : recvProgress(c, idle, error, errorLen);
}

ncclResult_t netFinalize(void*) { return ncclSuccess; }

}  // namespace

void netTransportSetProfile(void* resources, ProxyProfile* profile) { ((NetConn*)resources)->profile = profile; }

ncclResult_t netTransportDeregister(void* resources) {
  auto* c = (NetConn*)resources;
  if (!c->mhandle || !c->comm) return ncclSuccess;
  const ncclResult_t r = c->plugin().api->deregMr(c->comm, c->mhandle);
  c->mhandle = nullptr;
  return r == ncclSuccess ? r : fail(*c, r, "deregMr of the connection's buffer (ncclCommSuspend)");
}

ncclResult_t netTransportReregister(void* resources, plexusConnInfo_v1_t* conn) {
  auto* c = (NetConn*)resources;
  if (c->mhandle || !c->comm) return ncclSuccess;
  NCCLCHECK(registerBuffer(c));
  conn->mhandles[PLEXUS_PROTO_SIMPLE] = c->mhandle;
  return ncclSuccess;
}

const plexusTransport_v1_t netTransport = {
    PLEXUS_TRANSPORT_ABI_VERSION,
    sizeof(plexusTransport_v1_t),
    "net",
    netInit,
    netCanConnect,
    netSendSetup,
    netRecvSetup,
    netSendConnect,
    netRecvConnect,
    nullptr, /* connected */
    netFree,
    netFree,
    netProxyProgress,
    netFinalize,
    netCommInit,
    netCommFinalize,
    nullptr, /* p2pDescribe: messages between nodes cross the network, through the slots */
    nullptr, /* p2pWrite */
};

}  // namespace plexus
