// Reference data and checks for collectives, computed apart from the library's own conversions and reductions.
#pragma once

#include <nccl.h>
#include <plexus/device/reduce.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "reference.h"

namespace check {

using namespace plexus::dev;

inline size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

// Small integers: exact in every type, so sums, products, max and min have one right answer whatever
// order the ranks' values are combined in. fp8 has 2-3 mantissa bits: its sums stay at 0..3.
inline int inputValue(ncclRedOp_t op, int rank, size_t i, bool fp8 = false) {
  switch (op) {
    case ncclProd: return ((i + rank) % 4 == 0) ? 2 : 1;
    case ncclMax: case ncclMin: return (int)((i * 7 + rank * 13) % 31);
    default: return fp8 ? ((i + rank) % 3 == 0) : rank + 1 + (int)(i % 5);
  }
}

template <typename T> constexpr bool isFp8() {
  return std::is_same_v<T, fp8e4m3_t> || std::is_same_v<T, fp8e5m2_t>;
}

// The element types are the library's (plugin-api/include/plexus/device/reduce.h); every value the tests
// expect is computed apart from it: minifloats through tests/common/reference.h, reductions in double
// arithmetic, where the inputs below keep every partial result exact.
template <typename T> constexpr reference::Format formatOf() {
  if constexpr (std::is_same_v<T, half_t>) return reference::kHalf;
  else if constexpr (std::is_same_v<T, bf16_t>) return reference::kBf16;
  else if constexpr (std::is_same_v<T, fp8e4m3_t>) return reference::kE4m3;
  else return reference::kE5m2;
}

template <typename T> T fromInt(int v) {
  if constexpr (IsMiniFloat<T>::value) {
    T t;
    t.bits = (decltype(t.bits))reference::encode(formatOf<T>(), v);
    return t;
  } else {
    return (T)v;
  }
}
template <typename T> double toDouble(T v) {
  if constexpr (IsMiniFloat<T>::value) return reference::decode(formatOf<T>(), v.bits);
  else return (double)v;
}

// inputValue(op, rank, i) repeats every kInputPeriod indices (lcm of its periods 3, 4, 5 and 31), so
// fill() and the references below compute one period and repeat it.
constexpr size_t kInputPeriod = 1860;

template <typename T> void fill(void* buf, size_t count, ncclRedOp_t op, int rank) {
  T* p = (T*)buf;
  const size_t head = count < kInputPeriod ? count : kInputPeriod;
  for (size_t i = 0; i < head; i++) p[i] = fromInt<T>(inputValue(op, rank, i, isFp8<T>()));
  for (size_t i = head; i < count; i += kInputPeriod)
    memcpy(p + i, p, (count - i < kInputPeriod ? count - i : kInputPeriod) * sizeof(T));
}

// A rank's input at index i as the element type holds it (e5m2 rounds 30 to 32, say).
template <typename T> double inputHeld(ncclRedOp_t op, int rank, size_t i) {
  return toDouble(fromInt<T>(inputValue(op, rank, i, isFp8<T>())));
}

// The reduction of every rank's fill() value at index i, in double arithmetic: exact, since the inputs are
// small integers whose sums and products every element type holds.
template <typename T> double reduceRanks(ncclRedOp_t op, int nranks, size_t i) {
  double acc = inputHeld<T>(op, 0, i);
  for (int r = 1; r < nranks; r++) {
    const double v = inputHeld<T>(op, r, i);
    switch (op) {
      case ncclProd: acc *= v; break;
      case ncclMax: acc = std::max(acc, v); break;
      case ncclMin: acc = std::min(acc, v); break;
      default: acc += v; break;
    }
  }
  return acc;
}

// Wrong elements of count reduced elements whose inputs were at fill() indices first .. first+count-1
// on every rank (AllReduce and Reduce: first = 0; ReduceScatter: first = rank * recvcount).
// Avg: integers divide the sum exactly as the kernels do, floats are compared within a tolerance.
// The expected values repeat every kInputPeriod elements: one period is computed (expect, and the
// tolerance: 0 where the result is exact), then compared against every element.
template <typename T> size_t verifyReduced(const void* buf, size_t count, ncclRedOp_t op, int nranks, size_t first) {
  const T* p = (const T*)buf;
  const size_t period = count < kInputPeriod ? count : kInputPeriod;
  std::vector<double> expect(period), tol(period, 0.0);
  for (size_t k = 0; k < period; k++) {
    expect[k] = reduceRanks<T>(op, nranks, first + k);
    if (op == ncclAvg) {
      if constexpr (std::is_integral_v<T>) {
        expect[k] = (double)((int64_t)expect[k] / nranks);  // the sums are positive: truncation as C's
      } else {
        expect[k] /= nranks;
        tol[k] = IsMiniFloat<T>::value ? 0.13 * std::fabs(expect[k]) + 0.01 : 1e-5 * std::fabs(expect[k]) + 1e-6;
      }
    }
  }
  size_t wrong = 0;
  for (size_t i = 0, k = 0; i < count; i++, k = k + 1 == period ? 0 : k + 1) {
    double got = toDouble(p[i]);
    if (got == expect[k]) continue;
    if (!(std::fabs(got - expect[k]) <= tol[k])) wrong++;  // a NaN counts as wrong
  }
  return wrong;
}

// PreMulSum (ncclRedOpCreatePreMulSum with scalar): every rank's fill(ncclSum) input multiplied by
// scalar, then summed. Callers pick inputs and scalars whose products and sums are exact, so the
// double arithmetic here is what the element type computes, in any order; except that an integer
// type wraps (int8 on 8 ranks: 3 x 68 > 127), which two's complement does alike in any order too.
template <typename T> double preMulSumRanks(T scalar, int nranks, size_t i) {
  double acc = 0;
  for (int r = 0; r < nranks; r++) acc += toDouble(scalar) * inputHeld<T>(ncclSum, r, i);
  if constexpr (std::is_integral_v<T>) return (double)(T)(uint64_t)(int64_t)acc;
  return acc;
}

// Wrong elements of count PreMulSum-reduced elements (inputs at fill() indices first ..).
template <typename T> size_t verifyPreMulSum(const void* buf, size_t count, T scalar, int nranks, size_t first) {
  const T* p = (const T*)buf;
  const size_t period = count < kInputPeriod ? count : kInputPeriod;
  std::vector<double> expect(period);
  for (size_t k = 0; k < period; k++) expect[k] = preMulSumRanks<T>(scalar, nranks, first + k);
  size_t wrong = 0;
  for (size_t i = 0, k = 0; i < count; i++, k = k + 1 == period ? 0 : k + 1) wrong += !(toDouble(p[i]) == expect[k]);
  return wrong;
}

// Wrong elements of an AllReduce result.
template <typename T> size_t verifyAllReduce(const void* buf, size_t count, ncclRedOp_t op, int nranks) {
  return verifyReduced<T>(buf, count, op, nranks, 0);
}

// Data that only moves (Broadcast, AllGather): a byte pattern that differs at every offset and on
// every rank, so that a block or chunk landing at the wrong place is seen whatever its type.
inline unsigned char patternByte(int rank, size_t j) {
  uint64_t x = (uint64_t)j * 0x9E3779B97F4A7C15ull + (uint64_t)(rank + 1) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return (unsigned char)x;
}
inline void fillPattern(void* buf, size_t bytes, int rank) {
  for (size_t j = 0; j < bytes; j++) ((unsigned char*)buf)[j] = patternByte(rank, j);
}
// Wrong bytes among bytes that should hold rank's pattern from offset first on (AlltoAll, Scatter: the
// block of a bigger buffer that lands here).
inline size_t verifyPattern(const void* buf, size_t bytes, int rank, size_t first = 0) {
  size_t wrong = 0;
  for (size_t j = 0; j < bytes; j++) wrong += ((const unsigned char*)buf)[j] != patternByte(rank, first + j);
  return wrong;
}

// Wrong bytes of a Broadcast result: root's pattern.
inline size_t verifyBroadcast(const void* buf, size_t bytes, int root) { return verifyPattern(buf, bytes, root); }

// Wrong bytes of an AllGather result: block r (blockBytes at r * blockBytes) is rank r's pattern.
inline size_t verifyAllGather(const void* buf, size_t blockBytes, int nranks) {
  size_t wrong = 0;
  for (int r = 0; r < nranks; r++) wrong += verifyPattern((const unsigned char*)buf + (size_t)r * blockBytes, blockBytes, r);
  return wrong;
}

template <typename Fn> auto withType(ncclDataType_t t, Fn&& fn) {
  switch (t) {
    case ncclInt8: return fn((int8_t)0);
    case ncclUint8: return fn((uint8_t)0);
    case ncclInt32: return fn((int32_t)0);
    case ncclUint32: return fn((uint32_t)0);
    case ncclInt64: return fn((int64_t)0);
    case ncclUint64: return fn((uint64_t)0);
    case ncclFloat16: return fn(half_t{});
    case ncclFloat32: return fn(0.0f);
    case ncclFloat64: return fn(0.0);
    case ncclBfloat16: return fn(bf16_t{});
    case ncclFloat8e4m3: return fn(fp8e4m3_t{});
    default: return fn(fp8e5m2_t{});
  }
}

}  // namespace check
