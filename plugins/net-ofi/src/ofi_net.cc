// net-ofi: NCCL's net plugin ABI over libfabric RDM endpoints and tagged messages. The entry points
// below are the C boundary: they check what the runtime hands in, take the domain's lock, and turn
// every failure into an ncclResult_t with a log line. Written at v12; net_export.h exports the same
// table as ncclNetPlugin_v11 .. _v8 too, so NCCL 2.20+ and Plexus load it (NCCL_NET_PLUGIN=ofi).
#include <rdma/fi_errno.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <new>

#include "ofi_comm.h"

namespace plexus::ofi {

std::atomic<ncclDebugLogger_t> gLogger{nullptr};

long envInt(const char* name, long fallback) {
  std::string full = std::string("PLEXUS_") + name;
  const char* v = getenv(full.c_str());
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long x = strtol(v, &end, 0);
  if (*end) {
    OFI_WARN("%s=%s is not an integer; using %ld", full.c_str(), v, fallback);
    return fallback;
  }
  return x;
}

ncclResult_t classifyError(long err) {
  switch (err < 0 ? -err : err) {  // libfabric's codes are errno's, FI_ETRUNC and the like aside
    case FI_ETRUNC:
      return ncclInvalidUsage;  // a send larger than the receive it matched
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case ENOTCONN:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ETIMEDOUT:
    case EPIPE:
    case EADDRNOTAVAIL:
    case ESHUTDOWN:
    case EIO:
    case ENOENT:     // sockets: no connection to that address
    case ECANCELED:  // net: operations of a connection that broke (ours are cancelled only on close)
    case FI_ENORX:
      return ncclRemoteError;
    default:
      return ncclSystemError;
  }
}

uint64_t localHostId() {
  static const uint64_t id = [] {
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string bootId;
    char ns[64] = {};
    if (!(boot >> bootId) || readlink("/proc/self/ns/pid", ns, sizeof ns - 1) <= 0) return uint64_t(0);
    std::string both = bootId + "/" + ns;
    return fnv1a(both.data(), both.size()) | 1;  // never 0
  }();
  return id;
}

namespace {

// One per init(): NCCL 2.28+ and Plexus make one per communicator; older NCCLs one per process.
struct Context {
  static constexpr uint32_t kMagic = 0x4f464358;  // "OFCX"
  uint32_t magic = kMagic;
  uint64_t commId = 0;
  int trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF;
  std::mutex mutex;
  std::vector<std::shared_ptr<Endpoint>> endpoints;  // per device, opened at first use
  // Connections in progress, by the listen handle's contents: connect() finds its comm again whether
  // the runtime passes the same handle buffer each time (NCCL) or a fresh copy (Plexus).
  std::map<std::string, SendComm*> connecting;

