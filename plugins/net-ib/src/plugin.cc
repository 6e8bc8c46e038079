// net-ib: an NCCL net plugin for InfiniBand and RoCE on rdma-core's libibverbs (opened at run time), at ncclNet_v12
// semantics, exported as ncclNetPlugin_v12 and, through plexus/net_export.h, v11..v8.
//
// Connection: listen() opens a TCP socket and writes {magic, nonce, address} into the handle. connect() reaches it
// without blocking, creates its queue pairs and sends their description (QpInfo); accept() creates its own from
// the sender's count, moves them to RTS, posts its receives and answers with its description; the sender moves
// its queue pairs to RTS and sends one byte, after which the receiver may post clear-to-send entries into the
// sender's memory. The socket is closed then: a dead peer shows as a failed work request (retries exhausted).
// Data: engine.h.
#include <dirent.h>
#include <plexus/net.h>
#include <plexus/socket.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>

#include "config.h"
#include "device.h"
#include "engine.h"
#include "log.h"
#include "verbs_wire.h"

namespace plexus::net_ib {
namespace {

using namespace ::plexus::sdk;

constexpr uint64_t kHandleMagic = 0x3062692d78656c70ull;  // "plex-ib0"
struct Handle {
  uint64_t magic;
  uint64_t nonce;
  SockAddr addr;
};
static_assert(sizeof(Handle) <= NCCL_NET_HANDLE_MAXSIZE, "the listen handle must fit in NCCL's");

struct Mr {
  ibv_mr* mr;
  bool cached;  // from the device's registration cache (else a dmabuf registration of its own)
  int type;     // NCCL_PTR_HOST, NCCL_PTR_CUDA, NCCL_PTR_DMABUF
  Device* dev;
};

// One side of a connection: its queue pairs, the engine's shared area and the handshake in progress.
struct Comm {
  Device* dev = nullptr;
  bool recv = false;
  Socket sock;
  std::string peer;  // the handshake address, for messages
  std::unique_ptr<VerbsWire> wire{new VerbsWire};
  void* shared = nullptr;
  ibv_mr* sharedMr = nullptr;
  std::unique_ptr<Engine> engine;
  int step = 0;
  uint64_t nonce = 0;
  QpInfo mine{}, theirs{};
  size_t done = 0;
  char ready = 1;

  ~Comm() {
    engine.reset();
    wire.reset();  // queue pairs go before the memory they may still touch
    if (sharedMr) verbs(nullptr)->deregMr(sharedMr);
    free(shared);
  }

