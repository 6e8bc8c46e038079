// A stand-in libcuda for p2p-nvlink's CUDA paths where there is no GPU (PLEXUS_CUDA_DRIVER points at it). It answers
// like a driver through cuGetProcAddress_v2 and keeps "GPU memory" in host memory that really behaves as the driver's
// would between processes and views:
//  * cuMemAlloc memory is a memfd, so that a legacy IPC handle opens it in another process (/proc/<pid>/fd);
//  * cuMemCreate makes a memfd whose descriptor cuMemExportToShareableHandle hands out; cuMemAddressReserve reserves
//    PROT_NONE address space, cuMemMap maps the memfd there still PROT_NONE, and only cuMemSetAccess makes it
//    readable and writable (a plugin that touches the memory before granting access crashes, as on a GPU);
//  * host memory (cuMemHostAlloc, cuMemHostRegister) gets a device view at another address that aliases the same
//    pages, so a test sees whether the plugin handed kernels the device view.
// Knobs (environment, read at each call): P2P_FAKE_CUDA_DEVICES (2), P2P_FAKE_CUDA_BUS (comma-separated PCI bus ids
// of the devices; default 0000:1A:00.0, 0000:1B:00.0, ...), P2P_FAKE_CUDA_NO_PEER=1 (no two distinct GPUs reach each
// other: cuDeviceCanAccessPeer says 0, mapping another GPU's memory fails), P2P_FAKE_CUDA_NO_VMM=1 (the devices lack
// cuMem file descriptor support), P2P_FAKE_CUDA_FAIL=cuA,cuB (those calls fail with CUDA_ERROR_OUT_OF_MEMORY).
// Every call is recorded; p2pFakeCudaCalls() returns them, one a line; p2pFakeCudaKindOf(p) says what an address is.
#include <fcntl.h>
#include <plexus/cuda/driver.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace plexus::cuda;

std::recursive_mutex mu;
std::vector<std::string> calls;
thread_local CUcontext current = nullptr;
thread_local int captureMode = CU_STREAM_CAPTURE_MODE_GLOBAL;
char contexts[64];
char streams[64];

struct Region {
  size_t size;
  int fd;             // memfd (cuMemAlloc, cuMemCreate), -1 otherwise
  std::string bus;    // the GPU the memory lives on
  void* alias;        // host memory: the device view
  bool owned = true;  // allocated by this process (not imported or opened)
};
std::map<uintptr_t, Region> deviceAllocs;   // cuMemAlloc
std::map<uintptr_t, Region> hostAllocs;     // cuMemHostAlloc, by host address
std::map<uintptr_t, Region> registered;     // cuMemHostRegister, by host address
std::map<uintptr_t, Region> ipcOpened;      // cuIpcOpenMemHandle
std::map<uintptr_t, size_t> reservations;   // cuMemAddressReserve
std::map<uintptr_t, Region> vmmMapped;      // cuMemMap
std::set<std::pair<int, int>> peerEnabled;  // (device, peer)

struct VmmHandle {
  int fd;
  size_t size;
  std::string bus;
  bool imported = false;
};

struct IpcHandleBits {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  int32_t pad;
  uint64_t size;
  char bus[16];
};
static_assert(sizeof(IpcHandleBits) <= sizeof(CUipcMemHandle), "ipc handle");
constexpr uint32_t kIpcMagic = 0x46414b45;

int deviceCount() {
  const char* v = getenv("P2P_FAKE_CUDA_DEVICES");
  return v ? atoi(v) : 2;
}

std::string busOf(int ordinal) {
  if (const char* v = getenv("P2P_FAKE_CUDA_BUS")) {
    std::string s = v;
    for (int i = 0; i < ordinal; i++) {
      const size_t comma = s.find(',');
      if (comma == std::string::npos) return "";
      s = s.substr(comma + 1);
    }
    return s.substr(0, s.find(','));
  }
  char b[16];
  snprintf(b, sizeof(b), "0000:%02X:00.0", 0x1a + ordinal);
  return b;
}