  ncclResult_t endpoint(int dev, std::shared_ptr<Endpoint>* out) {  // mutex held
    if (!endpoints[dev]) OFI_CHECK(Endpoint::create(dev, trafficClass, commId, &endpoints[dev]));
    *out = endpoints[dev];
    return ncclSuccess;
  }
};

Context* asContext(void* ctx, const char* caller) {
  auto* c = static_cast<Context*>(ctx);
  if (c && c->magic == Context::kMagic) return c;
  OFI_WARN("%s: %p is not a context this plugin's init() made (finalized already?)", caller, ctx);
  return nullptr;
}

template <class T>
T* asComm(void* comm, Comm::Kind kind, const char* caller) {
  auto* c = static_cast<Comm*>(comm);
  if (c && c->magic == Comm::kMagic && c->kind == kind) return static_cast<T*>(c);
  OFI_WARN("%s: %p is not an open comm of the kind this call takes (closed already?)", caller, comm);
  return nullptr;
}

Comm* asDataComm(void* comm, const char* caller) {
  auto* c = static_cast<Comm*>(comm);
  if (c && c->magic == Comm::kMagic && c->kind != Comm::Kind::Listen) return c;
  OFI_WARN("%s: %p is not an open send or receive comm", caller, comm);
  return nullptr;
}

// A receive already matched cannot be cancelled, nor can a send be taken back: their data goes on moving into or
// out of the runtime's buffer, which the runtime frees once the close returns. So the close progresses until
// they end, or the peer is known gone and what it sent had a moment to land, or the close timeout passes.
// Endpoint lock held.
void drainInFlight(Comm& c, Endpoint& ep) {
  static const long closeTimeoutMs = envInt("OFI_CLOSE_TIMEOUT_MS", 5000);
  constexpr auto kLandGrace = std::chrono::milliseconds(50);
  const auto start = Clock::now(), deadline = start + std::chrono::milliseconds(closeTimeoutMs);
  Clock::time_point goneAt{}, nextCheck = start;
  while (c.outstanding() > 0) {
    (void)ep.progress();
    const auto now = Clock::now();
    if (goneAt == Clock::time_point{} && now >= nextCheck) {
      nextCheck = now + std::chrono::milliseconds(10);
      if (c.peerGone()) goneAt = now;
    }
    if (goneAt != Clock::time_point{} && now - goneAt >= kLandGrace) return;
    if (now >= deadline) {
      OFI_WARN(
          "closing the %s comm with %s: %d transfer(s) still in flight after %ld ms; the provider may still move "
          "their data after the close. Raise PLEXUS_OFI_CLOSE_TIMEOUT_MS if the peer is only slow",
          c.kind == Comm::Kind::Send ? "send" : "receive", c.peerName().c_str(), c.outstanding(), closeTimeoutMs);
      return;
    }
  }
}

// Closes a comm whatever its state: receives still posted are cancelled, transfers already moving waited for; a
// comm with operations still in libfabric's hands is freed by its endpoint once they end (or with the endpoint).
void closeComm(Comm* c) {
  std::shared_ptr<Endpoint> ep = c->endpointRef();  // keeps the endpoint past the lock below
  std::deque<RecvComm*> accepting;
  {
    std::lock_guard<std::mutex> lock(ep->mutex());
    c->shutdown();
    if (c->kind == Comm::Kind::Listen) accepting = static_cast<ListenComm*>(c)->takeAll();
    (void)ep->progress();  // reap the cancellations already there; a failure changes nothing now
    if (c->kind != Comm::Kind::Listen) drainInFlight(*c, *ep);
    if (c->outstanding() == 0) {
      delete c;
    } else {
      c->dropEndpointRef();
      ep->adoptZombie(c);
    }
  }
  for (RecvComm* r : accepting) closeComm(r);
}

ncclResult_t ofiInit(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t logger,
                     ncclProfilerCallback_t) {
  if (!ctx) return ncclInvalidArgument;
  *ctx = nullptr;
  ncclDebugLogger_t none = nullptr;
  if (logger) gLogger.compare_exchange_strong(none, logger);
  OFI_CHECK(discoverDevices());
  auto* c = new (std::nothrow) Context;
  if (!c) return ncclSystemError;
  c->commId = commId;
  c->trafficClass = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
  c->endpoints.resize(devices().size());
  *ctx = c;
  return ncclSuccess;
}

ncclResult_t ofiDevices(int* ndev) {
  if (!ndev) return ncclInvalidArgument;
  *ndev = 0;
  OFI_CHECK(discoverDevices());
  *ndev = static_cast<int>(devices().size());
  return ncclSuccess;
}

ncclResult_t ofiGetProperties(int dev, ncclNetProperties_v12_t* props) {
  if (!props) return ncclInvalidArgument;
  OFI_CHECK(discoverDevices());
  OFI_CHECK(checkDevice(dev, "getProperties"));
  const Device& d = devices()[dev];
  Tags tags;
  tags.bits = d.tagBits;
  size_t maxBytes = std::min(d.maxMsgSize, kMaxMessageBytes);
  memset(props, 0, sizeof *props);
  props->name = const_cast<char*>(d.name.c_str());
  props->pciPath = d.pciPath.empty() ? nullptr : const_cast<char*>(d.pciPath.c_str());
  props->guid = d.guid;
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->speed = d.speedMbps;
  props->port = 0;
  props->latency = 0;  // libfabric gives no figure: the runtime's default
  props->maxComms = static_cast<int>(tags.maxIds() - 2);
  props->maxRecvs = kMaxRecvs;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = maxBytes;
  props->maxCollBytes = maxBytes;
  props->maxMultiRequestSize = 1;
  props->railId = NCCL_NET_ID_UNDEF;
  props->planeId = NCCL_NET_ID_UNDEF;
  return ncclSuccess;
}

ncclResult_t ofiListen(void* ctx, int dev, void* handle, void** listenComm) {
  if (!listenComm || !handle) return ncclInvalidArgument;
  *listenComm = nullptr;
  Context* c = asContext(ctx, "listen");
  if (!c) return ncclInvalidArgument;
  OFI_CHECK(checkDevice(dev, "listen"));
  std::shared_ptr<Endpoint> ep;
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    OFI_CHECK(c->endpoint(dev, &ep));
  }
  auto* l = new ListenComm(ep);
  ncclResult_t r;
  {
    std::lock_guard<std::mutex> lock(ep->mutex());
    r = l->start(static_cast<ListenHandle*>(handle));
  }
  if (r != ncclSuccess) {
    closeComm(l);
    return r;
  }
  *listenComm = l;
  return ncclSuccess;
}

ncclResult_t checkHandle(const ListenHandle& h, int dev) {
  if (h.magic != kWireMagic || h.version != kWireVersion || h.checksum != wireChecksum(h) || h.addrLen == 0 ||
      h.addrLen > kMaxAddrLen) {
    OFI_WARN(
        "connect: the handle is not one this plugin's listen() wrote (magic 0x%08x, version %u, checksum %s); "
        "pass connect() the %d bytes listen() produced, unchanged",
        h.magic, h.version, h.checksum == wireChecksum(h) ? "ok" : "wrong", NCCL_NET_HANDLE_MAXSIZE);
    return ncclInvalidArgument;
  }
  if (h.wireId != devices()[dev].wireId) {
    OFI_WARN(
        "connect: the handle comes from another provider or address format than device %d's (%s, %s); run "
        "every rank with the same FI_PROVIDER and interface knobs",
        dev, devices()[dev].name.c_str(), devices()[dev].provider.c_str());
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

ncclResult_t ofiConnect(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t** devComm) {
  if (!sendComm || !handle) return ncclInvalidArgument;
  *sendComm = nullptr;
  Context* c = asContext(ctx, "connect");
  if (!c) return ncclInvalidArgument;
  OFI_CHECK(checkDevice(dev, "connect"));
  ListenHandle h;
  memcpy(&h, handle, sizeof h);
  OFI_CHECK(checkHandle(h, dev));

  std::lock_guard<std::mutex> lock(c->mutex);
  std::string key(reinterpret_cast<const char*>(&h), offsetof(ListenHandle, checksum));
  key.push_back(static_cast<char>(dev));
  auto it = c->connecting.find(key);
  if (it == c->connecting.end()) {
    std::shared_ptr<Endpoint> ep;
    OFI_CHECK(c->endpoint(dev, &ep));
    auto* s = new SendComm(ep);
    ncclResult_t r;
    {
      std::lock_guard<std::mutex> epLock(ep->mutex());
      r = s->start(h);
    }
    if (r != ncclSuccess) {
      closeComm(s);
      return r;
    }
    it = c->connecting.emplace(std::move(key), s).first;
  }
  SendComm* s = it->second;
  ncclResult_t r;
  bool ready;
  {
    std::lock_guard<std::mutex> epLock(s->ep().mutex());
    r = s->ep().progress();
    if (r == ncclSuccess) r = s->failure();
    ready = s->ready();
  }
  if (r != ncclSuccess) {
    c->connecting.erase(it);
    closeComm(s);
    return r;
  }
  if (ready) {
    c->connecting.erase(it);
    if (devComm) *devComm = nullptr;  // host memory only: no device-side handle
    *sendComm = s;
  }
  return ncclSuccess;
}

ncclResult_t ofiAccept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v12_t** devComm) {
  if (!recvComm) return ncclInvalidArgument;
  *recvComm = nullptr;
  auto* l = asComm<ListenComm>(listenComm, Comm::Kind::Listen, "accept");
  if (!l) return ncclInvalidArgument;
  RecvComm *ready, *failed;
  ncclResult_t r;
  {
    std::lock_guard<std::mutex> lock(l->ep().mutex());
    r = l->ep().progress();
    if (r == ncclSuccess) r = l->failure();
    l->takeAccepted(&ready, &failed);
  }
  if (ready) {
    if (devComm) *devComm = nullptr;
    *recvComm = ready;
    return ncclSuccess;
  }
  if (failed) {  // its failure was logged with the reason
    ncclResult_t f = failed->failure();
    closeComm(failed);
    return f;
  }
  return r;
}

ncclResult_t ofiRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (!mhandle) return ncclInvalidArgument;
  *mhandle = nullptr;
  Comm* c = asDataComm(comm, "regMr");
  if (!c) return ncclInvalidArgument;
  if (type != NCCL_PTR_HOST) {
    OFI_WARN("regMr: memory type %d; this plugin moves host memory only (ptrSupport NCCL_PTR_HOST)", type);
    return ncclInvalidArgument;
  }
  auto m = std::make_unique<MemoryRegion>();
  m->ep = c->endpointRef();
  // With no FI_MR_LOCAL the provider takes any host buffer as it is: the handle only says so.
  // PLEXUS_OFI_MR_REGISTER=1 registers anyway (for providers that are faster with registered memory).
  if (c->ep().device().registerAll) {
    std::lock_guard<std::mutex> lock(c->ep().mutex());
    OFI_CHECK(c->ep().registerMemory(data, size, &m->mr, &m->desc));
  }
  *mhandle = m.release();
  return ncclSuccess;
}

ncclResult_t ofiDeregMr(void*, void* mhandle) {
  auto* m = static_cast<MemoryRegion*>(mhandle);
  if (!m) return ncclSuccess;
  if (m->magic != MemoryRegion::kMagic) {
    OFI_WARN("deregMr: %p is not a registration this plugin made (deregistered twice?)", mhandle);
    return ncclInvalidArgument;
  }
  std::shared_ptr<Endpoint> ep = m->ep;  // outlives the lock: the registration may hold the last reference
  std::lock_guard<std::mutex> lock(ep->mutex());
  delete m;
  return ncclSuccess;
}

ncclResult_t ofiIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void*, void** request) {
  if (!request) return ncclInvalidArgument;
  *request = nullptr;
  auto* s = asComm<SendComm>(sendComm, Comm::Kind::Send, "isend");
  if (!s) return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(s->ep().mutex());
  return s->isend(data, size, tag, mhandle, request);
}