  // Queue pairs in INIT and the shared area registered; mine describes them.
  bool setup(Device* d, int nqps, std::string* error) {
    dev = d;
    const size_t size = recv ? sizeof(RecvShared) : sizeof(SendShared);
    shared = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
    if (!shared) {
      *error = "out of memory";
      return false;
    }
    memset(shared, 0, size);
    sharedMr = verbs(error)->regMr(d->pd, shared, size,
                                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (!sharedMr) {
      *error = "ibv_reg_mr of the connection's FIFO failed: " + std::string(strerror(errno));
      return false;
    }
    if (!wire->create(d, nqps, recv && (d->gdr || d->dmabuf), error)) return false;
    wire->describe(&mine);
    mine.nqps = (uint32_t)nqps;  // the data queue pairs only: the flush one stays on this side
    mine.sharedAddr = (uint64_t)(uintptr_t)shared;
    mine.sharedRkey = sharedMr->rkey;
    return true;
  }

  bool start(std::string* error) {
    if (!wire->connect(theirs, error)) return false;
    engine.reset(
        new Engine(wire.get(), (int)theirs.nqps, shared, sharedMr->lkey, {theirs.sharedAddr, theirs.sharedRkey}));
    if (recv && !engine->start()) {
      *error = engine->error();
      return false;
    }
    return true;
  }
};

struct Listen {
  Device* dev;
  Socket sock;
  uint64_t nonce;
  std::unique_ptr<Comm> pending;  // an accept in progress
};

struct Context {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<Comm>> connecting;  // by handle contents and device
};

Device* deviceAt(int dev, const char* call) {
  const std::vector<Device*>& list = devices(nullptr);
  if (dev < 0 || dev >= (int)list.size()) {
    IB_WARN("%s(): there is no device %d (devices() reports %d)", call, dev, (int)list.size());
    return nullptr;
  }
  return list[dev];
}

// Where a device's handshake socket listens: as NCCL's IB transport, on the interface NCCL_SOCKET_IFNAME names
// (prefix, '=' exact, '^' exclude) when it is set; else on the HCA's own netdev (RoCE, IPoIB) if it has an
// address; else on the first interface up that is not loopback; else loopback.
bool handshakeAddress(Device* d, SockAddr* out) {
  const std::map<std::string, InterfaceAddress> addrs = interfaceAddresses();
  const HcaFilter named = HcaFilter::parse(getenv("NCCL_SOCKET_IFNAME"));  // the same list syntax, without ports
  const InterfaceAddress* pick = nullptr;
  auto consider = [&](const InterfaceAddress& a) {
    if (!pick || a.rank < pick->rank) pick = &a;
  };
  if (!named.entries.empty()) {
    for (const auto& [name, a] : addrs)
      if (named.keeps(name, -1)) consider(a);
  } else {
    if (DIR* dir = opendir(("/sys/class/infiniband/" + d->hca + "/device/net").c_str())) {
      while (dirent* e = readdir(dir))
        if (e->d_name[0] != '.' && addrs.count(e->d_name)) consider(addrs.at(e->d_name));
      closedir(dir);
    }
    if (!pick)
      for (const auto& [name, a] : addrs)
        if (!a.loopback) consider(a);
    if (!pick && addrs.count("lo")) consider(addrs.at("lo"));
  }
  if (!pick) return false;
  *out = pick->addr;
  return true;
}

ncclResult_t engineError(Engine* e, const char* call, Comm* c) {
  IB_WARN("%s() on %s (peer %s): %s", call, c->dev->name.c_str(), c->peer.c_str(), e->error().c_str());
  return e->remoteFailure() ? ncclRemoteError : ncclInternalError;
}

bool deviceFailed(Comm* c, const char* call) {
  const std::string why = deviceError(c->dev);
  if (why.empty()) return false;
  IB_WARN("%s(): %s; the connection to %s cannot carry traffic", call, why.c_str(), c->peer.c_str());
  return true;
}

// ---- entry points ----

ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t logger,
                  ncclProfilerCallback_t profiler) {
  (void)commId, (void)config, (void)profiler;
  gLog.setLogger(logger);
  if (!ctx) {
    IB_WARN("init(): ctx is NULL");
    return ncclInvalidArgument;
  }
  static std::once_flag once;
  std::call_once(once, [] {
    std::string why;
    const std::vector<Device*>& list = devices(&why);
    const Knobs& k = knobs();
    if (list.empty())
      IB_INFO(NCCL_INIT | NCCL_NET, "no RDMA device: %s; the next net plugin is used", why.c_str());
    else
      IB_INFO(NCCL_INIT | NCCL_NET,
              "%d device(s); NCCL_IB_HCA=%s, %d queue pair(s) per connection, timeout %d, retry "
              "count %d, SL %d, TC %d",
              (int)list.size(), k.hca.describe().c_str(), k.qpsPerConnection, k.timeout, k.retryCount, k.serviceLevel,
              k.trafficClass);
  });
  *ctx = new Context;
  return ncclSuccess;
}

ncclResult_t finalize(void* ctx) {
  delete static_cast<Context*>(ctx);
  return ncclSuccess;
}

ncclResult_t devicesCount(int* ndev) {
  if (!ndev) {
    IB_WARN("devices(): ndev is NULL");
    return ncclInvalidArgument;
  }
  *ndev = (int)devices(nullptr).size();
  return ncclSuccess;
}

ncclResult_t getProperties(int dev, ncclNetProperties_v12_t* props) {
  Device* d = deviceAt(dev, "getProperties");
  if (!d || !props) return ncclInvalidArgument;
  memset(props, 0, sizeof(*props));
  props->name = const_cast<char*>(d->name.c_str());
  props->pciPath = d->pciPath.empty() ? nullptr : const_cast<char*>(d->pciPath.c_str());
  props->guid = d->guid;
  props->ptrSupport = NCCL_PTR_HOST | (d->gdr ? NCCL_PTR_CUDA : 0) | (d->dmabuf ? NCCL_PTR_DMABUF : 0);
  props->regIsGlobal = 1;  // the registration cache serves any comm of the device
  props->forceFlush = 0;
  props->speed = d->speedMbps;
  props->port = d->port;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = kMaxRecvs;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = MAX_NET_SIZE;
  props->maxCollBytes = MAX_NET_SIZE;
  props->maxMultiRequestSize = 1;
  props->railId = NCCL_NET_ID_UNDEF;
  props->planeId = NCCL_NET_ID_UNDEF;
  return ncclSuccess;
}

ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) {
  (void)ctx;
  Device* d = deviceAt(dev, "listen");
  if (!d || !handle || !listenComm) return ncclInvalidArgument;
  SockAddr at{}, bound{};
  if (!handshakeAddress(d, &at)) {
    IB_WARN("listen() on %s: no interface with an IP address for the handshake (set NCCL_SOCKET_IFNAME)",
            d->name.c_str());
    return ncclSystemError;
  }
  auto l = std::make_unique<Listen>();
  l->dev = d;
  if (int err = socketListen(at, &l->sock, &bound)) {
    IB_WARN("listen() on %s at %s: %s", d->name.c_str(), sockName(at).c_str(), strerror(err));
    return ncclSystemError;
  }
  l->nonce = std::random_device{}() | (uint64_t)std::random_device{}() << 32;
  Handle h{kHandleMagic, l->nonce, bound};
  memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  memcpy(handle, &h, sizeof h);
  *listenComm = l.release();
  return ncclSuccess;
}

// One step of a handshake's socket traffic: true when the transfer is complete, false to come back later;
// *failed set on an error.
bool transfer(Comm* c, bool send, void* buf, size_t len, std::string* failed) {
  const int err = send ? socketSend(c->sock, buf, len, &c->done) : socketRecv(c->sock, buf, len, &c->done);
  if (err == EAGAIN) return false;
  if (err) {
    *failed = ioError(err);
    return false;
  }
  c->done = 0;
  return true;
}

ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t** sendDevComm) {
  if (sendDevComm) *sendDevComm = nullptr;
  Context* cx = static_cast<Context*>(ctx);
  Device* d = deviceAt(dev, "connect");
  if (!cx || !d || !handle || !sendComm) return ncclInvalidArgument;
  *sendComm = nullptr;
  Handle h;
  memcpy(&h, handle, sizeof h);
  if (h.magic != kHandleMagic || !sockValid(h.addr)) {
    IB_WARN(
        "connect(): the handle is not one that listen() of this plugin wrote; carry listen()'s %d bytes to "
        "connect() unchanged, with the same plugin on both sides",
        NCCL_NET_HANDLE_MAXSIZE);
    return ncclInvalidArgument;
  }
  std::lock_guard<std::mutex> lock(cx->mutex);
  const std::string key = std::string((const char*)&h, sizeof h) + "/" + std::to_string(dev);
  auto it = cx->connecting.find(key);
  std::string error;
  if (it == cx->connecting.end()) {
    auto c = std::make_unique<Comm>();
    c->peer = sockName(h.addr);
    c->nonce = h.nonce;
    if (int err = socketConnect(h.addr, &c->sock)) {
      IB_WARN("connect() to %s: %s", c->peer.c_str(), strerror(err));
      return ncclRemoteError;
    }
    if (!c->setup(d, knobs().qpsPerConnection, &error)) {
      IB_WARN("connect() on %s: %s", d->name.c_str(), error.c_str());
      return ncclSystemError;
    }
    it = cx->connecting.emplace(key, std::move(c)).first;
  }
  Comm* c = it->second.get();
  for (;;) {
    bool advanced = false;
    switch (c->step) {
      case 0: {
        const int err = socketConnected(c->sock);
        if (err && err != EAGAIN) error = strerror(err);
        advanced = err == 0;
        break;
      }
      case 1: {
        char hello[sizeof(uint64_t) + sizeof(QpInfo)];
        memcpy(hello, &c->nonce, sizeof(uint64_t));
        memcpy(hello + sizeof(uint64_t), &c->mine, sizeof(QpInfo));
        advanced = transfer(c, true, hello, sizeof hello, &error);
        break;
      }
      case 2:
        advanced = transfer(c, false, &c->theirs, sizeof c->theirs, &error);
        if (advanced && (c->theirs.magic != kQpInfoMagic || c->theirs.nqps != c->mine.nqps))
          error = "the receiver answered with something that is not this plugin's connection info";
        else if (advanced)
          c->start(&error);
        break;
      case 3:
        advanced = transfer(c, true, &c->ready, 1, &error);
        break;
    }
    if (!error.empty()) {
      IB_WARN("connect() to %s over %s: %s", c->peer.c_str(), d->name.c_str(), error.c_str());
      cx->connecting.erase(it);
      return ncclRemoteError;
    }
    if (!advanced) return ncclSuccess;  // not yet: NCCL calls again
    if (++c->step == 4) break;
  }
  c->sock.reset();
  *sendComm = it->second.release();
  cx->connecting.erase(it);
  return ncclSuccess;
}

