// The tests' own kernels: what an application runs on the same stream before and after its collectives.
#include "gpu_test.h"

namespace gt {
namespace {

__global__ void gateKernel(volatile int* flag, volatile int* started) {
  if (started) *started = 1;
  __threadfence_system();
  while (*flag == 0) {
#if __CUDA_ARCH__ >= 700
    __nanosleep(1000);
#endif
  }
}

__global__ void fillKernel(float* out, size_t n, int rank, float seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = float(i % 1000) * float(rank + 1) + seed;
}

__global__ void twicePlusOneKernel(const float* in, float* out, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = in[i] * 2.0f + 1.0f;
}

__global__ void spinKernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

unsigned blocksFor(size_t n) { return unsigned(std::min<size_t>((n + 255) / 256, 1024)); }

}  // namespace

void launchGate(cudaStream_t s, volatile int* flag, volatile int* started) {
  gateKernel<<<1, 1, 0, s>>>(flag, started);
  GT_CUDA(cudaGetLastError());
}

void launchFill(cudaStream_t s, float* out, size_t n, int rank, float seed) {
  if (!n) return;
  fillKernel<<<blocksFor(n), 256, 0, s>>>(out, n, rank, seed);
  GT_CUDA(cudaGetLastError());
}

void launchTwicePlusOne(cudaStream_t s, const float* in, float* out, size_t n) {
  if (!n) return;
  twicePlusOneKernel<<<blocksFor(n), 256, 0, s>>>(in, out, n);
  GT_CUDA(cudaGetLastError());
}

void launchSpin(cudaStream_t s, long long cycles) {
  spinKernel<<<1, 1, 0, s>>>(cycles);
  GT_CUDA(cudaGetLastError());
}

}  // namespace gt
