// plexus/cuda/driver.h against the CUDA toolkit's own headers, at compile time: every constant equals cuda.h's,
// every struct has cuda.h's size, alignment and field offsets, and every entry point of Driver has the type
// cudaTypedefs.h gives the version cuGetProcAddress returns at the CUDA 12.0 ABI. Built only where cuda.h exists;
// if it compiles, it passes (main only says so).
#include <cuda.h>
#include <cudaTypedefs.h>

// After cuda.h on purpose: its macros (cuMemAlloc -> cuMemAlloc_v2, CU_MEMHOSTALLOC_PORTABLE -> 0x01) are then
// live while the header compiles. test_driver_abi_order.cc includes the two the other way round.
#include <plexus/cuda/driver.h>

#include <cstddef>
#include <cstdio>
#include <string_view>
#include <type_traits>

namespace pc = plexus::cuda;

namespace {

// Whether two types are the same to the driver's ABI: identical; or an enum of cuda.h and the integer this header
// declares in its place, of one size; or pointers to such (with the same const); or functions made of such. Plain
// integers must match exactly, so an int where cuda.h has unsigned int still fails.
template <class A, class B>
struct StructTwin : std::false_type {};
template <>
struct StructTwin<pc::CUmemLocation, ::CUmemLocation> : std::true_type {};
template <>
struct StructTwin<pc::CUmemAllocationProp, ::CUmemAllocationProp> : std::true_type {};
template <>
struct StructTwin<pc::CUmemAccessDesc, ::CUmemAccessDesc> : std::true_type {};
template <>
struct StructTwin<pc::CUipcMemHandle, ::CUipcMemHandle> : std::true_type {};

template <class A, class B>
constexpr bool abiSame();

template <class... A>
struct List {};

template <class... A, class... B>
constexpr bool argsSame(List<A...>, List<B...>) {
  if constexpr (sizeof...(A) != sizeof...(B))
    return false;
  else
    return (abiSame<A, B>() && ...);
}

template <class A, class B>
struct FunctionSame : std::false_type {};
template <class RA, class... A, class RB, class... B>
struct FunctionSame<RA(A...), RB(B...)>
    : std::bool_constant<abiSame<RA, RB>() && argsSame(List<A...>{}, List<B...>{})> {};

template <class T>
constexpr bool integerLike = std::is_integral_v<T> || std::is_enum_v<T>;

template <class A, class B>
constexpr bool abiSame() {
  if constexpr (std::is_same_v<A, B>) {
    return true;
  } else if constexpr ((std::is_enum_v<A> || std::is_enum_v<B>)&&integerLike<A> && integerLike<B>) {
    return sizeof(A) == sizeof(B);
  } else if constexpr (std::is_pointer_v<A> && std::is_pointer_v<B>) {
    using PA = std::remove_pointer_t<A>;
    using PB = std::remove_pointer_t<B>;
    if constexpr (std::is_function_v<PA> || std::is_function_v<PB>)
      return FunctionSame<PA, PB>::value;
    else
      return std::is_const_v<PA> == std::is_const_v<PB> && std::is_volatile_v<PA> == std::is_volatile_v<PB> &&
             abiSame<std::remove_cv_t<PA>, std::remove_cv_t<PB>>();
  } else {
    return StructTwin<A, B>::value;
  }
}

// The trait itself must be able to say no.
static_assert(!abiSame<int, unsigned>());
static_assert(!abiSame<int*, const int*>());
static_assert(!abiSame<CUresult (*)(int), CUresult (*)(int, int)>());
static_assert(!abiSame<CUresult (*)(unsigned long long*), CUresult (*)(unsigned*)>());
static_assert(abiSame<int (*)(int*), CUresult (*)(CUdevice_attribute*)>());

}  // namespace