ncclResult_t accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v12_t** recvDevComm) {
  if (recvDevComm) *recvDevComm = nullptr;
  Listen* l = static_cast<Listen*>(listenComm);
  if (!l || !recvComm) return ncclInvalidArgument;
  *recvComm = nullptr;
  std::string error;
  if (!l->pending) {
    Socket s;
    SockAddr peer{};
    const int err = socketAccept(l->sock, &s, &peer);
    if (err == EAGAIN) return ncclSuccess;
    if (err) {
      IB_WARN("accept() on %s: %s", l->dev->name.c_str(), strerror(err));
      return ncclSystemError;
    }
    l->pending.reset(new Comm);
    l->pending->recv = true;
    l->pending->dev = l->dev;
    l->pending->sock = std::move(s);
    l->pending->peer = sockName(peer);
  }
  Comm* c = l->pending.get();
  for (;;) {
    bool advanced = false;
    switch (c->step) {
      case 0: {
        char hello[sizeof(uint64_t) + sizeof(QpInfo)];
        advanced = transfer(c, false, hello, sizeof hello, &error);
        if (!advanced) break;
        uint64_t nonce;
        memcpy(&nonce, hello, sizeof nonce);
        memcpy(&c->theirs, hello + sizeof nonce, sizeof(QpInfo));
        if (nonce != l->nonce || c->theirs.magic != kQpInfoMagic || c->theirs.nqps < 1 || c->theirs.nqps > 16)
          error = "a connection that is not from this plugin's connect() with this listen handle";
        else if (c->setup(l->dev, (int)c->theirs.nqps, &error))
          c->start(&error);
        break;
      }
      case 1:
        advanced = transfer(c, true, &c->mine, sizeof c->mine, &error);
        break;
      case 2:
        advanced = transfer(c, false, &c->ready, 1, &error);
        break;
    }
    if (!error.empty()) {
      IB_WARN("accept() from %s on %s: %s", c->peer.c_str(), l->dev->name.c_str(), error.c_str());
      l->pending.reset();
      return ncclRemoteError;
    }
    if (!advanced) return ncclSuccess;
    if (++c->step == 3) break;
  }
  c->sock.reset();
  *recvComm = l->pending.release();
  return ncclSuccess;
}

ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  Comm* c = static_cast<Comm*>(comm);
  if (!c || !mhandle) return ncclInvalidArgument;
  if (type == NCCL_PTR_CUDA && !c->dev->gdr) {
    IB_WARN(
        "regMr(): CUDA memory on %s needs GPUDirect RDMA (the nvidia-peermem kernel module) or dmabuf "
        "(regMrDmaBuf); neither is available",
        c->dev->name.c_str());
    return ncclInternalError;
  }
  std::string error;
  void* mr = c->dev->cache->acquire(data, size, &error);
  if (!mr) {
    IB_WARN("regMr() of %zu B at %p on %s: %s", size, data, c->dev->name.c_str(), error.c_str());
    return ncclSystemError;
  }
  *mhandle = new Mr{static_cast<ibv_mr*>(mr), true, type, c->dev};
  return ncclSuccess;
}

ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  Comm* c = static_cast<Comm*>(comm);
  if (!c || !mhandle) return ncclInvalidArgument;
  if (fd < 0) return regMr(comm, data, size, type, mhandle);
  const Verbs* v = verbs(nullptr);
  if (!c->dev->dmabuf || !v->regDmabufMr) {
    IB_WARN("regMrDmaBuf(): %s does not take dmabuf registrations (kernel or rdma-core too old)", c->dev->name.c_str());
    return ncclInternalError;
  }
  ibv_mr* mr = v->regDmabufMr(c->dev->pd, offset, size, (uint64_t)(uintptr_t)data, fd,
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!mr) {
    IB_WARN("ibv_reg_dmabuf_mr of %zu B on %s: %s", size, c->dev->name.c_str(), strerror(errno));
    return ncclSystemError;
  }
  *mhandle = new Mr{mr, false, NCCL_PTR_DMABUF, c->dev};
  return ncclSuccess;
}