ncclResult_t ofiIrecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void**,
                      void** request) {
  if (!request) return ncclInvalidArgument;
  *request = nullptr;  // also clears NCCL_NET_OPTIONAL_RECV_COMPLETION: every receive completes here
  auto* r = asComm<RecvComm>(recvComm, Comm::Kind::Recv, "irecv");
  if (!r) return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(r->ep().mutex());
  return r->irecv(n, data, sizes, tags, mhandles, request);
}

// Host memory is coherent once the receive completes: nothing to flush, done at once (NULL request,
// as NCCL's own IB plugin answers when no flush is needed).
ncclResult_t ofiIflush(void* recvComm, int, void**, int*, void**, void** request) {
  if (!request) return ncclInvalidArgument;
  *request = nullptr;
  return asComm<RecvComm>(recvComm, Comm::Kind::Recv, "iflush") ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t ofiTest(void* request, int* done, int* sizes) {
  auto* r = static_cast<Request*>(request);
  if (!done || !r || r->magic != Request::kMagic || !r->held) {
    OFI_WARN("test: %p is not a request in flight (reported done already?)", request);
    return ncclInvalidArgument;
  }
  *done = 0;
  Comm* c = r->comm;
  std::lock_guard<std::mutex> lock(c->ep().mutex());
  if (c->kind == Comm::Kind::Send) return static_cast<SendComm*>(c)->test(*r, done, sizes);
  return static_cast<RecvComm*>(c)->test(*r, done, sizes);
}

ncclResult_t ofiCloseSend(void* sendComm) {
  if (!sendComm) return ncclSuccess;
  auto* s = asComm<SendComm>(sendComm, Comm::Kind::Send, "closeSend");
  if (!s) return ncclInvalidArgument;
  closeComm(s);
  return ncclSuccess;
}

ncclResult_t ofiCloseRecv(void* recvComm) {
  if (!recvComm) return ncclSuccess;
  auto* r = asComm<RecvComm>(recvComm, Comm::Kind::Recv, "closeRecv");
  if (!r) return ncclInvalidArgument;
  closeComm(r);
  return ncclSuccess;
}

ncclResult_t ofiCloseListen(void* listenComm) {
  if (!listenComm) return ncclSuccess;
  auto* l = asComm<ListenComm>(listenComm, Comm::Kind::Listen, "closeListen");
  if (!l) return ncclInvalidArgument;
  closeComm(l);
  return ncclSuccess;
}

// Comms outlive their context if the runtime closes them later: each holds its endpoint.
ncclResult_t ofiFinalize(void* ctx) {
  Context* c = asContext(ctx, "finalize");
  if (!c) return ncclInvalidArgument;
  std::map<std::string, SendComm*> connecting;
  std::vector<std::shared_ptr<Endpoint>> endpoints;
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    connecting.swap(c->connecting);
    endpoints.swap(c->endpoints);
  }
  for (auto& [key, s] : connecting) closeComm(s);
  endpoints.clear();
  c->magic = 0;
  delete c;
  return ncclSuccess;
}

