// The socket net's C boundary: the ncclNet_v12_t table, argument checks, process-wide device state, and
// the per-communicator context. Everything else is in socket/.
#include "transport/net/socket_net.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "misc/check.h"
#include "misc/rand.h"
#include "transport/net/socket/comm.h"
#include "transport/net/socket/common.h"
#include "transport/net/socket/connect.h"

namespace plexus::socketnet {

namespace {

struct Device {
  std::string name;
  SocketAddress addr;
  std::string pciPath;  // empty: a virtual interface
  int speedMbps;
};

// Process-wide: the devices, found by the first init and kept until the last finalize.
struct Shared {
  std::mutex mutex;
  int refs = 0;
  std::vector<Device> devices;  // getProperties hands out pointers into these strings
};

Shared& shared() {
  static Shared s;
  return s;
}

// One per communicator (init .. finalize): its traffic class, and the connects in progress on its handles.
struct Context {
  uint64_t commId;
  int trafficClass;
  std::mutex mutex;
  std::unordered_map<uint64_t, std::unique_ptr<Connector>> pending;
  uint64_t nextId;
};

int readSpeedMbps(const std::string& ifName) {
  std::string path = "/sys/class/net/" + ifName + "/speed";
  int speed = 0;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[32] = {};
    ssize_t n = read(fd, buf, sizeof(buf) - 1);  // fails with EINVAL on interfaces without a link speed
    if (n > 0) speed = atoi(buf);
    close(fd);
  }
  return speed > 0 ? speed : 10000;  // as NCCL: unknown (loopback, virtual) counts as 10 Gb/s
}

std::string pciPathOf(const std::string& ifName) {
  std::string path = "/sys/class/net/" + ifName + "/device";
  char* real = realpath(path.c_str(), nullptr);
  if (!real) return "";
  std::string s = real;
  free(real);
  return s;
}

ncclResult_t discoverDevices(std::vector<Device>* out) {
  std::vector<NetInterface> ifs;
  NCCLCHECK(findInterfaces(kMaxDevices, &ifs, "NET/Socket"));
  std::string line;
  for (size_t i = 0; i < ifs.size(); i++) {
    Device d{ifs[i].name, ifs[i].addr, pciPathOf(ifs[i].name), readSpeedMbps(ifs[i].name)};
    std::string ip = toString(d.addr);
    line += " [" + std::to_string(i) + "]" + d.name + ":" + ip.substr(0, ip.rfind(':'));
    out->push_back(std::move(d));
  }
  INFO(NCCL_INIT | NCCL_NET, "NET/Socket: using%s", line.c_str());
  return ncclSuccess;
}

// Converts what escapes the C++ inside into a result at the C boundary.
template <typename F>
ncclResult_t guarded(const char* call, F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return setError(nullptr, ncclSystemError, "NET/Socket: %s: out of memory", call);
  } catch (const std::exception& e) {
    return setError(nullptr, ncclInternalError, "NET/Socket: %s: %s", call, e.what());
  }
}

ncclResult_t nullArgument(const char* call, const char* arg) {
  return setError(nullptr, ncclInvalidArgument, "NET/Socket: %s called with %s NULL", call, arg);
}

// With shared().mutex held.
ncclResult_t checkDeviceLocked(const char* call, int dev) {
  if (shared().refs == 0)
    return setError(nullptr, ncclInvalidUsage, "NET/Socket: %s called before init (or after the last finalize)", call);
  int ndev = (int)shared().devices.size();
  if (dev < 0 || dev >= ndev)
    return setError(nullptr, ncclInvalidArgument, "NET/Socket: %s on device %d; devices are 0 to %d", call, dev,
                    ndev - 1);
  return ncclSuccess;
}

ncclResult_t checkDevice(const char* call, int dev) {
  std::lock_guard<std::mutex> lock(shared().mutex);
  return checkDeviceLocked(call, dev);
}

// --- the table's members -------------------------------------------------------------------------------

ncclResult_t socketInit(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t,
                        ncclProfilerCallback_t) {
  if (!ctx) return nullArgument("init", "ctx");
  return guarded("init", [&] {
    Shared& s = shared();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.refs == 0) {
      std::vector<Device> devices;
      NCCLCHECK(discoverDevices(&devices));
      s.devices = std::move(devices);
    }
    auto c = std::make_unique<Context>();
    c->commId = commId;
    c->trafficClass = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
    c->nextId = randomU64() | 1;  // odd ids, never 0 ("no connect in progress")
    s.refs++;
    *ctx = c.release();
    return ncclSuccess;
  });
}

ncclResult_t socketFinalize(void* ctx) {
  if (!ctx) return nullArgument("finalize", "ctx");
  delete static_cast<Context*>(ctx);  // and any connect left half done
  Shared& s = shared();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.refs > 0 && --s.refs == 0) std::vector<Device>().swap(s.devices);
  return ncclSuccess;
}

