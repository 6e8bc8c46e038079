// The CUDA driver (libcuda.so.1), loaded at run time: the types, constants and entry points the CUDA backend and
// the plugins that touch GPU memory use, declared here rather than taken from cuda.h so that the core and every
// plugin build, load and run where no CUDA toolkit or driver exists. Header-only C++ (C++17 or newer), namespace
// plexus::cuda; it needs dlopen (glibc's libc, or -ldl on older ones).
//
// Every value and layout below is cuda.h's; tests/unit_cuda/test_driver_abi.cc checks each against cuda.h and each
// entry point's type against cudaTypedefs.h wherever a toolkit is installed. Entry points are resolved as NCCL does,
// through cuGetProcAddress at the CUDA 12.0 ABI (kDriverAbiVersion): the driver then hands out the 12.0 flavour of
// each call (cuMemAlloc is cuMemAlloc_v2, cuStreamGetCaptureInfo the 6-argument _v2, cuCtxGetDevice the 1-argument
// one), whatever newer ABI a newer driver also has, so the signatures here hold on every driver from 12.0 on.
//
// Where a translation unit also includes cuda.h, in either order: the names here live in plexus::cuda, so qualify
// them (a using-directive would make CUDA_SUCCESS ambiguous). cuda.h spells a few constants as macros
// (CU_MEMHOSTALLOC_*, CU_MEMHOSTREGISTER_*, CU_LAUNCH_PARAM_*_AS_INT, CU_IPC_HANDLE_SIZE): this header defines its
// own with those macros out of the way, and after cuda.h they are its macros again (same values: write them
// unqualified there). cuda.h also renames entry points by macro (cuMemAlloc -> cuMemAlloc_v2), which is why Driver's
// members drop the "cu" prefix (driver->memAlloc is cuMemAlloc).
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

// The driver's handle types are pointers to these incomplete structs, under the very tags cuda.h and
// cuda_runtime_api.h use, so a CUstream here is a cudaStream_t (nccl.h's too) and the two headers mix freely.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUevent_st;
struct CUstream_st;
struct CUgraph_st;
struct CUgraphNode_st;
struct CUuserObject_st;

