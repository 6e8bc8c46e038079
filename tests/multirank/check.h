// Reference data and checks for collectives, in the element type's own semantics.
#pragma once

#include <nccl.h>
#include <plexus/device/reduce.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

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

template <typename T> T fromInt(int v) {
  if constexpr (IsMiniFloat<T>::value) return fromFloat<T>((float)v);
  else return (T)v;
}
template <typename T> double toDouble(T v) {
  if constexpr (IsMiniFloat<T>::value) return toFloat(v);
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

// The reduction of every rank's fill() value at index i, as the element type computes it.
template <typename T> T reduceRanks(ncclRedOp_t op, int nranks, size_t i) {
  T acc = fromInt<T>(inputValue(op, 0, i, isFp8<T>()));
  for (int r = 1; r < nranks; r++) {
    T v = fromInt<T>(inputValue(op, r, i, isFp8<T>()));
    switch (op) {
      case ncclProd: acc = FuncProd<T>(0).op(acc, v); break;
      case ncclMax: acc = FuncMax<T>(0).op(acc, v); break;
      case ncclMin: acc = FuncMin<T>(0).op(acc, v); break;
      default: acc = FuncSum<T>(0).op(acc, v); break;
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
    T acc = reduceRanks<T>(op, nranks, first + k);
    expect[k] = toDouble(acc);
    if (op == ncclAvg) {
      if constexpr (std::is_integral_v<T>) {
        expect[k] = (double)(T)(acc / (T)nranks);
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
// scalar, then summed, as the element type computes it (minifloats round after each operation).
// Callers pick inputs and scalars whose products and sums are exact, so the order of the ring's
// additions does not matter.
template <typename T> T preMulSumRanks(T scalar, int nranks, size_t i) {
  uint64_t bits = 0;
  memcpy(&bits, &scalar, sizeof(T));
  FuncPreMulSum<T> f(bits);
  T acc = f.pre(fromInt<T>(inputValue(ncclSum, 0, i, isFp8<T>())));
  for (int r = 1; r < nranks; r++) acc = f.op(acc, f.pre(fromInt<T>(inputValue(ncclSum, r, i, isFp8<T>()))));
  return acc;
}

// Wrong elements of count PreMulSum-reduced elements (inputs at fill() indices first ..).
template <typename T> size_t verifyPreMulSum(const void* buf, size_t count, T scalar, int nranks, size_t first) {
  const T* p = (const T*)buf;
  const size_t period = count < kInputPeriod ? count : kInputPeriod;
  std::vector<T> expect(period);
  for (size_t k = 0; k < period; k++) expect[k] = preMulSumRanks<T>(scalar, nranks, first + k);
  size_t wrong = 0;
  for (size_t i = 0, k = 0; i < count; i++, k = k + 1 == period ? 0 : k + 1)
    wrong += memcmp(&p[i], &expect[k], sizeof(T)) != 0;
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
