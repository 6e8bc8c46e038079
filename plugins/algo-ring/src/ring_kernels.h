// Host-side entry points between algo-ring's CUDA translation units.
#pragma once

#include <plexus/device_v1.h>

namespace plexus::ring {

/* The kernel (host stub address) for a Broadcast, Reduce, AllGather or ReduceScatter work item;
 * nullptr for another func or an unknown (datatype, redop). In ring_coll_kernels.cu. */
const void* collCudaKernel(const plexusDevWork_v1_t* work);

}  // namespace plexus::ring