ncclResult_t deregMr(void* comm, void* mhandle) {
  (void)comm;
  Mr* m = static_cast<Mr*>(mhandle);
  if (!m) return ncclInvalidArgument;
  if (m->cached)
    m->dev->cache->release(m->mr);
  else
    verbs(nullptr)->deregMr(m->mr);
  delete m;
  return ncclSuccess;
}

ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request) {
  (void)phandle;
  Comm* c = static_cast<Comm*>(sendComm);
  Mr* m = static_cast<Mr*>(mhandle);
  if (!c || !request || (!m && size)) return ncclInvalidArgument;
  if (deviceFailed(c, "isend")) return ncclRemoteError;
  Request* r = nullptr;
  if (!c->engine->isend(data, size, tag, m ? m->mr->lkey : 0, &r)) return engineError(c->engine.get(), "isend", c);
  *request = r;
  return ncclSuccess;
}

ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                   void** request) {
  (void)phandles;
  Comm* c = static_cast<Comm*>(recvComm);
  if (!c || !request || n < 1 || n > kMaxRecvs) return ncclInvalidArgument;
  if (deviceFailed(c, "irecv")) return ncclRemoteError;
  uint32_t rkeys[kMaxRecvs];
  for (int i = 0; i < n; i++) {
    Mr* m = static_cast<Mr*>(mhandles[i]);
    rkeys[i] = m ? m->mr->rkey : 0;
  }
  Request* r = nullptr;
  if (!c->engine->irecv(n, data, sizes, tags, rkeys, &r)) return engineError(c->engine.get(), "irecv", c);
  *request = r;
  return ncclSuccess;
}

ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  Comm* c = static_cast<Comm*>(recvComm);
  if (!c || !request) return ncclInvalidArgument;
  *request = nullptr;
  // Only GPU memory written by the NIC needs it (NCCL's rule); host memory is coherent already.
  uint32_t rkeys[kMaxRecvs];
  void* bufs[kMaxRecvs];
  int k = 0;
  for (int i = 0; i < n && i < kMaxRecvs; i++) {
    Mr* m = static_cast<Mr*>(mhandles[i]);
    if (m && m->type != NCCL_PTR_HOST && sizes[i] > 0) rkeys[k] = m->mr->rkey, bufs[k++] = data[i];
  }
  if (k == 0 || !knobs().gdrFlush) return ncclSuccess;
  Request* r = nullptr;
  if (!c->engine->iflush(k, bufs, rkeys, &r)) return engineError(c->engine.get(), "iflush", c);
  *request = r;
  return ncclSuccess;
}