// The one place where C++ failures become the ABI's result codes: nothing thrown crosses into the
// runtime (allocation is all that can throw here).
template <auto F>
struct Boundary;
template <class... A, ncclResult_t (*F)(A...)>
struct Boundary<F> {
  static ncclResult_t call(A... args) noexcept {
    try {
      return F(args...);
    } catch (const std::bad_alloc&) {
      OFI_WARN("out of memory; free some host memory or run fewer communicators per process");
      return ncclSystemError;
    } catch (const std::exception& e) {
      OFI_WARN("internal error: %s", e.what());
      return ncclInternalError;
    }
  }
};

}  // namespace
}  // namespace plexus::ofi

extern "C" {
__attribute__((visibility("default"))) extern const ncclNet_v12_t ncclNetPlugin_v12;
}

const ncclNet_v12_t ncclNetPlugin_v12 = {
    "OFI",
    plexus::ofi::Boundary<plexus::ofi::ofiInit>::call,
    plexus::ofi::Boundary<plexus::ofi::ofiDevices>::call,
    plexus::ofi::Boundary<plexus::ofi::ofiGetProperties>::call,
    plexus::ofi::Boundary<plexus::ofi::ofiListen>::call,
    plexus::ofi::Boundary<plexus::ofi::ofiConnect>::call,
    plexus::ofi::Boundary<plexus::ofi::ofiAccept>::call,
    plexus::ofi::Boundary<plexus::ofi::ofiRegMr>::call,
    nullptr,  // regMrDmaBuf: host memory only
    plexus::ofi::Boundary<plexus::ofi::ofiDeregMr>::call,
    plexus::ofi::Boundary<plexus::ofi::ofiIsend>::call,
    plexus::ofi::Boundary<plexus::ofi::ofiIrecv>::call,
    plexus::ofi::Boundary<plexus::ofi::ofiIflush>::call,
    plexus::ofi::Boundary<plexus::ofi::ofiTest>::call,
    plexus::ofi::Boundary<plexus::ofi::ofiCloseSend>::call,
    plexus::ofi::Boundary<plexus::ofi::ofiCloseRecv>::call,
    plexus::ofi::Boundary<plexus::ofi::ofiCloseListen>::call,
    nullptr,  // getDeviceMr: no device-side networking
    nullptr,  // irecvConsumed: idem
    nullptr,  // makeVDevice: no multi-NIC virtual devices (each device is one domain)
    plexus::ofi::Boundary<plexus::ofi::ofiFinalize>::call,
    nullptr,  // setNetAttr: no traffic hints used
};

#define PLEXUS_NET_EXPORT_IMPL ncclNetPlugin_v12
#include <plexus/net_export.h>
PLEXUS_NET_EXPORT_V11
PLEXUS_NET_EXPORT_V10
PLEXUS_NET_EXPORT_V9
PLEXUS_NET_EXPORT_V8