ncclResult_t socketDevices(int* ndev) {
  if (!ndev) return nullArgument("devices", "ndev");
  std::lock_guard<std::mutex> lock(shared().mutex);
  if (shared().refs == 0)
    return setError(nullptr, ncclInvalidUsage, "NET/Socket: devices called before init (or after the last finalize)");
  *ndev = (int)shared().devices.size();
  return ncclSuccess;
}

ncclResult_t socketGetProperties(int dev, ncclNetProperties_v12_t* props) {
  if (!props) return nullArgument("getProperties", "props");
  std::lock_guard<std::mutex> lock(shared().mutex);
  NCCLCHECK(checkDeviceLocked("getProperties", dev));
  Device& d = shared().devices[dev];
  memset(props, 0, sizeof(*props));
  props->name = d.name.data();
  props->pciPath = d.pciPath.empty() ? nullptr : d.pciPath.data();
  props->guid = (uint64_t)dev;
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 1;
  props->forceFlush = 0;
  props->speed = d.speedMbps;
  props->port = 0;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = kMaxRecvs;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = NCCL_MAX_NET_SIZE_BYTES;
  props->maxCollBytes = NCCL_MAX_NET_SIZE_BYTES;
  props->maxMultiRequestSize = 1;
  props->railId = NCCL_NET_ID_UNDEF;
  props->planeId = NCCL_NET_ID_UNDEF;
  return ncclSuccess;
}

ncclResult_t socketListen(void* ctx, int dev, void* handle, void** listenComm) {
  if (!ctx) return nullArgument("listen", "ctx");
  if (!handle) return nullArgument("listen", "handle");
  if (!listenComm) return nullArgument("listen", "listenComm");
  *listenComm = nullptr;
  return guarded("listen", [&] {
    Device d;
    {
      std::lock_guard<std::mutex> lock(shared().mutex);
      NCCLCHECK(checkDeviceLocked("listen", dev));
      d = shared().devices[dev];
    }
    Handle h{};
    std::unique_ptr<Listener> l;
    NCCLCHECK(Listener::create(d.addr, d.name, &h, &l));
    memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
    memcpy(handle, &h, sizeof(h));
    *listenComm = l.release();
    return ncclSuccess;
  });
}

ncclResult_t socketConnect(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t** devComm) {
  if (!ctx) return nullArgument("connect", "ctx");
  if (!handle) return nullArgument("connect", "handle");
  if (!sendComm) return nullArgument("connect", "sendComm");
  *sendComm = nullptr;
  if (devComm) *devComm = nullptr;  // a host net: nothing for a device to drive
  NCCLCHECK(checkDevice("connect", dev));
  return guarded("connect", [&] {
    Context* c = static_cast<Context*>(ctx);
    Handle h;
    memcpy(&h, handle, sizeof(h));  // the caller's buffer need not be aligned
    auto setPendingId = [&](uint64_t id) { memcpy((char*)handle + offsetof(Handle, pendingId), &id, sizeof(id)); };
    std::lock_guard<std::mutex> lock(c->mutex);
    auto it = h.pendingId ? c->pending.find(h.pendingId) : c->pending.end();
    if (it == c->pending.end()) {  // a new connection
      NCCLCHECK(checkHandle(h));
      uint64_t id = c->nextId;
      c->nextId += 2;
      it = c->pending.emplace(id, std::make_unique<Connector>(h, c->trafficClass)).first;
      setPendingId(id);
    }
    std::unique_ptr<SendComm> comm;
    ncclResult_t res = it->second->progress(&comm);
    if (res != ncclSuccess || comm) {
      c->pending.erase(it);
      setPendingId(0);
    }
    if (comm) *sendComm = comm.release();
    return res;
  });
}

ncclResult_t socketAccept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v12_t** devComm) {
  if (!listenComm) return nullArgument("accept", "listenComm");
  if (!recvComm) return nullArgument("accept", "recvComm");
  *recvComm = nullptr;
  if (devComm) *devComm = nullptr;
  return guarded("accept", [&] {
    std::unique_ptr<RecvComm> comm;
    NCCLCHECK(static_cast<Listener*>(listenComm)->accept(&comm));
    *recvComm = comm.release();
    return ncclSuccess;
  });
}

// Host memory needs no registration; the handle is a token that deregMr accepts.
char hostRegistration;

ncclResult_t socketRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (!comm) return nullArgument("regMr", "comm");
  if (!mhandle) return nullArgument("regMr", "mhandle");
  *mhandle = nullptr;
  if (type == NCCL_PTR_HOST) {
    *mhandle = &hostRegistration;
    return ncclSuccess;
  }
  if (type == NCCL_PTR_CUDA)
    return setError(nullptr, ncclInvalidArgument,
                    "NET/Socket: cannot register GPU memory (NCCL_PTR_CUDA, %zu bytes at %p): the Socket net moves "
                    "host memory only (its ptrSupport is NCCL_PTR_HOST). Stage the data through host memory, or "
                    "use a net plugin with GPUDirect RDMA (IB, UCX, OFI)",
                    size, data);
  return setError(nullptr, ncclInvalidArgument,
                  "NET/Socket: cannot register memory of type %#x: the Socket net takes NCCL_PTR_HOST (%#x) only", type,
                  NCCL_PTR_HOST);
}

