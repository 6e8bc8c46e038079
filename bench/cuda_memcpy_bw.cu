// cudaMemcpy device to device, timed with events: the bandwidth the GPU's own copy reaches, which the CUDA kernels'
// copies and reductions are measured against (scripts/gpu-check.sh). Prints "<bytes> <GB/s>" per size, GB/s as
// bytes copied per second (nccl-tests' algbw of a copy), the best of the repetitions.
//   cuda_memcpy_bw [bytes=256M] [device=0] [iterations=20]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

static size_t parseBytes(const char* s) {
  char* end;
  double v = strtod(s, &end);
  switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
  }
  return (size_t)v;
}

#define CHECK(call)                                                                           \
  do {                                                                                        \
    cudaError_t e = (call);                                                                   \
    if (e != cudaSuccess) {                                                                   \
      fprintf(stderr, "cuda_memcpy_bw: %s: %s\n", #call, cudaGetErrorString(e));              \
      return 2;                                                                               \
    }                                                                                         \
  } while (0)

int main(int argc, char** argv) {
  const size_t bytes = argc > 1 ? parseBytes(argv[1]) : (size_t)256 << 20;
  const int device = argc > 2 ? atoi(argv[2]) : 0;
  const int iters = argc > 3 ? atoi(argv[3]) : 20;
  CHECK(cudaSetDevice(device));
  void *a, *b;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMemset(a, 1, bytes));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  float best = 0;
  for (int i = 0; i < iters + 2; i++) {
    CHECK(cudaEventRecord(start));
    CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    const float gbs = (float)(bytes / (ms * 1e6));
    if (i >= 2 && gbs > best) best = gbs;
  }
  printf("%zu %.2f\n", bytes, best);
  return 0;
}