ncclResult_t test(void* request, int* done, int* sizes) {
  Request* r = static_cast<Request*>(request);
  Engine* e = Engine::of(r);
  if (!e || !done) return ncclInvalidArgument;
  if (!e->test(r, done, sizes)) {
    IB_WARN("test(): %s", e->error().c_str());
    return e->remoteFailure() ? ncclRemoteError : ncclInternalError;
  }
  return ncclSuccess;
}

ncclResult_t closeComm(void* comm) {
  delete static_cast<Comm*>(comm);
  return ncclSuccess;
}

ncclResult_t closeListen(void* listenComm) {
  delete static_cast<Listen*>(listenComm);
  return ncclSuccess;
}

}  // namespace
}  // namespace plexus::net_ib

extern "C" {
__attribute__((visibility("default"))) extern const ncclNet_v12_t ncclNetPlugin_v12;
}

namespace pi = plexus::net_ib;
// One member a line, in the ABI's order.
// clang-format off
const ncclNet_v12_t ncclNetPlugin_v12 = {
    "IB",
    pi::init,
    pi::devicesCount,
    pi::getProperties,
    pi::listen,
    pi::connect,
    pi::accept,
    pi::regMr,
    pi::regMrDmaBuf,
    pi::deregMr,
    pi::isend,
    pi::irecv,
    pi::iflush,
    pi::test,
    pi::closeComm,
    pi::closeComm,
    pi::closeListen,
    nullptr,  // getDeviceMr: host device
    nullptr,  // irecvConsumed: host device
    nullptr,  // makeVDevice: one device per port
    pi::finalize,
    nullptr,  // setNetAttr: no use for the hints
};
// clang-format on

#define PLEXUS_NET_EXPORT_IMPL ncclNetPlugin_v12
#include <plexus/net_export.h>
PLEXUS_NET_EXPORT_V11
PLEXUS_NET_EXPORT_V10
PLEXUS_NET_EXPORT_V9
PLEXUS_NET_EXPORT_V8