ncclResult_t socketRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  if (mhandle) *mhandle = nullptr;
  return setError(nullptr, ncclInvalidArgument,
                  "NET/Socket: cannot register DMA-BUF memory (fd %d): the Socket net moves host memory only (its "
                  "ptrSupport is NCCL_PTR_HOST, without NCCL_PTR_DMABUF)",
                  fd);
}

ncclResult_t socketDeregMr(void* comm, void* mhandle) { return ncclSuccess; }

ncclResult_t socketIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                         void** request) {
  if (!sendComm) return nullArgument("isend", "sendComm");
  if (!request) return nullArgument("isend", "request");
  return static_cast<SendComm*>(sendComm)->isend(data, size, tag, request);
}

ncclResult_t socketIrecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                         void** request) {
  if (!recvComm) return nullArgument("irecv", "recvComm");
  if (!request) return nullArgument("irecv", "request");
  return static_cast<RecvComm*>(recvComm)->irecv(n, data, sizes, tags, request);
}

ncclResult_t socketIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  if (!recvComm) return nullArgument("iflush", "recvComm");
  if (!request) return nullArgument("iflush", "request");
  return static_cast<RecvComm*>(recvComm)->iflush(request);
}

ncclResult_t socketTest(void* request, int* done, int* sizes) {
  if (!request) return nullArgument("test", "request");
  if (!done) return nullArgument("test", "done");
  *done = 0;
  Request* r = static_cast<Request*>(request);
  if (r->kind == Request::Kind::Free)
    return setError(nullptr, ncclInvalidUsage,
                    "NET/Socket: test() on a request that was already reported done (a request is freed when test "
                    "reports it done)");
  return r->comm->test(r, done, sizes);
}

ncclResult_t socketCloseSend(void* sendComm) {
  delete static_cast<SendComm*>(sendComm);
  return ncclSuccess;
}

ncclResult_t socketCloseRecv(void* recvComm) {
  delete static_cast<RecvComm*>(recvComm);
  return ncclSuccess;
}

ncclResult_t socketCloseListen(void* listenComm) {
  delete static_cast<Listener*>(listenComm);
  return ncclSuccess;
}

ncclResult_t socketGetDeviceMr(void* comm, void* mhandle, void** dptrMhandle) {
  if (dptrMhandle) *dptrMhandle = nullptr;  // a host net has no device-side handle
  return ncclSuccess;
}

ncclResult_t socketIrecvConsumed(void* recvComm, int n, void* request) { return ncclSuccess; }

// A virtual NIC of one device is that device; merging several is not something sockets can do.
ncclResult_t socketMakeVDevice(int* d, ncclNetVDeviceProps_v12_t* props) {
  if (!d || !props) return nullArgument("makeVDevice", !d ? "d" : "props");
  if (props->ndevs != 1)
    return setError(nullptr, ncclInvalidUsage,
                    "NET/Socket: cannot merge %d devices into one virtual NIC: the Socket net has no multi-rail "
                    "support. Set NCCL_NET_MERGE_LEVEL=LOC to keep NICs apart",
                    props->ndevs);
  NCCLCHECK(checkDevice("makeVDevice", props->devs[0]));
  *d = props->devs[0];
  return ncclSuccess;
}

ncclResult_t socketSetNetAttr(void* ctx, ncclNetAttr_v12_t* attr) { return ncclSuccess; }  // hints only

}  // namespace

}  // namespace plexus::socketnet

extern "C" const ncclNet_v12_t plexusSocketNet_v12 = {
    "Socket",
    plexus::socketnet::socketInit,
    plexus::socketnet::socketDevices,
    plexus::socketnet::socketGetProperties,
    plexus::socketnet::socketListen,
    plexus::socketnet::socketConnect,
    plexus::socketnet::socketAccept,
    plexus::socketnet::socketRegMr,
    plexus::socketnet::socketRegMrDmaBuf,
    plexus::socketnet::socketDeregMr,
    plexus::socketnet::socketIsend,
    plexus::socketnet::socketIrecv,
    plexus::socketnet::socketIflush,
    plexus::socketnet::socketTest,
    plexus::socketnet::socketCloseSend,
    plexus::socketnet::socketCloseRecv,
    plexus::socketnet::socketCloseListen,
    plexus::socketnet::socketGetDeviceMr,
    plexus::socketnet::socketIrecvConsumed,
    plexus::socketnet::socketMakeVDevice,
    plexus::socketnet::socketFinalize,
    plexus::socketnet::socketSetNetAttr,
};