namespace plexus::cuda {

static_assert(sizeof(void*) == 8, "CUdeviceptr is 64 bits wide on the 64-bit platforms CUDA 12 supports");

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using cuuint64_t = uint64_t;
using CUcontext = ::CUctx_st*;
using CUmodule = ::CUmod_st*;
using CUfunction = ::CUfunc_st*;
using CUevent = ::CUevent_st*;
using CUstream = ::CUstream_st*;
using CUgraph = ::CUgraph_st*;
using CUgraphNode = ::CUgraphNode_st*;
using CUuserObject = ::CUuserObject_st*;
using CUmemGenericAllocationHandle = unsigned long long;
using CUhostFn = void (*)(void* userData);

// cuda.h's enums, as int: passed by value and through pointers they are 4-byte integers in the driver's ABI.
using CUdevice_attribute = int;
using CUpointer_attribute = int;
using CUmemorytype = int;
using CUfunction_attribute = int;
using CUstreamCaptureStatus = int;
using CUstreamCaptureMode = int;
using CUmemAllocationType = int;
using CUmemAllocationHandleType = int;
using CUmemLocationType = int;
using CUmemAccess_flags = int;
using CUmemAllocationGranularity_flags = int;
using CUmemRangeHandleType = int;
using CUmoduleLoadingMode = int;
using CUdriverProcAddressQueryResult = int;

// The ABI every entry point is resolved at (CUDA 12.0), and the oldest driver Plexus accepts.
inline constexpr int kDriverAbiVersion = 12000;

// CUresult values.
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_DEINITIALIZED = 4;
inline constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
inline constexpr CUresult CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER = 36;
inline constexpr CUresult CUDA_ERROR_DEVICE_UNAVAILABLE = 46;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
inline constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
inline constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
inline constexpr CUresult CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217;
inline constexpr CUresult CUDA_ERROR_OPERATING_SYSTEM = 304;
inline constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
inline constexpr CUresult CUDA_ERROR_ILLEGAL_ADDRESS = 700;
inline constexpr CUresult CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701;
inline constexpr CUresult CUDA_ERROR_LAUNCH_TIMEOUT = 702;
inline constexpr CUresult CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704;
inline constexpr CUresult CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705;
inline constexpr CUresult CUDA_ERROR_CONTEXT_IS_DESTROYED = 709;
inline constexpr CUresult CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712;
inline constexpr CUresult CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713;
inline constexpr CUresult CUDA_ERROR_LAUNCH_FAILED = 719;
inline constexpr CUresult CUDA_ERROR_NOT_PERMITTED = 800;
inline constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;
inline constexpr CUresult CUDA_ERROR_SYSTEM_NOT_READY = 802;
inline constexpr CUresult CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803;
inline constexpr CUresult CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908;
inline constexpr CUresult CUDA_ERROR_UNKNOWN = 999;

// cuGetProcAddress.
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_DEFAULT = 0;
inline constexpr CUdriverProcAddressQueryResult CU_GET_PROC_ADDRESS_SUCCESS = 0;
inline constexpr CUdriverProcAddressQueryResult CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1;
inline constexpr CUdriverProcAddressQueryResult CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2;

// Device attributes.
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 91;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 116;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124;

// Pointer attributes and memory types.
inline constexpr CUpointer_attribute CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2;
inline constexpr CUpointer_attribute CU_POINTER_ATTRIBUTE_IS_MANAGED = 8;
inline constexpr CUpointer_attribute CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;
inline constexpr CUmemorytype CU_MEMORYTYPE_HOST = 0x01;
inline constexpr CUmemorytype CU_MEMORYTYPE_DEVICE = 0x02;
inline constexpr CUmemorytype CU_MEMORYTYPE_ARRAY = 0x03;
inline constexpr CUmemorytype CU_MEMORYTYPE_UNIFIED = 0x04;

// Function attributes and the module loading mode.
inline constexpr CUfunction_attribute CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
inline constexpr CUfunction_attribute CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
inline constexpr CUfunction_attribute CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
inline constexpr CUmoduleLoadingMode CU_MODULE_EAGER_LOADING = 0x1;
inline constexpr CUmoduleLoadingMode CU_MODULE_LAZY_LOADING = 0x2;

// Streams, events, capture, graphs.
inline constexpr unsigned CU_STREAM_DEFAULT = 0x0;
inline constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
inline constexpr unsigned CU_STREAM_WAIT_VALUE_GEQ = 0x0;
inline constexpr unsigned CU_EVENT_DEFAULT = 0x0;
inline constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
inline constexpr CUstreamCaptureStatus CU_STREAM_CAPTURE_STATUS_NONE = 0;
inline constexpr CUstreamCaptureStatus CU_STREAM_CAPTURE_STATUS_ACTIVE = 1;
inline constexpr CUstreamCaptureStatus CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2;
inline constexpr CUstreamCaptureMode CU_STREAM_CAPTURE_MODE_GLOBAL = 0;
inline constexpr CUstreamCaptureMode CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
inline constexpr CUstreamCaptureMode CU_STREAM_CAPTURE_MODE_RELAXED = 2;
inline constexpr unsigned CU_USER_OBJECT_NO_DESTRUCTOR_SYNC = 1;
inline constexpr unsigned CU_GRAPH_USER_OBJECT_MOVE = 1;

// Legacy IPC handles.
inline constexpr unsigned CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1;

// Virtual memory management (cuMemCreate and friends) and dma-buf export.
inline constexpr CUmemAllocationType CU_MEM_ALLOCATION_TYPE_PINNED = 0x1;
inline constexpr CUmemAllocationHandleType CU_MEM_HANDLE_TYPE_NONE = 0x0;
inline constexpr CUmemAllocationHandleType CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1;
inline constexpr CUmemLocationType CU_MEM_LOCATION_TYPE_DEVICE = 0x1;
inline constexpr CUmemAccess_flags CU_MEM_ACCESS_FLAGS_PROT_NONE = 0x0;
inline constexpr CUmemAccess_flags CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3;
inline constexpr CUmemAllocationGranularity_flags CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0;
inline constexpr CUmemAllocationGranularity_flags CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1;
inline constexpr CUmemRangeHandleType CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 0x1;

// The constants cuda.h defines as macros: ours are defined with those macros out of the way (see the top).
#pragma push_macro("CU_MEMHOSTALLOC_PORTABLE")
#pragma push_macro("CU_MEMHOSTALLOC_DEVICEMAP")
#pragma push_macro("CU_MEMHOSTALLOC_WRITECOMBINED")
#pragma push_macro("CU_MEMHOSTREGISTER_PORTABLE")
#pragma push_macro("CU_MEMHOSTREGISTER_DEVICEMAP")
#pragma push_macro("CU_LAUNCH_PARAM_END_AS_INT")
#pragma push_macro("CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT")
#pragma push_macro("CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT")
#pragma push_macro("CU_IPC_HANDLE_SIZE")
#undef CU_MEMHOSTALLOC_PORTABLE
#undef CU_MEMHOSTALLOC_DEVICEMAP
#undef CU_MEMHOSTALLOC_WRITECOMBINED
#undef CU_MEMHOSTREGISTER_PORTABLE
#undef CU_MEMHOSTREGISTER_DEVICEMAP
#undef CU_LAUNCH_PARAM_END_AS_INT
#undef CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT
#undef CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT
#undef CU_IPC_HANDLE_SIZE
inline constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 0x01;
inline constexpr unsigned CU_MEMHOSTALLOC_DEVICEMAP = 0x02;
inline constexpr unsigned CU_MEMHOSTALLOC_WRITECOMBINED = 0x04;
inline constexpr unsigned CU_MEMHOSTREGISTER_PORTABLE = 0x01;
inline constexpr unsigned CU_MEMHOSTREGISTER_DEVICEMAP = 0x02;
// cuLaunchKernel's `extra` array: cuda.h's CU_LAUNCH_PARAM_END/BUFFER_POINTER/BUFFER_SIZE are these values cast to
// void*, which no constant expression can spell; see launchParam().
inline constexpr uintptr_t CU_LAUNCH_PARAM_END_AS_INT = 0x00;
inline constexpr uintptr_t CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT = 0x01;
inline constexpr uintptr_t CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT = 0x02;
inline constexpr size_t CU_IPC_HANDLE_SIZE = 64;
#pragma pop_macro("CU_MEMHOSTALLOC_PORTABLE")
#pragma pop_macro("CU_MEMHOSTALLOC_DEVICEMAP")
#pragma pop_macro("CU_MEMHOSTALLOC_WRITECOMBINED")
#pragma pop_macro("CU_MEMHOSTREGISTER_PORTABLE")
#pragma pop_macro("CU_MEMHOSTREGISTER_DEVICEMAP")
#pragma pop_macro("CU_LAUNCH_PARAM_END_AS_INT")
#pragma pop_macro("CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT")
#pragma pop_macro("CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT")
#pragma pop_macro("CU_IPC_HANDLE_SIZE")

inline void* launchParam(uintptr_t value) { return reinterpret_cast<void*>(value); }

// The structs the VMM and IPC calls take, laid out as cuda.h's CUmemLocation_v1, CUmemAllocationProp_v1,
// CUmemAccessDesc_v1 and CUipcMemHandle_v1.
struct CUmemLocation {
  CUmemLocationType type;
  int id;
};
struct CUmemAllocationProp {
  CUmemAllocationType type;
  CUmemAllocationHandleType requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;  // zero on Linux
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};
struct CUmemAccessDesc {
  CUmemLocation location;
  CUmemAccess_flags flags;
};
struct CUipcMemHandle {
  char reserved[64];
};

// The driver's entry points this project uses, as cuGetProcAddress returns them at kDriverAbiVersion; each member is
// its entry point's name without "cu" (see the top), with cuda.h's parameter names.
struct Driver {
  void* library = nullptr;  // the dlopen handle, never closed: a driver that ran cuInit may have threads of its own
  int version = 0;          // cuDriverGetVersion: 12040 is CUDA 12.4