bool noPeer() { return getenv("P2P_FAKE_CUDA_NO_PEER") && atoi(getenv("P2P_FAKE_CUDA_NO_PEER")); }

int currentDevice() { return current ? int(reinterpret_cast<char*>(current) - contexts) : -1; }

// Whether the current device may touch memory on GPU bus.
bool reachable(const std::string& bus) {
  return !noPeer() || strcasecmp(bus.c_str(), busOf(currentDevice()).c_str()) == 0;
}

bool failing(const char* call) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  calls.push_back(call);
  const char* v = getenv("P2P_FAKE_CUDA_FAIL");
  if (!v) return false;
  std::string list = std::string(",") + v + ",";
  return list.find(std::string(",") + call + ",") != std::string::npos;
}
#define FAKE_CALL(name)                            \
  std::lock_guard<std::recursive_mutex> lock_(mu); \
  if (failing(name)) return CUDA_ERROR_OUT_OF_MEMORY

CUresult notSupported(const char* call) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  calls.push_back(call);
  return CUDA_ERROR_NOT_SUPPORTED;
}

int makeMemfd(size_t size, const std::string& bus) {
  const int fd = memfd_create(("fakecuda:" + bus).c_str(), MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (ftruncate(fd, (off_t)size) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The GPU of a memfd made above (its name, through /proc/self/fd).
std::string busOfFd(int fd) {
  char link[256] = {};
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = readlink(path.c_str(), link, sizeof(link) - 1);
  if (n <= 0) return "";
  std::string s(link, (size_t)n);
  const size_t at = s.find("fakecuda:");
  if (at == std::string::npos) return "";
  s = s.substr(at + 9);
  return s.substr(0, s.find(' '));
}

// A second view of shared pages at another address (the "device view").
void* alias(void* p, size_t n) {
  void* a = mremap(p, 0, n, MREMAP_MAYMOVE);
  return a == MAP_FAILED ? nullptr : a;
}

// Host memory's device view, for an address inside a host allocation or registration.
bool deviceView(void* p, CUdeviceptr* out) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  for (auto* m : {&hostAllocs, &registered})
    for (auto& [base, r] : *m)
      if (u >= base && u < base + r.size) {
        *out = reinterpret_cast<CUdeviceptr>(r.alias) + (u - base);
        return true;
      }
  return false;
}

size_t granularity() {
  const char* v = getenv("P2P_FAKE_CUDA_GRAN");
  return v ? (size_t)atoll(v) : (size_t)2 << 20;
}

CUresult getProcAddressV2(const char* symbol, void** fn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult* status);

Driver makeTable() {
  Driver d;
  d.getProcAddress = getProcAddressV2;
  d.getErrorName = [](CUresult, const char**) -> CUresult { return CUDA_ERROR_INVALID_VALUE; };
  d.getErrorString = [](CUresult, const char**) -> CUresult { return CUDA_ERROR_INVALID_VALUE; };
  d.init = [](unsigned) -> CUresult {
    FAKE_CALL("cuInit");
    return CUDA_SUCCESS;
  };
  d.driverGetVersion = [](int* v) -> CUresult {
    *v = 12040;
    return CUDA_SUCCESS;
  };
  d.deviceGetCount = [](int* n) -> CUresult {
    FAKE_CALL("cuDeviceGetCount");
    *n = deviceCount();
    return CUDA_SUCCESS;
  };
  d.deviceGet = [](CUdevice* dev, int ordinal) -> CUresult {
    FAKE_CALL("cuDeviceGet");
    if (ordinal < 0 || ordinal >= deviceCount()) return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
  };
  d.deviceGetAttribute = [](int* v, CUdevice_attribute a, CUdevice dev) -> CUresult {
    FAKE_CALL("cuDeviceGetAttribute");
    if (dev < 0 || dev >= deviceCount()) return CUDA_ERROR_INVALID_DEVICE;
    const bool vmm = !(getenv("P2P_FAKE_CUDA_NO_VMM") && atoi(getenv("P2P_FAKE_CUDA_NO_VMM")));
    *v = a == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED ||
                 a == CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
             ? vmm
             : a == CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY || a == CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING;
    return CUDA_SUCCESS;
  };
  d.deviceGetPCIBusId = [](char* out, int len, CUdevice dev) -> CUresult {
    FAKE_CALL("cuDeviceGetPCIBusId");
    if (dev < 0 || dev >= deviceCount()) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(out, (size_t)len, "%s", busOf(dev).c_str());
    return CUDA_SUCCESS;
  };
  d.deviceCanAccessPeer = [](int* ok, CUdevice a, CUdevice b) -> CUresult {
    FAKE_CALL("cuDeviceCanAccessPeer");
    if (a < 0 || b < 0 || a >= deviceCount() || b >= deviceCount()) return CUDA_ERROR_INVALID_DEVICE;
    *ok = a != b && !noPeer();
    return CUDA_SUCCESS;
  };
  d.devicePrimaryCtxRetain = [](CUcontext* ctx, CUdevice dev) -> CUresult {
    FAKE_CALL("cuDevicePrimaryCtxRetain");
    if (dev < 0 || dev >= deviceCount()) return CUDA_ERROR_INVALID_DEVICE;
    *ctx = reinterpret_cast<CUcontext>(&contexts[dev]);
    return CUDA_SUCCESS;
  };
  d.devicePrimaryCtxRelease = [](CUdevice) -> CUresult {
    FAKE_CALL("cuDevicePrimaryCtxRelease");
    return CUDA_SUCCESS;
  };
  d.ctxGetCurrent = [](CUcontext* ctx) -> CUresult {
    *ctx = current;
    return CUDA_SUCCESS;
  };
  d.ctxSetCurrent = [](CUcontext ctx) -> CUresult {
    current = ctx;
    return CUDA_SUCCESS;
  };
  d.ctxGetDevice = [](CUdevice* dev) -> CUresult {
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    *dev = currentDevice();
    return CUDA_SUCCESS;
  };
  d.ctxEnablePeerAccess = [](CUcontext peer, unsigned) -> CUresult {
    FAKE_CALL("cuCtxEnablePeerAccess");
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    const int a = currentDevice(), b = int(reinterpret_cast<char*>(peer) - contexts);
    if (a == b) return CUDA_ERROR_INVALID_DEVICE;
    if (noPeer()) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    if (!peerEnabled.insert({a, b}).second) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    return CUDA_SUCCESS;
  };
  d.memAlloc = [](CUdeviceptr* p, size_t n) -> CUresult {
    FAKE_CALL("cuMemAlloc");
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    const std::string bus = busOf(currentDevice());
    const int fd = makeMemfd(n, bus);
    void* m = fd < 0 ? MAP_FAILED : mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      if (fd >= 0) close(fd);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memset(m, 0xab, n);  // not zero: the plugin must clear it
    deviceAllocs[reinterpret_cast<uintptr_t>(m)] = Region{n, fd, bus, nullptr};
    *p = reinterpret_cast<CUdeviceptr>(m);
    return CUDA_SUCCESS;
  };
  d.memFree = [](CUdeviceptr p) -> CUresult {
    FAKE_CALL("cuMemFree");
    auto it = deviceAllocs.find(p);
    if (it == deviceAllocs.end()) return CUDA_ERROR_INVALID_VALUE;
    munmap(reinterpret_cast<void*>(p), it->second.size);
    close(it->second.fd);
    deviceAllocs.erase(it);
    return CUDA_SUCCESS;
  };
  d.memHostAlloc = [](void** pp, size_t n, unsigned flags) -> CUresult {
    FAKE_CALL("cuMemHostAlloc");
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    void* a = (flags & CU_MEMHOSTALLOC_DEVICEMAP) ? alias(p, n) : nullptr;
    memset(p, 0xab, n);
    hostAllocs[reinterpret_cast<uintptr_t>(p)] = Region{n, -1, "", a};
    *pp = p;
    return CUDA_SUCCESS;
  };
  d.memHostGetDevicePointer = [](CUdeviceptr* dp, void* p, unsigned flags) -> CUresult {
    FAKE_CALL("cuMemHostGetDevicePointer");
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr v = 0;
    if (!deviceView(p, &v) || !v) return CUDA_ERROR_INVALID_VALUE;
    *dp = v;
    return CUDA_SUCCESS;
  };
  d.memFreeHost = [](void* p) -> CUresult {
    FAKE_CALL("cuMemFreeHost");
    auto it = hostAllocs.find(reinterpret_cast<uintptr_t>(p));
    if (it == hostAllocs.end()) return CUDA_ERROR_INVALID_VALUE;
    if (it->second.alias) munmap(it->second.alias, it->second.size);
    munmap(p, it->second.size);
    hostAllocs.erase(it);
    return CUDA_SUCCESS;
  };
  d.memHostRegister = [](void* p, size_t n, unsigned flags) -> CUresult {
    FAKE_CALL("cuMemHostRegister");
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    CUdeviceptr v = 0;
    if (deviceView(p, &v)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    void* a = (flags & CU_MEMHOSTREGISTER_DEVICEMAP) ? alias(p, n) : nullptr;
    if ((flags & CU_MEMHOSTREGISTER_DEVICEMAP) && !a) return CUDA_ERROR_INVALID_VALUE;  // not shared memory
    registered[reinterpret_cast<uintptr_t>(p)] = Region{n, -1, "", a};
    return CUDA_SUCCESS;
  };
  d.memHostUnregister = [](void* p) -> CUresult {
    FAKE_CALL("cuMemHostUnregister");
    auto it = registered.find(reinterpret_cast<uintptr_t>(p));
    if (it == registered.end()) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    if (it->second.alias) munmap(it->second.alias, it->second.size);
    registered.erase(it);
    return CUDA_SUCCESS;
  };
  d.memcpyHtoD = [](CUdeviceptr dst, const void* src, size_t n) -> CUresult {
    FAKE_CALL("cuMemcpyHtoD");
    memcpy(reinterpret_cast<void*>(dst), src, n);
    return CUDA_SUCCESS;
  };
  d.memcpyDtoH = [](void* dst, CUdeviceptr src, size_t n) -> CUresult {
    FAKE_CALL("cuMemcpyDtoH");
    memcpy(dst, reinterpret_cast<const void*>(src), n);
    return CUDA_SUCCESS;
  };
  d.memcpyHtoDAsync = [](CUdeviceptr dst, const void* src, size_t n, CUstream) -> CUresult {
    FAKE_CALL("cuMemcpyHtoDAsync");
    memcpy(reinterpret_cast<void*>(dst), src, n);
    return CUDA_SUCCESS;
  };
  d.memcpyAsync = [](CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream) -> CUresult {
    FAKE_CALL("cuMemcpyAsync");
    memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
    return CUDA_SUCCESS;
  };
  d.memcpyDtoHAsync = [](void* dst, CUdeviceptr src, size_t n, CUstream) -> CUresult {
    FAKE_CALL("cuMemcpyDtoHAsync");
    memcpy(dst, reinterpret_cast<const void*>(src), n);
    return CUDA_SUCCESS;
  };
  d.memsetD8 = [](CUdeviceptr dst, unsigned char v, size_t n) -> CUresult {
    FAKE_CALL("cuMemsetD8");
    memset(reinterpret_cast<void*>(dst), v, n);
    return CUDA_SUCCESS;
  };
  d.memsetD8Async = [](CUdeviceptr dst, unsigned char v, size_t n, CUstream) -> CUresult {
    FAKE_CALL("cuMemsetD8Async");
    memset(reinterpret_cast<void*>(dst), v, n);
    return CUDA_SUCCESS;
  };
  d.memGetAllocationGranularity = [](size_t* g, const CUmemAllocationProp* prop,
                                     CUmemAllocationGranularity_flags) -> CUresult {
    FAKE_CALL("cuMemGetAllocationGranularity");
    if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
        prop->location.id >= deviceCount())
      return CUDA_ERROR_INVALID_DEVICE;
    *g = granularity();
    return CUDA_SUCCESS;
  };
  d.memCreate = [](CUmemGenericAllocationHandle* h, size_t size, const CUmemAllocationProp* prop,
                   unsigned long long) -> CUresult {
    FAKE_CALL("cuMemCreate");
    if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        prop->location.id < 0 || prop->location.id >= deviceCount() || !size || size % granularity())
      return CUDA_ERROR_INVALID_VALUE;
    if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
    const std::string bus = busOf(prop->location.id);
    const int fd = makeMemfd(size, bus);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    *h = reinterpret_cast<CUmemGenericAllocationHandle>(new VmmHandle{fd, size, bus});
    return CUDA_SUCCESS;
  };
  d.memRelease = [](CUmemGenericAllocationHandle h) -> CUresult {
    FAKE_CALL("cuMemRelease");
    auto* v = reinterpret_cast<VmmHandle*>(h);
    close(v->fd);
    delete v;
    return CUDA_SUCCESS;
  };
  d.memAddressReserve = [](CUdeviceptr* p, size_t size, size_t, CUdeviceptr, unsigned long long) -> CUresult {
    FAKE_CALL("cuMemAddressReserve");
    if (!size || size % granularity()) return CUDA_ERROR_INVALID_VALUE;
    void* m = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    reservations[reinterpret_cast<uintptr_t>(m)] = size;
    *p = reinterpret_cast<CUdeviceptr>(m);
    return CUDA_SUCCESS;
  };
  d.memAddressFree = [](CUdeviceptr p, size_t size) -> CUresult {
    FAKE_CALL("cuMemAddressFree");
    auto it = reservations.find(p);
    if (it == reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
    munmap(reinterpret_cast<void*>(p), size);
    reservations.erase(it);
    return CUDA_SUCCESS;
  };
  d.memMap = [](CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                unsigned long long) -> CUresult {
    FAKE_CALL("cuMemMap");
    auto* v = reinterpret_cast<VmmHandle*>(h);
    bool inside = false;
    for (auto& [base, n] : reservations) inside |= p >= base && p + size <= base + n;
    if (!inside || size % granularity() || offset + size > v->size) return CUDA_ERROR_INVALID_VALUE;
    void* m = mmap(reinterpret_cast<void*>(p), size, PROT_NONE, MAP_SHARED | MAP_FIXED, v->fd, (off_t)offset);
    if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    vmmMapped[p] = Region{size, -1, v->bus, nullptr, !v->imported};
    return CUDA_SUCCESS;
  };
  d.memUnmap = [](CUdeviceptr p, size_t size) -> CUresult {
    FAKE_CALL("cuMemUnmap");
    auto it = vmmMapped.find(p);
    if (it == vmmMapped.end() || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
    mmap(reinterpret_cast<void*>(p), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    vmmMapped.erase(it);
    return CUDA_SUCCESS;
  };
  d.memSetAccess = [](CUdeviceptr p, size_t size, const CUmemAccessDesc* desc, size_t count) -> CUresult {
    FAKE_CALL("cuMemSetAccess");
    auto it = vmmMapped.find(p);
    if (it == vmmMapped.end() || it->second.size != size || count != 1) return CUDA_ERROR_INVALID_VALUE;
    if (desc->location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc->location.id < 0 ||
        desc->location.id >= deviceCount() || desc->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return CUDA_ERROR_INVALID_VALUE;
    if (noPeer() && strcasecmp(it->second.bus.c_str(), busOf(desc->location.id).c_str()) != 0)
      return CUDA_ERROR_INVALID_DEVICE;
    mprotect(reinterpret_cast<void*>(p), size, PROT_READ | PROT_WRITE);
    return CUDA_SUCCESS;
  };
  d.memExportToShareableHandle = [](void* out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType type,
                                    unsigned long long) -> CUresult {
    FAKE_CALL("cuMemExportToShareableHandle");
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
    const int fd = fcntl(reinterpret_cast<VmmHandle*>(h)->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return CUDA_ERROR_OPERATING_SYSTEM;
    *static_cast<int*>(out) = fd;
    return CUDA_SUCCESS;
  };
  d.memImportFromShareableHandle = [](CUmemGenericAllocationHandle* h, void* os,
                                      CUmemAllocationHandleType type) -> CUresult {
    FAKE_CALL("cuMemImportFromShareableHandle");
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
    const int fd = fcntl((int)reinterpret_cast<uintptr_t>(os), F_DUPFD_CLOEXEC, 0);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) return CUDA_ERROR_INVALID_HANDLE;
    *h = reinterpret_cast<CUmemGenericAllocationHandle>(new VmmHandle{fd, (size_t)st.st_size, busOfFd(fd), true});
    return CUDA_SUCCESS;
  };
  d.ipcGetMemHandle = [](CUipcMemHandle* h, CUdeviceptr p) -> CUresult {
    FAKE_CALL("cuIpcGetMemHandle");
    auto it = deviceAllocs.find(p);
    if (it == deviceAllocs.end()) return CUDA_ERROR_INVALID_VALUE;
    IpcHandleBits b{kIpcMagic, (int32_t)getpid(), it->second.fd, 0, it->second.size, {}};
    snprintf(b.bus, sizeof(b.bus), "%s", it->second.bus.c_str());
    memset(h, 0, sizeof(*h));
    memcpy(h, &b, sizeof(b));
    return CUDA_SUCCESS;
  };
  d.ipcOpenMemHandle = [](CUdeviceptr* p, CUipcMemHandle h, unsigned flags) -> CUresult {
    FAKE_CALL("cuIpcOpenMemHandle");
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    IpcHandleBits b;
    memcpy(&b, &h, sizeof(b));
    if (b.magic != kIpcMagic || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) return CUDA_ERROR_INVALID_VALUE;
    if (b.pid == getpid()) return CUDA_ERROR_INVALID_CONTEXT;  // a process cannot open its own handles
    if (!reachable(b.bus)) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    const std::string path = "/proc/" + std::to_string(b.pid) + "/fd/" + std::to_string(b.fd);
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return CUDA_ERROR_INVALID_HANDLE;
    void* m = mmap(nullptr, b.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    ipcOpened[reinterpret_cast<uintptr_t>(m)] = Region{b.size, -1, b.bus, nullptr, false};
    *p = reinterpret_cast<CUdeviceptr>(m);
    return CUDA_SUCCESS;
  };
  d.ipcCloseMemHandle = [](CUdeviceptr p) -> CUresult {
    FAKE_CALL("cuIpcCloseMemHandle");
    auto it = ipcOpened.find(p);
    if (it == ipcOpened.end()) return CUDA_ERROR_INVALID_VALUE;
    munmap(reinterpret_cast<void*>(p), it->second.size);
    ipcOpened.erase(it);
    return CUDA_SUCCESS;
  };
  d.streamCreate = [](CUstream* s, unsigned) -> CUresult {
    FAKE_CALL("cuStreamCreate");
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    static int next = 0;
    *s = reinterpret_cast<CUstream>(&streams[next++ % 64]);
    return CUDA_SUCCESS;
  };
  d.streamDestroy = [](CUstream) -> CUresult { return CUDA_SUCCESS; };
  d.streamSynchronize = [](CUstream) -> CUresult {
    FAKE_CALL("cuStreamSynchronize");
    return CUDA_SUCCESS;
  };
  d.threadExchangeStreamCaptureMode = [](CUstreamCaptureMode* mode) -> CUresult {
    std::swap(*mode, captureMode);
    return CUDA_SUCCESS;
  };

  // What p2p-nvlink does not use.
  d.memGetAddressRange = [](auto...) { return notSupported("cuMemGetAddressRange"); };
  d.memGetHandleForAddressRange = [](auto...) { return notSupported("cuMemGetHandleForAddressRange"); };
  d.pointerGetAttributes = [](auto...) { return notSupported("cuPointerGetAttributes"); };
  d.streamQuery = [](auto...) { return notSupported("cuStreamQuery"); };
  d.streamWaitEvent = [](auto...) { return notSupported("cuStreamWaitEvent"); };
  d.streamWaitValue64 = [](auto...) { return notSupported("cuStreamWaitValue64"); };
  d.streamGetCaptureInfo = [](auto...) { return notSupported("cuStreamGetCaptureInfo"); };
  d.eventCreate = [](auto...) { return notSupported("cuEventCreate"); };
  d.eventRecord = [](auto...) { return notSupported("cuEventRecord"); };
  d.eventQuery = [](auto...) { return notSupported("cuEventQuery"); };
  d.eventSynchronize = [](auto...) { return notSupported("cuEventSynchronize"); };
  d.eventDestroy = [](auto...) { return notSupported("cuEventDestroy"); };
  d.launchKernel = [](auto...) { return notSupported("cuLaunchKernel"); };
  d.launchHostFunc = [](auto...) { return notSupported("cuLaunchHostFunc"); };
  d.funcGetAttribute = [](auto...) { return notSupported("cuFuncGetAttribute"); };
  d.funcSetAttribute = [](auto...) { return notSupported("cuFuncSetAttribute"); };
  d.moduleGetLoadingMode = [](auto...) { return notSupported("cuModuleGetLoadingMode"); };
  d.userObjectCreate = [](auto...) { return notSupported("cuUserObjectCreate"); };
  d.userObjectRelease = [](auto...) { return notSupported("cuUserObjectRelease"); };
  d.graphRetainUserObject = [](auto...) { return notSupported("cuGraphRetainUserObject"); };
  return d;
}

const Driver table = makeTable();

#define SYM(name, member) \
  { name, reinterpret_cast<void*>(table.member) }
const std::pair<const char*, void*> symbols[] = {
    SYM("cuGetProcAddress", getProcAddress),
    SYM("cuGetErrorName", getErrorName),
    SYM("cuGetErrorString", getErrorString),
    SYM("cuInit", init),
    SYM("cuDriverGetVersion", driverGetVersion),
    SYM("cuDeviceGetCount", deviceGetCount),
    SYM("cuDeviceGet", deviceGet),
    SYM("cuDeviceGetAttribute", deviceGetAttribute),
    SYM("cuDeviceGetPCIBusId", deviceGetPCIBusId),
    SYM("cuDeviceCanAccessPeer", deviceCanAccessPeer),
    SYM("cuDevicePrimaryCtxRetain", devicePrimaryCtxRetain),
    SYM("cuDevicePrimaryCtxRelease", devicePrimaryCtxRelease),
    SYM("cuCtxGetCurrent", ctxGetCurrent),
    SYM("cuCtxSetCurrent", ctxSetCurrent),
    SYM("cuCtxGetDevice", ctxGetDevice),
    SYM("cuCtxEnablePeerAccess", ctxEnablePeerAccess),
    SYM("cuMemAlloc", memAlloc),
    SYM("cuMemFree", memFree),
    SYM("cuMemHostAlloc", memHostAlloc),
    SYM("cuMemHostGetDevicePointer", memHostGetDevicePointer),
    SYM("cuMemFreeHost", memFreeHost),
    SYM("cuMemHostRegister", memHostRegister),
    SYM("cuMemHostUnregister", memHostUnregister),
    SYM("cuMemcpyHtoD", memcpyHtoD),
    SYM("cuMemcpyDtoH", memcpyDtoH),
    SYM("cuMemcpyHtoDAsync", memcpyHtoDAsync),
    SYM("cuMemcpyAsync", memcpyAsync),
    SYM("cuMemcpyDtoHAsync", memcpyDtoHAsync),
    SYM("cuMemsetD8", memsetD8),
    SYM("cuMemsetD8Async", memsetD8Async),
    SYM("cuMemGetAddressRange", memGetAddressRange),
    SYM("cuMemCreate", memCreate),
    SYM("cuMemRelease", memRelease),
    SYM("cuMemAddressReserve", memAddressReserve),
    SYM("cuMemAddressFree", memAddressFree),
    SYM("cuMemMap", memMap),
    SYM("cuMemUnmap", memUnmap),
    SYM("cuMemSetAccess", memSetAccess),
    SYM("cuMemGetAllocationGranularity", memGetAllocationGranularity),
    SYM("cuMemExportToShareableHandle", memExportToShareableHandle),
    SYM("cuMemImportFromShareableHandle", memImportFromShareableHandle),
    SYM("cuMemGetHandleForAddressRange", memGetHandleForAddressRange),
    SYM("cuIpcGetMemHandle", ipcGetMemHandle),
    SYM("cuIpcOpenMemHandle", ipcOpenMemHandle),
    SYM("cuIpcCloseMemHandle", ipcCloseMemHandle),
    SYM("cuPointerGetAttributes", pointerGetAttributes),
    SYM("cuStreamCreate", streamCreate),
    SYM("cuStreamDestroy", streamDestroy),
    SYM("cuStreamSynchronize", streamSynchronize),
    SYM("cuStreamQuery", streamQuery),
    SYM("cuStreamWaitEvent", streamWaitEvent),
    SYM("cuStreamWaitValue64", streamWaitValue64),
    SYM("cuStreamGetCaptureInfo", streamGetCaptureInfo),
    SYM("cuThreadExchangeStreamCaptureMode", threadExchangeStreamCaptureMode),
    SYM("cuEventCreate", eventCreate),
    SYM("cuEventRecord", eventRecord),
    SYM("cuEventQuery", eventQuery),
    SYM("cuEventSynchronize", eventSynchronize),
    SYM("cuEventDestroy", eventDestroy),
    SYM("cuLaunchKernel", launchKernel),
    SYM("cuLaunchHostFunc", launchHostFunc),
    SYM("cuFuncGetAttribute", funcGetAttribute),
    SYM("cuFuncSetAttribute", funcSetAttribute),
    SYM("cuModuleGetLoadingMode", moduleGetLoadingMode),
    SYM("cuUserObjectCreate", userObjectCreate),
    SYM("cuUserObjectRelease", userObjectRelease),
    SYM("cuGraphRetainUserObject", graphRetainUserObject),
};

CUresult getProcAddressV2(const char* symbol, void** fn, int, cuuint64_t, CUdriverProcAddressQueryResult* status) {
  for (const auto& [name, p] : symbols)
    if (strcmp(name, symbol) == 0) {
      *fn = p;
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  *fn = nullptr;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

}  // namespace

extern "C" {
__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char* symbol, void** fn, int version,
                                                                    cuuint64_t flags,
                                                                    CUdriverProcAddressQueryResult* status) {
  return getProcAddressV2(symbol, fn, version, flags, status);
}
// The calls made so far, one a line (valid until the next call of this function).
__attribute__((visibility("default"))) const char* p2pFakeCudaCalls() {
  static std::string out;
  std::lock_guard<std::recursive_mutex> lock(mu);
  out.clear();
  for (const std::string& c : calls) out += c + "\n";
  return out.c_str();
}
// What p is to this driver: "device" (device memory: cuMemAlloc, a mapped cuMem range, an opened IPC handle), "device
// view" (the device's address of host memory), "host" (host memory's host address), or "unknown".
__attribute__((visibility("default"))) const char* p2pFakeCudaKindOf(const void* p) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  const auto u = reinterpret_cast<uintptr_t>(p);
  auto inside = [&](const std::map<uintptr_t, Region>& m, bool byAlias) {
    for (const auto& [base, r] : m) {
      const uintptr_t b = byAlias ? reinterpret_cast<uintptr_t>(r.alias) : base;
      if (b && u >= b && u < b + r.size) return true;
    }
    return false;
  };
  if (inside(deviceAllocs, false) || inside(vmmMapped, false) || inside(ipcOpened, false)) return "device";
  if (inside(hostAllocs, true) || inside(registered, true)) return "device view";
  if (inside(hostAllocs, false) || inside(registered, false)) return "host";
  return "unknown";
}
// Whether p lies in device memory this process allocated (cuMemAlloc, or a cuMem range of its own cuMemCreate).
__attribute__((visibility("default"))) int p2pFakeCudaOwned(const void* p) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  const auto u = reinterpret_cast<uintptr_t>(p);
  for (const auto* m : {&deviceAllocs, &vmmMapped})
    for (const auto& [base, r] : *m)
      if (u >= base && u < base + r.size) return r.owned;
  return 0;
}
}