// Types.
static_assert(std::is_same_v<pc::CUdevice, ::CUdevice>);
static_assert(std::is_same_v<pc::CUdeviceptr, ::CUdeviceptr>);
static_assert(std::is_same_v<pc::cuuint64_t, ::cuuint64_t>);
static_assert(std::is_same_v<pc::CUcontext, ::CUcontext>);
static_assert(std::is_same_v<pc::CUmodule, ::CUmodule>);
static_assert(std::is_same_v<pc::CUfunction, ::CUfunction>);
static_assert(std::is_same_v<pc::CUevent, ::CUevent>);
static_assert(std::is_same_v<pc::CUstream, ::CUstream>);
static_assert(std::is_same_v<pc::CUgraph, ::CUgraph>);
static_assert(std::is_same_v<pc::CUgraphNode, ::CUgraphNode>);
static_assert(std::is_same_v<pc::CUuserObject, ::CUuserObject>);
static_assert(std::is_same_v<pc::CUmemGenericAllocationHandle, ::CUmemGenericAllocationHandle>);
static_assert(std::is_same_v<pc::CUhostFn, ::CUhostFn>);
static_assert(sizeof(pc::CUresult) == sizeof(::CUresult));
static_assert(sizeof(pc::CUdevice_attribute) == sizeof(::CUdevice_attribute));
static_assert(sizeof(pc::CUpointer_attribute) == sizeof(::CUpointer_attribute));
static_assert(sizeof(pc::CUmemorytype) == sizeof(::CUmemorytype));
static_assert(sizeof(pc::CUfunction_attribute) == sizeof(::CUfunction_attribute));
static_assert(sizeof(pc::CUstreamCaptureStatus) == sizeof(::CUstreamCaptureStatus));
static_assert(sizeof(pc::CUstreamCaptureMode) == sizeof(::CUstreamCaptureMode));
static_assert(sizeof(pc::CUmemAllocationType) == sizeof(::CUmemAllocationType));
static_assert(sizeof(pc::CUmemAllocationHandleType) == sizeof(::CUmemAllocationHandleType));
static_assert(sizeof(pc::CUmemLocationType) == sizeof(::CUmemLocationType));
static_assert(sizeof(pc::CUmemAccess_flags) == sizeof(::CUmemAccess_flags));
static_assert(sizeof(pc::CUmemAllocationGranularity_flags) == sizeof(::CUmemAllocationGranularity_flags));
static_assert(sizeof(pc::CUmemRangeHandleType) == sizeof(::CUmemRangeHandleType));
static_assert(sizeof(pc::CUmoduleLoadingMode) == sizeof(::CUmoduleLoadingMode));
static_assert(sizeof(pc::CUdriverProcAddressQueryResult) == sizeof(::CUdriverProcAddressQueryResult));