  CUresult (*getProcAddress)(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus) = nullptr;
  CUresult (*getErrorName)(CUresult error, const char** pStr) = nullptr;
  CUresult (*getErrorString)(CUresult error, const char** pStr) = nullptr;
  CUresult (*init)(unsigned int flags) = nullptr;
  CUresult (*driverGetVersion)(int* driverVersion) = nullptr;

  CUresult (*deviceGetCount)(int* count) = nullptr;
  CUresult (*deviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*deviceGetAttribute)(int* pi, CUdevice_attribute attrib, CUdevice dev) = nullptr;
  CUresult (*deviceGetPCIBusId)(char* pciBusId, int len, CUdevice dev) = nullptr;
  CUresult (*deviceCanAccessPeer)(int* canAccessPeer, CUdevice dev, CUdevice peerDev) = nullptr;
  CUresult (*devicePrimaryCtxRetain)(CUcontext* pctx, CUdevice dev) = nullptr;
  CUresult (*devicePrimaryCtxRelease)(CUdevice dev) = nullptr;

  CUresult (*ctxGetCurrent)(CUcontext* pctx) = nullptr;
  CUresult (*ctxSetCurrent)(CUcontext ctx) = nullptr;
  CUresult (*ctxGetDevice)(CUdevice* device) = nullptr;
  CUresult (*ctxEnablePeerAccess)(CUcontext peerContext, unsigned int flags) = nullptr;

