// algo-tree's CUDA kernels: the very step loops the host backend runs (tree_collectives.h), in reducing kernels of
// (datatype, operator) and copy kernels of an element size (plexus/device/cuda_kernels.cuh), split over two
// translation units that nvcc compiles in parallel: tree_kernels.cu (integers, the copy kernels, getCudaKernel) and
// tree_kernels_float.cu (floating point).
#pragma once

#include <plexus/algo_v2.h>
#include <plexus/device/cuda_kernels.cuh>

#include "tree_collectives.h"

namespace plexus::tree {

/* The reducing kernel of a floating-point work (tree_kernels_float.cu); nullptr for another datatype. */
const void* floatKernel(const plexusDevWork_v1_t* work);

}  // namespace plexus::tree
