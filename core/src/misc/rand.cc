#include "rand.h"

#include <sys/random.h>

#include <chrono>

namespace plexus {

uint64_t randomU64() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != sizeof(v)) {
    // getrandom cannot fail for 8 bytes once the pool is initialised; mix the clock just in case.
    v = hashCombine(v, (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count());
  }
  return v;
}

uint64_t hashBytes(const void* data, size_t n, uint64_t seed) {
  const unsigned char* p = (const unsigned char*)data;
  uint64_t h = seed;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;  // FNV-1a
  }
  return h;
}

uint64_t hashCombine(uint64_t a, uint64_t b) {
  uint64_t x = a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

}  // namespace plexus
