// The CUDA implementation of the device seam (cuda_runtime.cc), over the driver loaded at run time.
#pragma once

#include <string>

#include "device/runtime.h"

namespace plexus {

namespace cuda {
struct Driver;
}

// Loads the driver (plexus/cuda/driver.h) and makes the CUDA runtime; an error, with *error saying why (no driver,
// no device, a driver too old), where CUDA cannot run.
ncclResult_t cudaRuntimeCreate(DeviceRuntime** out, std::string* error);
// The same over a driver the caller loaded (tests: a fake libcuda). The runtime keeps the pointer.
ncclResult_t cudaRuntimeCreate(const cuda::Driver* driver, DeviceRuntime** out, std::string* error);

}  // namespace plexus