  CUresult (*memAlloc)(CUdeviceptr* dptr, size_t bytesize) = nullptr;
  CUresult (*memFree)(CUdeviceptr dptr) = nullptr;
  CUresult (*memHostAlloc)(void** pp, size_t bytesize, unsigned int flags) = nullptr;
  CUresult (*memHostGetDevicePointer)(CUdeviceptr* pdptr, void* p, unsigned int flags) = nullptr;
  CUresult (*memFreeHost)(void* p) = nullptr;
  CUresult (*memHostRegister)(void* p, size_t bytesize, unsigned int flags) = nullptr;
  CUresult (*memHostUnregister)(void* p) = nullptr;
  CUresult (*memcpyHtoD)(CUdeviceptr dstDevice, const void* srcHost, size_t byteCount) = nullptr;
  CUresult (*memcpyDtoH)(void* dstHost, CUdeviceptr srcDevice, size_t byteCount) = nullptr;
  CUresult (*memcpyHtoDAsync)(CUdeviceptr dstDevice, const void* srcHost, size_t byteCount, CUstream stream) = nullptr;
  CUresult (*memcpyDtoHAsync)(void* dstHost, CUdeviceptr srcDevice, size_t byteCount, CUstream stream) = nullptr;
  CUresult (*memcpyAsync)(CUdeviceptr dst, CUdeviceptr src, size_t byteCount, CUstream stream) = nullptr;
  CUresult (*memsetD8)(CUdeviceptr dstDevice, unsigned char uc, size_t n) = nullptr;
  CUresult (*memsetD8Async)(CUdeviceptr dstDevice, unsigned char uc, size_t n, CUstream stream) = nullptr;
  CUresult (*memGetAddressRange)(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) = nullptr;

  CUresult (*memCreate)(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                        unsigned long long flags) = nullptr;
  CUresult (*memRelease)(CUmemGenericAllocationHandle handle) = nullptr;
  CUresult (*memAddressReserve)(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                unsigned long long flags) = nullptr;
  CUresult (*memAddressFree)(CUdeviceptr ptr, size_t size) = nullptr;
  CUresult (*memMap)(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                     unsigned long long flags) = nullptr;
  CUresult (*memUnmap)(CUdeviceptr ptr, size_t size) = nullptr;
  CUresult (*memSetAccess)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) = nullptr;
  CUresult (*memGetAllocationGranularity)(size_t* granularity, const CUmemAllocationProp* prop,
                                          CUmemAllocationGranularity_flags option) = nullptr;
  CUresult (*memExportToShareableHandle)(void* shareableHandle, CUmemGenericAllocationHandle handle,
                                         CUmemAllocationHandleType handleType, unsigned long long flags) = nullptr;
  CUresult (*memImportFromShareableHandle)(CUmemGenericAllocationHandle* handle, void* osHandle,
                                           CUmemAllocationHandleType shHandleType) = nullptr;
  CUresult (*memGetHandleForAddressRange)(void* handle, CUdeviceptr dptr, size_t size, CUmemRangeHandleType handleType,
                                          unsigned long long flags) = nullptr;

