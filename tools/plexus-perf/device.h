// plexus-perf: where a rank's buffers and stream live. On the host backend: ordinary memory and a Plexus host stream.
// On the CUDA backend: device memory and a CUDA stream, through the CUDA driver loaded at run time
// (plexus/cuda/driver.h), so plexus-perf builds with a plain C++ compiler and runs where there is no CUDA at all.
#pragma once

#include <cstddef>
#include <string>

#include "perf.h"

namespace perf {

// Whether communicators of this process will be on the CUDA backend: the library's own rule (CUDA where a CUDA device
// is present, unless PLEXUS_BACKEND=host), decided before any communicator exists so that the threads make their
// CUDA device current instead of calling plexusSetDevice. *why says what was found.
bool cudaPlanned(std::string* why);
int cudaDeviceCount();
// "0000:19:00.0": the PCI bus id of a CUDA device.
std::string cudaBusId(int device);

// One rank's memory and stream on its backend. CUDA calls first make the rank's device current on the calling
// thread. Failures end the process with a message naming the call.
struct DeviceMem {
  bool cuda = false;
  int device = 0;  // CUDA device (cuda only)

  // Makes the device's primary context current on the calling thread (cuda only; a no-op on the host).
  void makeCurrent() const;
  void* alloc(size_t bytes) const;  // zeroed
  void free(void* p) const;
  // CUDA: enqueued on the rank's stream s, so ordered before the collectives enqueued after them (the legacy default
  // stream does not order work against the non-blocking streams plexus-perf uses); toHost returns once the bytes
  // are there. Host: plain memset/memcpy (s unused).
  void memset(void* dst, int byte, size_t bytes, cudaStream_t s) const;
  void toDevice(void* dst, const void* src, size_t bytes, cudaStream_t s) const;
  void toHost(void* dst, const void* src, size_t bytes, cudaStream_t s) const;
  cudaStream_t createStream() const;
  void destroyStream(cudaStream_t s) const;
  // Waits for everything on the stream; returns false with *error set if it failed.
  bool synchronize(cudaStream_t s, std::string* error) const;
};

}  // namespace perf
