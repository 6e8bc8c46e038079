// algo-ring's CUDA kernels: the very step loops the host backend runs (ring_collectives.h), in reducing kernels of
// (datatype, operator) and copy kernels of an element size (plexus/device/cuda_kernels.cuh), split over two
// translation units that nvcc compiles in parallel: ring_kernels.cu (integers, the copy kernels, getCudaKernel) and
// ring_kernels_float.cu (floating point).
#pragma once

#include <plexus/algo_v2.h>
#include <plexus/device/cuda_kernels.cuh>

#include "ring_collectives.h"

namespace plexus::ring {

/* The reducing kernel of a floating-point work (ring_kernels_float.cu); nullptr for another datatype. */
const void* floatKernel(const plexusDevWork_v1_t* work);

}  // namespace plexus::ring