  CUresult (*ipcGetMemHandle)(CUipcMemHandle* pHandle, CUdeviceptr dptr) = nullptr;
  CUresult (*ipcOpenMemHandle)(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) = nullptr;
  CUresult (*ipcCloseMemHandle)(CUdeviceptr dptr) = nullptr;
  CUresult (*pointerGetAttributes)(unsigned int numAttributes, CUpointer_attribute* attributes, void** data,
                                   CUdeviceptr ptr) = nullptr;

  CUresult (*streamCreate)(CUstream* phStream, unsigned int flags) = nullptr;
  CUresult (*streamDestroy)(CUstream hStream) = nullptr;
  CUresult (*streamSynchronize)(CUstream hStream) = nullptr;
  CUresult (*streamQuery)(CUstream hStream) = nullptr;
  CUresult (*streamWaitEvent)(CUstream hStream, CUevent hEvent, unsigned int flags) = nullptr;
  CUresult (*streamWaitValue64)(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags) = nullptr;
  // The CUDA 11.3 signature (cuStreamGetCaptureInfo_v2): every output but captureStatus may be null.
  CUresult (*streamGetCaptureInfo)(CUstream hStream, CUstreamCaptureStatus* captureStatus, cuuint64_t* id,
                                   CUgraph* graph, const CUgraphNode** dependencies, size_t* numDependencies) = nullptr;
  CUresult (*threadExchangeStreamCaptureMode)(CUstreamCaptureMode* mode) = nullptr;

  CUresult (*eventCreate)(CUevent* phEvent, unsigned int flags) = nullptr;
  CUresult (*eventRecord)(CUevent hEvent, CUstream hStream) = nullptr;
  CUresult (*eventQuery)(CUevent hEvent) = nullptr;
  CUresult (*eventSynchronize)(CUevent hEvent) = nullptr;
  CUresult (*eventDestroy)(CUevent hEvent) = nullptr;

  CUresult (*launchKernel)(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                           unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                           unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) = nullptr;
  CUresult (*launchHostFunc)(CUstream hStream, CUhostFn fn, void* userData) = nullptr;
  CUresult (*funcGetAttribute)(int* pi, CUfunction_attribute attrib, CUfunction hfunc) = nullptr;
  CUresult (*funcSetAttribute)(CUfunction hfunc, CUfunction_attribute attrib, int value) = nullptr;
  CUresult (*moduleGetLoadingMode)(CUmoduleLoadingMode* mode) = nullptr;

  CUresult (*userObjectCreate)(CUuserObject* objectOut, void* ptr, CUhostFn destroy, unsigned int initialRefcount,
                               unsigned int flags) = nullptr;
  CUresult (*userObjectRelease)(CUuserObject object, unsigned int count) = nullptr;
  CUresult (*graphRetainUserObject)(CUgraph graph, CUuserObject object, unsigned int count,
                                    unsigned int flags) = nullptr;
};

