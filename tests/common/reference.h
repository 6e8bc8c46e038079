// Reference conversions for the 16- and 8-bit float types, written apart from the library's own
// (plugin-api/include/plexus/device/reduce.h), so that a bug there is not mirrored in what the tests
// expect: decoding follows the formats' definitions term by term, and encoding takes the nearest of all
// 2^16 or 2^8 bit patterns by value (ties to the even pattern), an exhaustive search shared with nothing
// else. tests/unit/test_reduce.cc pins both against the compiler's _Float16 and against IEEE and OCP
// tables for fp8.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

namespace reference {

// Layout of a small float: exponent and mantissa bits, and whether the all-ones exponent still holds
// numbers (OCP fp8 e4m3: only S.1111.111 is NaN, and there is no infinity).
struct Format {
  int expBits, mantBits;
  bool finiteOnly;
};
constexpr Format kHalf{5, 10, false};
constexpr Format kBf16{8, 7, false};
constexpr Format kE4m3{4, 3, true};
constexpr Format kE5m2{5, 2, false};

inline double decode(Format f, uint32_t bits) {
  const uint32_t mantMask = (1u << f.mantBits) - 1, expMask = (1u << f.expBits) - 1;
  const bool negative = (bits >> (f.expBits + f.mantBits)) & 1;
  const uint32_t e = (bits >> f.mantBits) & expMask, m = bits & mantMask;
  const int bias = (1 << (f.expBits - 1)) - 1;
  double v;
  if (e == expMask && !f.finiteOnly) {
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (e == expMask && f.finiteOnly && m == mantMask) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp((double)m, 1 - bias - f.mantBits);  // subnormal: 0.m x 2^(1-bias)
  } else {
    v = std::ldexp((double)(m | (1u << f.mantBits)), (int)e - bias - f.mantBits);  // 1.m x 2^(e-bias)
  }
  return negative ? -v : v;
}

// The pattern whose value is nearest to v (ties: the even pattern); NaN for NaN. Values beyond the
// largest finite one go to infinity where the format has one (IEEE rounding), else to the largest
// finite value (OCP's saturating conversion, as NCCL's fp8).
inline uint32_t encode(Format f, double v) {
  const int bits = 1 + f.expBits + f.mantBits;
  const int which = f.mantBits == 10 ? 0 : f.mantBits == 7 ? 1 : f.mantBits == 3 ? 2 : 3;
  static thread_local std::vector<double> cache[4];
  static thread_local std::unordered_map<double, uint32_t> exact[4];  // nonzero finite values
  std::vector<double>& values = cache[which];
  if (values.empty())
    for (uint32_t b = 0; b < (1u << bits); b++) {
      values.push_back(decode(f, b));
      if (std::isfinite(values.back()) && values.back() != 0) exact[which].emplace(values.back(), b);
    }
  if (v == 0) return std::signbit(v) ? 1u << (bits - 1) : 0u;
  if (auto hit = exact[which].find(v); hit != exact[which].end()) return hit->second;
  if (std::isnan(v)) {
    for (uint32_t b = 0; b < values.size(); b++)
      if (std::isnan(values[b])) return b;
  }
  uint32_t best = 0;
  double bestDist = std::numeric_limits<double>::infinity();
  for (uint32_t b = 0; b < values.size(); b++) {
    if (std::isnan(values[b]) || std::isinf(values[b])) continue;
    if (std::signbit(values[b]) != std::signbit(v)) continue;
    const double d = std::fabs(values[b] - v);
    if (d < bestDist || (d == bestDist && (b & 1) == 0)) best = b, bestDist = d;
  }
  if (!f.finiteOnly && std::isfinite(bestDist)) {
    // IEEE: past the largest finite value by half an ulp or more is infinity.
    const double largest = std::fabs(decode(f, best));
    const uint32_t maxFinite = (((1u << f.expBits) - 2) << f.mantBits) | ((1u << f.mantBits) - 1);
    if (std::fabs(v) > largest && best % (1u << (bits - 1)) == maxFinite) {
      const double ulp = std::ldexp(1.0, (1 << (f.expBits - 1)) - 1 - f.mantBits);
      if (std::fabs(v) >= largest + ulp / 2) return (std::signbit(v) ? 1u << (bits - 1) : 0u) | ((1u << f.expBits) - 1) << f.mantBits;
    }
  }
  if (std::isinf(v) && !f.finiteOnly) return (std::signbit(v) ? 1u << (bits - 1) : 0u) | ((1u << f.expBits) - 1) << f.mantBits;
  return best;
}

}  // namespace reference
