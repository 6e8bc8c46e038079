// The fake libcuda of fake_libcuda.h. Its entry points are typed by plexus::cuda::Driver itself, so a signature
// there and here cannot drift apart; which symbol name hands out which of them is written here a second time, on
// purpose, for the loader test to compare with the header's own pairing.
#include "fake_libcuda.h"

#include <cstdlib>
#include <cstring>
#include <utility>

namespace {

using namespace plexus::cuda;
using fake::State;

State state;
thread_local CUcontext current = nullptr;
thread_local int captureMode = CU_STREAM_CAPTURE_MODE_GLOBAL;
char contexts[64];  // device d's primary context is &contexts[d]
char streams[64];   // streams and events: distinct addresses, never dereferenced
char events[64];
int nextStream = 0, nextEvent = 0;

bool failing(const char* call, CUresult* r) {
  state.calls.push_back(call);
  if (state.failCall != call) return false;
  *r = state.failResult;
  return true;
}
#define FAKE_CALL(name)                \
  do {                                 \
    CUresult r_;                       \
    if (failing(name, &r_)) return r_; \
  } while (0)

// The fake names two results itself, so a test sees the driver's own words win over the header's table.
CUresult errorName(CUresult e, const char** s) {
  if (e == CUDA_ERROR_OUT_OF_MEMORY)
    *s = "CUDA_ERROR_OUT_OF_MEMORY";
  else if (e == CUDA_ERROR_NOT_READY)
    *s = "CUDA_ERROR_NOT_READY";
  else
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
CUresult errorString(CUresult e, const char** s) {
  if (e == CUDA_ERROR_OUT_OF_MEMORY)
    *s = "out of memory (fake driver)";
  else if (e == CUDA_ERROR_NOT_READY)
    *s = "device not ready (fake driver)";
  else
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult notSupported(const char* call) {
  state.calls.push_back(call);
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult getProcAddressV2(const char* symbol, void** fn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult* status);

Driver makeTable() {
  Driver d;
  d.getProcAddress = getProcAddressV2;
  d.getErrorName = errorName;
  d.getErrorString = errorString;
  d.init = [](unsigned flags) -> CUresult {
    state.calls.push_back("cuInit");
    state.initFlags = flags;
    return state.initResult;
  };
  d.driverGetVersion = [](int* v) -> CUresult {
    FAKE_CALL("cuDriverGetVersion");
    *v = state.version;
    return CUDA_SUCCESS;
  };
  d.deviceGetCount = [](int* n) -> CUresult {
    FAKE_CALL("cuDeviceGetCount");
    *n = state.deviceCount;
    return CUDA_SUCCESS;
  };
  d.deviceGet = [](CUdevice* dev, int ordinal) -> CUresult {
    FAKE_CALL("cuDeviceGet");
    if (ordinal < 0 || ordinal >= state.deviceCount) return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
  };
  d.devicePrimaryCtxRetain = [](CUcontext* ctx, CUdevice dev) -> CUresult {
    FAKE_CALL("cuDevicePrimaryCtxRetain");
    state.retains.at(dev)++;
    *ctx = reinterpret_cast<CUcontext>(&contexts[dev]);
    return CUDA_SUCCESS;
  };
  d.devicePrimaryCtxRelease = [](CUdevice dev) -> CUresult {
    FAKE_CALL("cuDevicePrimaryCtxRelease");
    state.releases.at(dev)++;
    return CUDA_SUCCESS;
  };
  d.ctxGetCurrent = [](CUcontext* ctx) -> CUresult {
    FAKE_CALL("cuCtxGetCurrent");
    *ctx = current;
    return CUDA_SUCCESS;
  };
  d.ctxSetCurrent = [](CUcontext ctx) -> CUresult {
    FAKE_CALL("cuCtxSetCurrent");
    current = ctx;
    return CUDA_SUCCESS;
  };
  d.ctxGetDevice = [](CUdevice* dev) -> CUresult {
    FAKE_CALL("cuCtxGetDevice");
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    *dev = int(reinterpret_cast<char*>(current) - contexts);
    return CUDA_SUCCESS;
  };
  d.memAlloc = [](CUdeviceptr* p, size_t n) -> CUresult {
    FAKE_CALL("cuMemAlloc");
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    state.modeAtAlloc = captureMode;
    void* m = malloc(n);
    memset(m, 0xab, n);  // not zero: the runtime must clear it
    *p = reinterpret_cast<CUdeviceptr>(m);
    return CUDA_SUCCESS;
  };
  d.memFree = [](CUdeviceptr p) -> CUresult {
    FAKE_CALL("cuMemFree");
    state.freed.push_back(p);
    ::free(reinterpret_cast<void*>(p));
    return CUDA_SUCCESS;
  };
  d.memHostAlloc = [](void** p, size_t n, unsigned flags) -> CUresult {
    FAKE_CALL("cuMemHostAlloc");
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    state.hostAllocFlags = flags;
    *p = malloc(n);
    memset(*p, 0xab, n);
    return CUDA_SUCCESS;
  };
  d.memHostGetDevicePointer = [](CUdeviceptr* dp, void* p, unsigned flags) -> CUresult {
    FAKE_CALL("cuMemHostGetDevicePointer");
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    *dp = reinterpret_cast<CUdeviceptr>(p) + fake::kMappedOffset;
    return CUDA_SUCCESS;
  };
  d.memFreeHost = [](void* p) -> CUresult {
    FAKE_CALL("cuMemFreeHost");
    state.freedHost.push_back(p);
    ::free(p);
    return CUDA_SUCCESS;
  };
  d.memcpyHtoDAsync = [](CUdeviceptr dst, const void* src, size_t n, CUstream s) -> CUresult {
    FAKE_CALL("cuMemcpyHtoDAsync");
    state.modeAtCopy = captureMode;
    state.copyStream = s;
    memcpy(reinterpret_cast<void*>(dst), src, n);
    return CUDA_SUCCESS;
  };
  d.memcpyAsync = [](CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) -> CUresult {
    FAKE_CALL("cuMemcpyAsync");
    state.copyStream = s;
    memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
    return CUDA_SUCCESS;
  };
  d.memcpyDtoHAsync = [](void* dst, CUdeviceptr src, size_t n, CUstream s) -> CUresult {
    FAKE_CALL("cuMemcpyDtoHAsync");
    state.modeAtCopy = captureMode;
    state.copyStream = s;
    memcpy(dst, reinterpret_cast<const void*>(src), n);
    return CUDA_SUCCESS;
  };
  d.memsetD8Async = [](CUdeviceptr dst, unsigned char v, size_t n, CUstream s) -> CUresult {
    FAKE_CALL("cuMemsetD8Async");
    state.memsetStream = s;
    memset(reinterpret_cast<void*>(dst), v, n);
    return CUDA_SUCCESS;
  };
  d.pointerGetAttributes = [](unsigned n, CUpointer_attribute* attrs, void** data, CUdeviceptr p) -> CUresult {
    FAKE_CALL("cuPointerGetAttributes");
    if (state.pointerResult != CUDA_SUCCESS) return state.pointerResult;
    auto it = state.pointers.find(p);
    if (it == state.pointers.end()) return CUDA_SUCCESS;  // unknown memory: the outputs stay as they were
    for (unsigned i = 0; i < n; i++) {
      if (attrs[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
        *static_cast<unsigned*>(data[i]) = it->second.memoryType;
      else if (attrs[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
        *static_cast<int*>(data[i]) = it->second.ordinal;
      else if (attrs[i] == CU_POINTER_ATTRIBUTE_IS_MANAGED)
        *static_cast<bool*>(data[i]) = it->second.managed;
      else
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
  };
  d.streamCreate = [](CUstream* s, unsigned flags) -> CUresult {
    FAKE_CALL("cuStreamCreate");
    state.streamFlags = flags;
    *s = reinterpret_cast<CUstream>(&streams[nextStream++ % 64]);
    return CUDA_SUCCESS;
  };
  d.streamDestroy = [](CUstream) -> CUresult {
    FAKE_CALL("cuStreamDestroy");
    return CUDA_SUCCESS;
  };
  d.streamSynchronize = [](CUstream s) -> CUresult {
    FAKE_CALL("cuStreamSynchronize");
    state.syncStream = s;
    return CUDA_SUCCESS;
  };
  d.streamWaitEvent = [](CUstream s, CUevent e, unsigned flags) -> CUresult {
    FAKE_CALL("cuStreamWaitEvent");
    state.waitStream = s;
    state.waitedEvent = e;
    state.waitFlags = flags;
    return CUDA_SUCCESS;
  };
  d.streamWaitValue64 = [](CUstream s, CUdeviceptr addr, cuuint64_t value, unsigned flags) -> CUresult {
    FAKE_CALL("cuStreamWaitValue64");
    state.waitStream = s;
    state.waitValueAddr = addr;
    state.waitValue = value;
    state.waitValueFlags = flags;
    return CUDA_SUCCESS;
  };
  d.streamGetCaptureInfo = [](CUstream, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                              const CUgraphNode** deps, size_t* nDeps) -> CUresult {
    FAKE_CALL("cuStreamGetCaptureInfo");
    state.captureDependenciesAsked = deps || nDeps;
    *status = state.captureStatus;
    if (id) *id = 7;
    if (graph) *graph = state.captureStatus == CU_STREAM_CAPTURE_STATUS_ACTIVE ? state.captureGraph : nullptr;
    return CUDA_SUCCESS;
  };
  d.threadExchangeStreamCaptureMode = [](CUstreamCaptureMode* mode) -> CUresult {
    FAKE_CALL("cuThreadExchangeStreamCaptureMode");
    std::swap(*mode, captureMode);
    return CUDA_SUCCESS;
  };
  d.eventCreate = [](CUevent* e, unsigned flags) -> CUresult {
    FAKE_CALL("cuEventCreate");
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    state.eventFlags = flags;
    *e = reinterpret_cast<CUevent>(&events[nextEvent++ % 64]);
    return CUDA_SUCCESS;
  };
  d.eventRecord = [](CUevent e, CUstream s) -> CUresult {
    FAKE_CALL("cuEventRecord");
    state.recordedEvent = e;
    state.recordStream = s;
    return CUDA_SUCCESS;
  };
  d.eventQuery = [](CUevent) -> CUresult {
    FAKE_CALL("cuEventQuery");
    return state.eventQueryResult;
  };
  d.eventDestroy = [](CUevent e) -> CUresult {
    FAKE_CALL("cuEventDestroy");
    state.destroyedEvents.push_back(e);
    return CUDA_SUCCESS;
  };
  d.launchKernel = [](CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned shared, CUstream s, void** params, void** extra) -> CUresult {
    FAKE_CALL("cuLaunchKernel");
    fake::Launch l;
    l.function = f;
    l.grid[0] = gx, l.grid[1] = gy, l.grid[2] = gz;
    l.block[0] = bx, l.block[1] = by, l.block[2] = bz;
    l.sharedMem = shared;
    l.stream = s;
    l.kernelParamsNull = params == nullptr;
    const void* buffer = nullptr;
    size_t bytes = 0;
    for (int i = 0; extra; i += 2) {
      const auto key = reinterpret_cast<uintptr_t>(extra[i]);
      l.extraKeys.push_back(key);
      if (key == CU_LAUNCH_PARAM_END_AS_INT) break;
      if (key == CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT)
        buffer = extra[i + 1];
      else if (key == CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT)
        bytes = *static_cast<size_t*>(extra[i + 1]);
      else
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (buffer) l.args.assign(static_cast<const char*>(buffer), static_cast<const char*>(buffer) + bytes);
    state.launches.push_back(std::move(l));
    return CUDA_SUCCESS;
  };
  d.launchHostFunc = [](CUstream s, CUhostFn fn, void* arg) -> CUresult {
    FAKE_CALL("cuLaunchHostFunc");
    state.callbackStream = s;
    fn(arg);
    return CUDA_SUCCESS;
  };
  d.userObjectCreate = [](CUuserObject* out, void* ptr, CUhostFn destroy, unsigned refs, unsigned flags) -> CUresult {
    FAKE_CALL("cuUserObjectCreate");
    auto* o = new fake::UserObject{ptr, destroy, refs, flags};
    state.userObjects.push_back(o);
    *out = reinterpret_cast<CUuserObject>(o);
    return CUDA_SUCCESS;
  };
  d.userObjectRelease = [](CUuserObject object, unsigned count) -> CUresult {
    FAKE_CALL("cuUserObjectRelease");
    auto* o = reinterpret_cast<fake::UserObject*>(object);
    if (count > o->refs) return CUDA_ERROR_INVALID_VALUE;
    o->refs -= count;
    if (o->refs == 0) {
      o->destroy(o->ptr);
      std::erase(state.userObjects, o);
      delete o;
    }
    return CUDA_SUCCESS;
  };
  d.graphRetainUserObject = [](CUgraph graph, CUuserObject object, unsigned count, unsigned flags) -> CUresult {
    FAKE_CALL("cuGraphRetainUserObject");
    state.retainGraph = graph;
    state.retainCount = count;
    state.retainFlags = flags;
    // MOVE: the caller's references become the graph's; otherwise the graph takes new ones.
    auto* o = reinterpret_cast<fake::UserObject*>(object);
    if (!(flags & CU_GRAPH_USER_OBJECT_MOVE)) o->refs += count;
    for (unsigned i = 0; i < count; i++) state.graphOwned.push_back(o);
    return CUDA_SUCCESS;
  };

  // Entry points the runtime does not use: each its own function, saying it is not supported.
  d.deviceGetAttribute = [](auto...) { return notSupported("cuDeviceGetAttribute"); };
  d.deviceGetPCIBusId = [](auto...) { return notSupported("cuDeviceGetPCIBusId"); };
  d.deviceCanAccessPeer = [](auto...) { return notSupported("cuDeviceCanAccessPeer"); };
  d.ctxEnablePeerAccess = [](auto...) { return notSupported("cuCtxEnablePeerAccess"); };
  d.memHostRegister = [](auto...) { return notSupported("cuMemHostRegister"); };
  d.memHostUnregister = [](auto...) { return notSupported("cuMemHostUnregister"); };
  d.memcpyHtoD = [](auto...) { return notSupported("cuMemcpyHtoD"); };
  d.memcpyDtoH = [](auto...) { return notSupported("cuMemcpyDtoH"); };
  d.memsetD8 = [](auto...) { return notSupported("cuMemsetD8"); };
  d.memGetAddressRange = [](auto...) { return notSupported("cuMemGetAddressRange"); };
  d.memCreate = [](auto...) { return notSupported("cuMemCreate"); };
  d.memRelease = [](auto...) { return notSupported("cuMemRelease"); };
  d.memAddressReserve = [](auto...) { return notSupported("cuMemAddressReserve"); };
  d.memAddressFree = [](auto...) { return notSupported("cuMemAddressFree"); };
  d.memMap = [](auto...) { return notSupported("cuMemMap"); };
  d.memUnmap = [](auto...) { return notSupported("cuMemUnmap"); };
  d.memSetAccess = [](auto...) { return notSupported("cuMemSetAccess"); };
  d.memGetAllocationGranularity = [](auto...) { return notSupported("cuMemGetAllocationGranularity"); };
  d.memExportToShareableHandle = [](auto...) { return notSupported("cuMemExportToShareableHandle"); };
  d.memImportFromShareableHandle = [](auto...) { return notSupported("cuMemImportFromShareableHandle"); };
  d.memGetHandleForAddressRange = [](auto...) { return notSupported("cuMemGetHandleForAddressRange"); };
  d.ipcGetMemHandle = [](auto...) { return notSupported("cuIpcGetMemHandle"); };
  d.ipcOpenMemHandle = [](auto...) { return notSupported("cuIpcOpenMemHandle"); };
  d.ipcCloseMemHandle = [](auto...) { return notSupported("cuIpcCloseMemHandle"); };
  d.streamQuery = [](auto...) { return notSupported("cuStreamQuery"); };
  d.eventSynchronize = [](auto...) { return notSupported("cuEventSynchronize"); };
  d.funcGetAttribute = [](auto...) { return notSupported("cuFuncGetAttribute"); };
  d.funcSetAttribute = [](auto...) { return notSupported("cuFuncSetAttribute"); };
  d.moduleGetLoadingMode = [](auto...) { return notSupported("cuModuleGetLoadingMode"); };
  return d;
}

const Driver table = makeTable();

// The fake's own pairing of symbol names and entry points (see the top).
const std::pair<const char*, void*> symbols[] = {
    {"cuGetProcAddress", reinterpret_cast<void*>(table.getProcAddress)},
    {"cuGetErrorName", reinterpret_cast<void*>(table.getErrorName)},
    {"cuGetErrorString", reinterpret_cast<void*>(table.getErrorString)},
    {"cuInit", reinterpret_cast<void*>(table.init)},
    {"cuDriverGetVersion", reinterpret_cast<void*>(table.driverGetVersion)},
    {"cuDeviceGetCount", reinterpret_cast<void*>(table.deviceGetCount)},
    {"cuDeviceGet", reinterpret_cast<void*>(table.deviceGet)},
    {"cuDeviceGetAttribute", reinterpret_cast<void*>(table.deviceGetAttribute)},
    {"cuDeviceGetPCIBusId", reinterpret_cast<void*>(table.deviceGetPCIBusId)},
    {"cuDeviceCanAccessPeer", reinterpret_cast<void*>(table.deviceCanAccessPeer)},
    {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(table.devicePrimaryCtxRetain)},
    {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(table.devicePrimaryCtxRelease)},
    {"cuCtxGetCurrent", reinterpret_cast<void*>(table.ctxGetCurrent)},
    {"cuCtxSetCurrent", reinterpret_cast<void*>(table.ctxSetCurrent)},
    {"cuCtxGetDevice", reinterpret_cast<void*>(table.ctxGetDevice)},
    {"cuCtxEnablePeerAccess", reinterpret_cast<void*>(table.ctxEnablePeerAccess)},
    {"cuMemAlloc", reinterpret_cast<void*>(table.memAlloc)},
    {"cuMemFree", reinterpret_cast<void*>(table.memFree)},
    {"cuMemHostAlloc", reinterpret_cast<void*>(table.memHostAlloc)},
    {"cuMemHostGetDevicePointer", reinterpret_cast<void*>(table.memHostGetDevicePointer)},
    {"cuMemFreeHost", reinterpret_cast<void*>(table.memFreeHost)},
    {"cuMemHostRegister", reinterpret_cast<void*>(table.memHostRegister)},
    {"cuMemHostUnregister", reinterpret_cast<void*>(table.memHostUnregister)},
    {"cuMemcpyHtoD", reinterpret_cast<void*>(table.memcpyHtoD)},
    {"cuMemcpyDtoH", reinterpret_cast<void*>(table.memcpyDtoH)},
    {"cuMemcpyHtoDAsync", reinterpret_cast<void*>(table.memcpyHtoDAsync)},
    {"cuMemcpyAsync", reinterpret_cast<void*>(table.memcpyAsync)},
    {"cuMemcpyDtoHAsync", reinterpret_cast<void*>(table.memcpyDtoHAsync)},
    {"cuMemsetD8", reinterpret_cast<void*>(table.memsetD8)},
    {"cuMemsetD8Async", reinterpret_cast<void*>(table.memsetD8Async)},
    {"cuMemGetAddressRange", reinterpret_cast<void*>(table.memGetAddressRange)},
    {"cuMemCreate", reinterpret_cast<void*>(table.memCreate)},
    {"cuMemRelease", reinterpret_cast<void*>(table.memRelease)},
    {"cuMemAddressReserve", reinterpret_cast<void*>(table.memAddressReserve)},
    {"cuMemAddressFree", reinterpret_cast<void*>(table.memAddressFree)},
    {"cuMemMap", reinterpret_cast<void*>(table.memMap)},
    {"cuMemUnmap", reinterpret_cast<void*>(table.memUnmap)},
    {"cuMemSetAccess", reinterpret_cast<void*>(table.memSetAccess)},
    {"cuMemGetAllocationGranularity", reinterpret_cast<void*>(table.memGetAllocationGranularity)},
    {"cuMemExportToShareableHandle", reinterpret_cast<void*>(table.memExportToShareableHandle)},
    {"cuMemImportFromShareableHandle", reinterpret_cast<void*>(table.memImportFromShareableHandle)},
    {"cuMemGetHandleForAddressRange", reinterpret_cast<void*>(table.memGetHandleForAddressRange)},
    {"cuIpcGetMemHandle", reinterpret_cast<void*>(table.ipcGetMemHandle)},
    {"cuIpcOpenMemHandle", reinterpret_cast<void*>(table.ipcOpenMemHandle)},
    {"cuIpcCloseMemHandle", reinterpret_cast<void*>(table.ipcCloseMemHandle)},
    {"cuPointerGetAttributes", reinterpret_cast<void*>(table.pointerGetAttributes)},
    {"cuStreamCreate", reinterpret_cast<void*>(table.streamCreate)},
    {"cuStreamDestroy", reinterpret_cast<void*>(table.streamDestroy)},
    {"cuStreamSynchronize", reinterpret_cast<void*>(table.streamSynchronize)},
    {"cuStreamQuery", reinterpret_cast<void*>(table.streamQuery)},
    {"cuStreamWaitEvent", reinterpret_cast<void*>(table.streamWaitEvent)},
    {"cuStreamWaitValue64", reinterpret_cast<void*>(table.streamWaitValue64)},
    {"cuStreamGetCaptureInfo", reinterpret_cast<void*>(table.streamGetCaptureInfo)},
    {"cuThreadExchangeStreamCaptureMode", reinterpret_cast<void*>(table.threadExchangeStreamCaptureMode)},
    {"cuEventCreate", reinterpret_cast<void*>(table.eventCreate)},
    {"cuEventRecord", reinterpret_cast<void*>(table.eventRecord)},
    {"cuEventQuery", reinterpret_cast<void*>(table.eventQuery)},
    {"cuEventSynchronize", reinterpret_cast<void*>(table.eventSynchronize)},
    {"cuEventDestroy", reinterpret_cast<void*>(table.eventDestroy)},
    {"cuLaunchKernel", reinterpret_cast<void*>(table.launchKernel)},
    {"cuLaunchHostFunc", reinterpret_cast<void*>(table.launchHostFunc)},
    {"cuFuncGetAttribute", reinterpret_cast<void*>(table.funcGetAttribute)},
    {"cuFuncSetAttribute", reinterpret_cast<void*>(table.funcSetAttribute)},
    {"cuModuleGetLoadingMode", reinterpret_cast<void*>(table.moduleGetLoadingMode)},
    {"cuUserObjectCreate", reinterpret_cast<void*>(table.userObjectCreate)},
    {"cuUserObjectRelease", reinterpret_cast<void*>(table.userObjectRelease)},
    {"cuGraphRetainUserObject", reinterpret_cast<void*>(table.graphRetainUserObject)},
};

void* lookup(const char* symbol) {
  for (const auto& [name, fn] : symbols)
    if (strcmp(name, symbol) == 0) return fn;
  return nullptr;
}

CUresult getProcAddressV2(const char* symbol, void** fn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult* status) {
  state.calls.push_back(std::string("proc:") + symbol);
  state.procVersions.push_back(version);
  state.procFlags.push_back(flags);
  *fn = state.missingSymbol == symbol ? nullptr : lookup(symbol);
  if (status) *status = *fn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

void resetState() {
  for (fake::UserObject* o : state.userObjects) delete o;
  auto destroyGraphs = state.destroyGraphs;
  auto currentContext = state.currentContext;
  auto mode = state.captureMode;
  auto setMode = state.setCaptureMode;
  auto reset = state.reset;
  state = State{};
  state.destroyGraphs = destroyGraphs;
  state.currentContext = currentContext;
  state.captureMode = mode;
  state.setCaptureMode = setMode;
  state.reset = reset;
  state.retains.assign(8, 0);
  state.releases.assign(8, 0);
  current = nullptr;
  captureMode = CU_STREAM_CAPTURE_MODE_GLOBAL;
}

const bool initialised = [] {
  state.destroyGraphs = [] {
    auto owned = std::move(state.graphOwned);
    state.graphOwned.clear();
    for (fake::UserObject* o : owned) table.userObjectRelease(reinterpret_cast<CUuserObject>(o), 1);
  };
  state.currentContext = [] { return current; };
  state.captureMode = [] { return captureMode; };
  state.setCaptureMode = [](int mode) { captureMode = mode; };
  state.reset = resetState;
  resetState();
  return true;
}();

}  // namespace

extern "C" {

__attribute__((visibility("default"))) fake::State* plexusFakeCuda() { return &state; }
__attribute__((visibility("default"))) void* plexusFakeCudaSymbol(const char* symbol) { return lookup(symbol); }

#ifdef PLEXUS_FAKE_CUDA_V1_ONLY
// A driver older than CUDA 12.0: cuGetProcAddress without the status output, and no _v2.
__attribute__((visibility("default"))) CUresult cuGetProcAddress(const char* symbol, void** fn, int version,
                                                                 cuuint64_t flags) {
  return getProcAddressV2(symbol, fn, version, flags, nullptr);
}
#else
__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char* symbol, void** fn, int version,
                                                                    cuuint64_t flags,
                                                                    CUdriverProcAddressQueryResult* status) {
  return getProcAddressV2(symbol, fn, version, flags, status);
}
#endif
}
