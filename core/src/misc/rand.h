// Hashes and randomness used for identities (magics, host hashes, shared-memory names).
#pragma once

#include <cstddef>
#include <cstdint>

namespace plexus {

uint64_t randomU64();  // from getrandom(2): unpredictable, for magics
uint64_t hashBytes(const void* data, size_t n, uint64_t seed = 0xcbf29ce484222325ull);
uint64_t hashCombine(uint64_t a, uint64_t b);

}  // namespace plexus