// Structs: size, alignment, and every field's offset and size.
#define SAME_LAYOUT(T) \
  static_assert(sizeof(pc::T) == sizeof(::T) && alignof(pc::T) == alignof(::T), #T " size or alignment differs")
#define SAME_FIELD(T, f)                                                                                          \
  static_assert(                                                                                                  \
      offsetof(pc::T, f) == offsetof(::T, f) && sizeof(std::declval<pc::T>().f) == sizeof(std::declval<::T>().f), \
      #T "::" #f " offset or size differs")
SAME_LAYOUT(CUmemLocation);
SAME_FIELD(CUmemLocation, type);
SAME_FIELD(CUmemLocation, id);
SAME_LAYOUT(CUmemAllocationProp);
SAME_FIELD(CUmemAllocationProp, type);
SAME_FIELD(CUmemAllocationProp, requestedHandleTypes);
SAME_FIELD(CUmemAllocationProp, location);
SAME_FIELD(CUmemAllocationProp, win32HandleMetaData);
SAME_FIELD(CUmemAllocationProp, allocFlags);
SAME_FIELD(CUmemAllocationProp, allocFlags.compressionType);
SAME_FIELD(CUmemAllocationProp, allocFlags.gpuDirectRDMACapable);
SAME_FIELD(CUmemAllocationProp, allocFlags.usage);
SAME_FIELD(CUmemAllocationProp, allocFlags.reserved);
SAME_LAYOUT(CUmemAccessDesc);
SAME_FIELD(CUmemAccessDesc, location);
SAME_FIELD(CUmemAccessDesc, flags);
SAME_LAYOUT(CUipcMemHandle);
SAME_FIELD(CUipcMemHandle, reserved);

// Constants that cuda.h declares as enumerators.
#define SAME_VALUE(X) static_assert(pc::X == ::X, #X " differs from cuda.h")
// A CUresult is also named in the header's fallback table, under its own name.
#define SAME_RESULT(X) \
  SAME_VALUE(X);       \
  static_assert(pc::resultName(pc::X) == std::string_view(#X), #X " is missing from kResultNames or misnamed")
SAME_RESULT(CUDA_SUCCESS);
SAME_RESULT(CUDA_ERROR_INVALID_VALUE);
SAME_RESULT(CUDA_ERROR_OUT_OF_MEMORY);
SAME_RESULT(CUDA_ERROR_NOT_INITIALIZED);
SAME_RESULT(CUDA_ERROR_DEINITIALIZED);
SAME_RESULT(CUDA_ERROR_STUB_LIBRARY);
SAME_RESULT(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER);
SAME_RESULT(CUDA_ERROR_DEVICE_UNAVAILABLE);
SAME_RESULT(CUDA_ERROR_NO_DEVICE);
SAME_RESULT(CUDA_ERROR_INVALID_DEVICE);
SAME_RESULT(CUDA_ERROR_INVALID_IMAGE);
SAME_RESULT(CUDA_ERROR_INVALID_CONTEXT);
SAME_RESULT(CUDA_ERROR_NO_BINARY_FOR_GPU);
SAME_RESULT(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
SAME_RESULT(CUDA_ERROR_OPERATING_SYSTEM);
SAME_RESULT(CUDA_ERROR_INVALID_HANDLE);
SAME_RESULT(CUDA_ERROR_NOT_FOUND);
SAME_RESULT(CUDA_ERROR_NOT_READY);
SAME_RESULT(CUDA_ERROR_ILLEGAL_ADDRESS);
SAME_RESULT(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
SAME_RESULT(CUDA_ERROR_LAUNCH_TIMEOUT);
SAME_RESULT(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
SAME_RESULT(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
SAME_RESULT(CUDA_ERROR_CONTEXT_IS_DESTROYED);
SAME_RESULT(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
SAME_RESULT(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
SAME_RESULT(CUDA_ERROR_LAUNCH_FAILED);
SAME_RESULT(CUDA_ERROR_NOT_PERMITTED);
SAME_RESULT(CUDA_ERROR_NOT_SUPPORTED);
SAME_RESULT(CUDA_ERROR_SYSTEM_NOT_READY);
SAME_RESULT(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH);
SAME_RESULT(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE);
SAME_RESULT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
SAME_RESULT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
SAME_RESULT(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
SAME_RESULT(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
SAME_RESULT(CUDA_ERROR_UNKNOWN);
// Every entry of the table was checked above (37 lines), so none carries a wrong value under a right name.
static_assert(std::size(pc::kResultNames) == 37, "a kResultNames entry is not checked against cuda.h here");

SAME_VALUE(CU_GET_PROC_ADDRESS_DEFAULT);
SAME_VALUE(CU_GET_PROC_ADDRESS_SUCCESS);
SAME_VALUE(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
SAME_VALUE(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED);
SAME_VALUE(CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
SAME_VALUE(CU_POINTER_ATTRIBUTE_IS_MANAGED);
SAME_VALUE(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
SAME_VALUE(CU_MEMORYTYPE_HOST);
SAME_VALUE(CU_MEMORYTYPE_DEVICE);
SAME_VALUE(CU_MEMORYTYPE_ARRAY);
SAME_VALUE(CU_MEMORYTYPE_UNIFIED);
SAME_VALUE(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
SAME_VALUE(CU_FUNC_ATTRIBUTE_NUM_REGS);
SAME_VALUE(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
SAME_VALUE(CU_MODULE_EAGER_LOADING);
SAME_VALUE(CU_MODULE_LAZY_LOADING);
SAME_VALUE(CU_STREAM_DEFAULT);
SAME_VALUE(CU_STREAM_NON_BLOCKING);
SAME_VALUE(CU_STREAM_WAIT_VALUE_GEQ);
SAME_VALUE(CU_EVENT_DEFAULT);
SAME_VALUE(CU_EVENT_DISABLE_TIMING);
SAME_VALUE(CU_STREAM_CAPTURE_STATUS_NONE);
SAME_VALUE(CU_STREAM_CAPTURE_STATUS_ACTIVE);
SAME_VALUE(CU_STREAM_CAPTURE_STATUS_INVALIDATED);
SAME_VALUE(CU_STREAM_CAPTURE_MODE_GLOBAL);
SAME_VALUE(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
SAME_VALUE(CU_STREAM_CAPTURE_MODE_RELAXED);
SAME_VALUE(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
SAME_VALUE(CU_GRAPH_USER_OBJECT_MOVE);
SAME_VALUE(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
SAME_VALUE(CU_MEM_ALLOCATION_TYPE_PINNED);
SAME_VALUE(CU_MEM_HANDLE_TYPE_NONE);
SAME_VALUE(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
SAME_VALUE(CU_MEM_LOCATION_TYPE_DEVICE);
SAME_VALUE(CU_MEM_ACCESS_FLAGS_PROT_NONE);
SAME_VALUE(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
SAME_VALUE(CU_MEM_ALLOC_GRANULARITY_MINIMUM);
SAME_VALUE(CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
SAME_VALUE(CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD);

// Constants that cuda.h declares as macros: its value is taken while the macro is live, ours once it is out of the
// way, and the macro is back afterwards (the header's push/pop must not have lost it).
constexpr auto refMemHostAllocPortable = CU_MEMHOSTALLOC_PORTABLE;
constexpr auto refMemHostAllocDeviceMap = CU_MEMHOSTALLOC_DEVICEMAP;
constexpr auto refMemHostAllocWriteCombined = CU_MEMHOSTALLOC_WRITECOMBINED;
constexpr auto refMemHostRegisterPortable = CU_MEMHOSTREGISTER_PORTABLE;
constexpr auto refMemHostRegisterDeviceMap = CU_MEMHOSTREGISTER_DEVICEMAP;
constexpr auto refLaunchParamEnd = CU_LAUNCH_PARAM_END_AS_INT;
constexpr auto refLaunchParamBufferPointer = CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT;
constexpr auto refLaunchParamBufferSize = CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT;
constexpr auto refIpcHandleSize = CU_IPC_HANDLE_SIZE;
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
static_assert(pc::CU_MEMHOSTALLOC_PORTABLE == refMemHostAllocPortable);
static_assert(pc::CU_MEMHOSTALLOC_DEVICEMAP == refMemHostAllocDeviceMap);
static_assert(pc::CU_MEMHOSTALLOC_WRITECOMBINED == refMemHostAllocWriteCombined);
static_assert(pc::CU_MEMHOSTREGISTER_PORTABLE == refMemHostRegisterPortable);
static_assert(pc::CU_MEMHOSTREGISTER_DEVICEMAP == refMemHostRegisterDeviceMap);
static_assert(pc::CU_LAUNCH_PARAM_END_AS_INT == refLaunchParamEnd);
static_assert(pc::CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT == refLaunchParamBufferPointer);
static_assert(pc::CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT == refLaunchParamBufferSize);
static_assert(pc::CU_IPC_HANDLE_SIZE == refIpcHandleSize);
static_assert(sizeof(pc::CUipcMemHandle::reserved) == pc::CU_IPC_HANDLE_SIZE);
#pragma pop_macro("CU_MEMHOSTALLOC_PORTABLE")
#pragma pop_macro("CU_MEMHOSTALLOC_DEVICEMAP")
#pragma pop_macro("CU_MEMHOSTALLOC_WRITECOMBINED")
#pragma pop_macro("CU_MEMHOSTREGISTER_PORTABLE")
#pragma pop_macro("CU_MEMHOSTREGISTER_DEVICEMAP")
#pragma pop_macro("CU_LAUNCH_PARAM_END_AS_INT")
#pragma pop_macro("CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT")
#pragma pop_macro("CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT")
#pragma pop_macro("CU_IPC_HANDLE_SIZE")
#if !defined(CU_MEMHOSTALLOC_PORTABLE) || !defined(CU_LAUNCH_PARAM_END_AS_INT) || !defined(CU_IPC_HANDLE_SIZE)
#error "plexus/cuda/driver.h lost one of cuda.h's macros"
#endif
// What cuLaunchKernel's extra array holds: the pointer forms cuda.h spells with these values.
static_assert(CU_LAUNCH_PARAM_END_AS_INT == 0 && CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT == 1);

// The ABI every entry point is resolved at is the oldest driver accepted, and the stream-capture query is that ABI's
// 6-argument form (cuda.h's cuStreamGetCaptureInfo is the 12.3 7-argument _v3 by now).
static_assert(pc::kDriverAbiVersion == 12000);

// Entry points: Driver's member against the PFN of the newest version at or below 12.0 (cudaTypedefs.h names each
// PFN after the CUDA version that introduced that signature).
#define SAME_ENTRY(member, pfn) \
  static_assert(abiSame<decltype(pc::Driver::member), pfn>(), "Driver::" #member " is not " #pfn)
SAME_ENTRY(getProcAddress, PFN_cuGetProcAddress_v12000);
SAME_ENTRY(getErrorName, PFN_cuGetErrorName_v6000);
SAME_ENTRY(getErrorString, PFN_cuGetErrorString_v6000);
SAME_ENTRY(init, PFN_cuInit_v2000);
SAME_ENTRY(driverGetVersion, PFN_cuDriverGetVersion_v2020);
SAME_ENTRY(deviceGetCount, PFN_cuDeviceGetCount_v2000);
SAME_ENTRY(deviceGet, PFN_cuDeviceGet_v2000);
SAME_ENTRY(deviceGetAttribute, PFN_cuDeviceGetAttribute_v2000);
SAME_ENTRY(deviceGetPCIBusId, PFN_cuDeviceGetPCIBusId_v4010);
SAME_ENTRY(deviceCanAccessPeer, PFN_cuDeviceCanAccessPeer_v4000);
SAME_ENTRY(devicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000);
SAME_ENTRY(devicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000);
SAME_ENTRY(ctxGetCurrent, PFN_cuCtxGetCurrent_v4000);
SAME_ENTRY(ctxSetCurrent, PFN_cuCtxSetCurrent_v4000);
SAME_ENTRY(ctxGetDevice, PFN_cuCtxGetDevice_v2000);
SAME_ENTRY(ctxEnablePeerAccess, PFN_cuCtxEnablePeerAccess_v4000);
SAME_ENTRY(memAlloc, PFN_cuMemAlloc_v3020);
SAME_ENTRY(memFree, PFN_cuMemFree_v3020);
SAME_ENTRY(memHostAlloc, PFN_cuMemHostAlloc_v2020);
SAME_ENTRY(memHostGetDevicePointer, PFN_cuMemHostGetDevicePointer_v3020);
SAME_ENTRY(memFreeHost, PFN_cuMemFreeHost_v2000);
SAME_ENTRY(memHostRegister, PFN_cuMemHostRegister_v6050);
SAME_ENTRY(memHostUnregister, PFN_cuMemHostUnregister_v4000);
SAME_ENTRY(memcpyHtoD, PFN_cuMemcpyHtoD_v3020);
SAME_ENTRY(memcpyDtoH, PFN_cuMemcpyDtoH_v3020);
SAME_ENTRY(memcpyHtoDAsync, PFN_cuMemcpyHtoDAsync_v3020);
SAME_ENTRY(memcpyDtoHAsync, PFN_cuMemcpyDtoHAsync_v3020);
SAME_ENTRY(memcpyAsync, PFN_cuMemcpyAsync_v4000);
SAME_ENTRY(memsetD8, PFN_cuMemsetD8_v3020);
SAME_ENTRY(memsetD8Async, PFN_cuMemsetD8Async_v3020);
SAME_ENTRY(memGetAddressRange, PFN_cuMemGetAddressRange_v3020);
SAME_ENTRY(memCreate, PFN_cuMemCreate_v10020);
SAME_ENTRY(memRelease, PFN_cuMemRelease_v10020);
SAME_ENTRY(memAddressReserve, PFN_cuMemAddressReserve_v10020);
SAME_ENTRY(memAddressFree, PFN_cuMemAddressFree_v10020);
SAME_ENTRY(memMap, PFN_cuMemMap_v10020);
SAME_ENTRY(memUnmap, PFN_cuMemUnmap_v10020);
SAME_ENTRY(memSetAccess, PFN_cuMemSetAccess_v10020);
SAME_ENTRY(memGetAllocationGranularity, PFN_cuMemGetAllocationGranularity_v10020);
SAME_ENTRY(memExportToShareableHandle, PFN_cuMemExportToShareableHandle_v10020);
SAME_ENTRY(memImportFromShareableHandle, PFN_cuMemImportFromShareableHandle_v10020);
SAME_ENTRY(memGetHandleForAddressRange, PFN_cuMemGetHandleForAddressRange_v11070);
SAME_ENTRY(ipcGetMemHandle, PFN_cuIpcGetMemHandle_v4010);
SAME_ENTRY(ipcOpenMemHandle, PFN_cuIpcOpenMemHandle_v11000);
SAME_ENTRY(ipcCloseMemHandle, PFN_cuIpcCloseMemHandle_v4010);
SAME_ENTRY(pointerGetAttributes, PFN_cuPointerGetAttributes_v7000);
SAME_ENTRY(streamCreate, PFN_cuStreamCreate_v2000);
SAME_ENTRY(streamDestroy, PFN_cuStreamDestroy_v4000);
SAME_ENTRY(streamSynchronize, PFN_cuStreamSynchronize_v2000);
SAME_ENTRY(streamQuery, PFN_cuStreamQuery_v2000);
SAME_ENTRY(streamWaitEvent, PFN_cuStreamWaitEvent_v3020);
SAME_ENTRY(streamGetCaptureInfo, PFN_cuStreamGetCaptureInfo_v11030);
SAME_ENTRY(threadExchangeStreamCaptureMode, PFN_cuThreadExchangeStreamCaptureMode_v10010);
SAME_ENTRY(eventCreate, PFN_cuEventCreate_v2000);
SAME_ENTRY(eventRecord, PFN_cuEventRecord_v2000);
SAME_ENTRY(eventQuery, PFN_cuEventQuery_v2000);
SAME_ENTRY(eventSynchronize, PFN_cuEventSynchronize_v2000);
SAME_ENTRY(eventDestroy, PFN_cuEventDestroy_v4000);
SAME_ENTRY(launchKernel, PFN_cuLaunchKernel_v4000);
SAME_ENTRY(launchHostFunc, PFN_cuLaunchHostFunc_v10000);
SAME_ENTRY(streamWaitValue64, PFN_cuStreamWaitValue64_v11070);
SAME_ENTRY(funcGetAttribute, PFN_cuFuncGetAttribute_v2020);
SAME_ENTRY(funcSetAttribute, PFN_cuFuncSetAttribute_v9000);
SAME_ENTRY(moduleGetLoadingMode, PFN_cuModuleGetLoadingMode_v11070);
SAME_ENTRY(userObjectCreate, PFN_cuUserObjectCreate_v11030);
SAME_ENTRY(userObjectRelease, PFN_cuUserObjectRelease_v11030);
SAME_ENTRY(graphRetainUserObject, PFN_cuGraphRetainUserObject_v11030);
// Every function pointer of Driver was checked above: the two data members plus 66 entry points.
static_assert(sizeof(pc::Driver) == sizeof(void*) + sizeof(int) + 4 + 67 * sizeof(void*),
              "Driver has an entry point this file does not check");

int main() {
  printf("plexus/cuda/driver.h matches cuda.h %d (checked at compile time)\n", CUDA_VERSION);
  return 0;
}