// Names and descriptions of the results a caller is likely to meet, for where the driver cannot give them (the
// toolkit's stub library answers every call, cuGetErrorName included, with CUDA_ERROR_STUB_LIBRARY).
struct ResultName {
  CUresult result;
  const char* name;
  const char* description;
};
inline constexpr ResultName kResultNames[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER",
     "the call requires a newer driver"},
    {CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) busy or unavailable"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for the device"},
    {CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported"},
    {CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
    {CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_SYSTEM_NOT_READY, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized"},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
     "forward compatibility was attempted on non supported HW"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

// The name of result from the table above; nullptr for one it lacks.
constexpr const char* resultName(CUresult result) {
  for (const ResultName& r : kResultNames)
    if (r.result == result) return r.name;
  return nullptr;
}

// "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)". The driver names the result where it can (it knows
// the codes newer than this header); the table above does otherwise. driver may be null.
inline std::string failureMessage(const Driver* driver, const char* call, CUresult result) {
  const char* name = nullptr;
  const char* description = nullptr;
  if (driver && driver->getErrorName && driver->getErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
  if (driver && driver->getErrorString && driver->getErrorString(result, &description) != CUDA_SUCCESS)
    description = nullptr;
  for (const ResultName& r : kResultNames) {
    if (r.result != result) continue;
    if (!name) name = r.name;
    if (!description) description = r.description;
  }
  std::string out = std::string(call) + " failed: ";
  if (name) {
    out += name;
  } else {
    out += "CUDA error " + std::to_string(result);
  }
  out += " (";
  out += description ? description : "no description";
  out += ")";
  return out;
}

namespace detail {

inline constexpr const char* kUseHost = "use the host backend (PLEXUS_BACKEND=host)";

// cuGetProcAddress in its CUDA 12.0 form, or its CUDA 11.3 one (no status output), which is all a driver older
// than 12.0 has: that one still answers cuDriverGetVersion, so the error can say how old the driver is.
struct ProcAddress {
  CUresult (*v2)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*) = nullptr;
  CUresult (*v1)(const char*, void**, int, cuuint64_t) = nullptr;

  CUresult get(const char* symbol, void** fn, CUdriverProcAddressQueryResult* status) const {
    *status = CU_GET_PROC_ADDRESS_SUCCESS;
    if (v2) return v2(symbol, fn, kDriverAbiVersion, CU_GET_PROC_ADDRESS_DEFAULT, status);
    return v1(symbol, fn, kDriverAbiVersion, CU_GET_PROC_ADDRESS_DEFAULT);
  }
};

inline std::string stubOrFailure(const char* path, const Driver* driver, const char* call, CUresult result) {
  if (result == CUDA_ERROR_STUB_LIBRARY)
    return std::string(path) + " is the CUDA toolkit's stub library, not a driver (" +
           failureMessage(driver, call, result) + "): install the NVIDIA driver, or " + kUseHost;
  return failureMessage(driver, call, result);
}

template <class Fn>
bool resolve(const ProcAddress& proc, const char* path, const char* symbol, Fn* slot, std::string* error) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  const CUresult result = proc.get(symbol, &fn, &status);
  if (result == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS && fn) {
    *slot = reinterpret_cast<Fn>(fn);
    return true;
  }
  // A driver says a symbol is missing through the status (12.0 on), or with CUDA_ERROR_NOT_FOUND (11.x).
  const bool missing = result != CUDA_ERROR_STUB_LIBRARY &&
                       (status != CU_GET_PROC_ADDRESS_SUCCESS || result == CUDA_ERROR_NOT_FOUND || !fn);
  if (!missing) {
    *error = stubOrFailure(path, nullptr, (std::string("cuGetProcAddress(") + symbol + ")").c_str(), result);
  } else {
    *error = std::string("the CUDA driver ") + path + " lacks " + symbol + " at the CUDA " +
             std::to_string(kDriverAbiVersion / 1000) + "." + std::to_string(kDriverAbiVersion % 1000 / 10) + " ABI (" +
             (status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? "only a newer version of it exists"
                                                                   : "no such symbol") +
             "): update the NVIDIA driver, or " + kUseHost;
  }
  return false;
}

}  // namespace detail

// Loads the driver at path (nullptr: "libcuda.so.1", found as the dynamic loader finds libraries), resolves every
// entry point of Driver, runs cuInit(0) and checks that the driver runs CUDA 12.0 or newer. Not cached: driver()
// is what the runtime uses; this is for tests and tools. On failure *error says what happened and what to do, and
// out is left empty.
inline bool loadDriver(const char* path, Driver* out, std::string* error) {
  *out = Driver{};
  if (!path) path = "libcuda.so.1";
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* why = dlerror();
    *error = std::string(path) + " could not be loaded (" + (why ? why : "no reason given") +
             "): no NVIDIA driver on this machine; " + detail::kUseHost;
    return false;
  }
  // Until cuInit has run the library can go again; afterwards the driver may have started threads (see Driver).
  auto fail = [&](bool initialised) {
    if (!initialised) dlclose(library);
    *out = Driver{};
    return false;
  };
  detail::ProcAddress proc;
  proc.v2 = reinterpret_cast<decltype(proc.v2)>(dlsym(library, "cuGetProcAddress_v2"));
  if (!proc.v2) proc.v1 = reinterpret_cast<decltype(proc.v1)>(dlsym(library, "cuGetProcAddress"));
  if (!proc.v2 && !proc.v1) {
    *error = std::string(path) +
             " exports neither cuGetProcAddress_v2 nor cuGetProcAddress: it is not a CUDA driver, or one older than "
             "CUDA 11.3; install a recent NVIDIA driver, or " +
             detail::kUseHost;
    return fail(false);
  }

  Driver d;
  d.library = library;
  // What cuInit and the version check need first: an old driver may lack the rest, and its error should say so.
  if (!detail::resolve(proc, path, "cuGetErrorName", &d.getErrorName, error) ||
      !detail::resolve(proc, path, "cuGetErrorString", &d.getErrorString, error) ||
      !detail::resolve(proc, path, "cuInit", &d.init, error) ||
      !detail::resolve(proc, path, "cuDriverGetVersion", &d.driverGetVersion, error))
    return fail(false);
  if (const CUresult result = d.init(0); result != CUDA_SUCCESS) {
    *error = detail::stubOrFailure(path, &d, "cuInit", result);
    if (result == CUDA_ERROR_NO_DEVICE)
      *error +=
          ": no CUDA device is visible to this process (check CUDA_VISIBLE_DEVICES); " + std::string(detail::kUseHost);
    else if (result != CUDA_ERROR_STUB_LIBRARY)
      *error += ": the NVIDIA driver cannot start; " + std::string(detail::kUseHost);
    return fail(true);
  }
  if (const CUresult result = d.driverGetVersion(&d.version); result != CUDA_SUCCESS) {
    *error = failureMessage(&d, "cuDriverGetVersion", result);
    return fail(true);
  }
  if (d.version < kDriverAbiVersion) {
    *error = "the CUDA driver supports CUDA " + std::to_string(d.version / 1000) + "." +
             std::to_string(d.version % 1000 / 10) + "; Plexus needs 12.0 or newer: update the NVIDIA driver, or " +
             detail::kUseHost;
    return fail(true);
  }

  auto get = [&](const char* symbol, auto* slot) { return detail::resolve(proc, path, symbol, slot, error); };
  const bool resolved =
      get("cuGetProcAddress", &d.getProcAddress) && get("cuDeviceGetCount", &d.deviceGetCount) &&
      get("cuDeviceGet", &d.deviceGet) && get("cuDeviceGetAttribute", &d.deviceGetAttribute) &&
      get("cuDeviceGetPCIBusId", &d.deviceGetPCIBusId) && get("cuDeviceCanAccessPeer", &d.deviceCanAccessPeer) &&
      get("cuDevicePrimaryCtxRetain", &d.devicePrimaryCtxRetain) &&
      get("cuDevicePrimaryCtxRelease", &d.devicePrimaryCtxRelease) && get("cuCtxGetCurrent", &d.ctxGetCurrent) &&
      get("cuCtxSetCurrent", &d.ctxSetCurrent) && get("cuCtxGetDevice", &d.ctxGetDevice) &&
      get("cuCtxEnablePeerAccess", &d.ctxEnablePeerAccess) && get("cuMemAlloc", &d.memAlloc) &&
      get("cuMemFree", &d.memFree) && get("cuMemHostAlloc", &d.memHostAlloc) &&
      get("cuMemHostGetDevicePointer", &d.memHostGetDevicePointer) && get("cuMemFreeHost", &d.memFreeHost) &&
      get("cuMemHostRegister", &d.memHostRegister) && get("cuMemHostUnregister", &d.memHostUnregister) &&
      get("cuMemcpyHtoD", &d.memcpyHtoD) && get("cuMemcpyDtoH", &d.memcpyDtoH) &&
      get("cuMemcpyHtoDAsync", &d.memcpyHtoDAsync) && get("cuMemcpyDtoHAsync", &d.memcpyDtoHAsync) &&
      get("cuMemcpyAsync", &d.memcpyAsync) &&
      get("cuMemsetD8", &d.memsetD8) && get("cuMemsetD8Async", &d.memsetD8Async) &&
      get("cuMemGetAddressRange", &d.memGetAddressRange) && get("cuMemCreate", &d.memCreate) &&
      get("cuMemRelease", &d.memRelease) && get("cuMemAddressReserve", &d.memAddressReserve) &&
      get("cuMemAddressFree", &d.memAddressFree) && get("cuMemMap", &d.memMap) && get("cuMemUnmap", &d.memUnmap) &&
      get("cuMemSetAccess", &d.memSetAccess) && get("cuMemGetAllocationGranularity", &d.memGetAllocationGranularity) &&
      get("cuMemExportToShareableHandle", &d.memExportToShareableHandle) &&
      get("cuMemImportFromShareableHandle", &d.memImportFromShareableHandle) &&
      get("cuMemGetHandleForAddressRange", &d.memGetHandleForAddressRange) &&
      get("cuIpcGetMemHandle", &d.ipcGetMemHandle) && get("cuIpcOpenMemHandle", &d.ipcOpenMemHandle) &&
      get("cuIpcCloseMemHandle", &d.ipcCloseMemHandle) && get("cuPointerGetAttributes", &d.pointerGetAttributes) &&
      get("cuStreamCreate", &d.streamCreate) && get("cuStreamDestroy", &d.streamDestroy) &&
      get("cuStreamSynchronize", &d.streamSynchronize) && get("cuStreamQuery", &d.streamQuery) &&
      get("cuStreamWaitEvent", &d.streamWaitEvent) && get("cuStreamWaitValue64", &d.streamWaitValue64) &&
      get("cuStreamGetCaptureInfo", &d.streamGetCaptureInfo) &&
      get("cuThreadExchangeStreamCaptureMode", &d.threadExchangeStreamCaptureMode) &&
      get("cuEventCreate", &d.eventCreate) && get("cuEventRecord", &d.eventRecord) &&
      get("cuEventQuery", &d.eventQuery) && get("cuEventSynchronize", &d.eventSynchronize) &&
      get("cuEventDestroy", &d.eventDestroy) && get("cuLaunchKernel", &d.launchKernel) &&
      get("cuLaunchHostFunc", &d.launchHostFunc) && get("cuFuncGetAttribute", &d.funcGetAttribute) &&
      get("cuFuncSetAttribute", &d.funcSetAttribute) && get("cuModuleGetLoadingMode", &d.moduleGetLoadingMode) &&
      get("cuUserObjectCreate", &d.userObjectCreate) && get("cuUserObjectRelease", &d.userObjectRelease) &&
      get("cuGraphRetainUserObject", &d.graphRetainUserObject);
  if (!resolved) return fail(true);
  *out = d;
  return true;
}

// The process's driver: loaded on the first call (from PLEXUS_CUDA_DRIVER when set, else libcuda.so.1), once, even
// when threads race; a failure is remembered and every later call gets its message. Each shared object that includes
// this header has its own copy (hidden visibility), which costs one dlopen of an already loaded library.
inline const Driver* driver(std::string* error) {
  struct Loaded {
    Driver driver;
    bool ok = false;
    std::string error;
  };
  // Never destroyed: threads (the driver's callbacks, proxies) may still use it while the process exits.
  static const Loaded* loaded = [] {
    auto* l = new Loaded;
    const char* path = getenv("PLEXUS_CUDA_DRIVER");
    if (path && !*path) path = nullptr;
    l->ok = loadDriver(path, &l->driver, &l->error);
    if (!l->ok && path) l->error += " (the path comes from PLEXUS_CUDA_DRIVER)";
    return l;
  }();
  if (!loaded->ok) {
    if (error) *error = loaded->error;
    return nullptr;
  }
  return &loaded->driver;
}

}  // namespace plexus::cuda
