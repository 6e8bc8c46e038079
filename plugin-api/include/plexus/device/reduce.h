/*
 * Element types and reduction operators as kernels apply them, for all 12 NCCL types. The 16- and
 * 8-bit floats are reduced in float and rounded back to nearest-even after each operation, as
 * NCCL's kernels do. Host C++ and CUDA alike.
 */
#ifndef PLEXUS_DEVICE_REDUCE_H_
#define PLEXUS_DEVICE_REDUCE_H_

#include <stdint.h>

#include "../device_v1.h"
#include "arch.h"

namespace plexus::dev {

struct half_t { uint16_t bits; };
struct bf16_t { uint16_t bits; };
struct fp8e4m3_t { uint8_t bits; };
struct fp8e5m2_t { uint8_t bits; };

PLEXUS_HD uint32_t floatBits(float f) {
  union { float f; uint32_t u; } c;
  c.f = f;
  return c.u;
}
PLEXUS_HD float bitsFloat(uint32_t u) {
  union { float f; uint32_t u; } c;
  c.u = u;
  return c.f;
}

/* v >> shift, rounded to nearest, ties to even. */
PLEXUS_HD uint32_t shiftRne(uint32_t v, int shift) {
  if (shift <= 0) return v;
  if (shift > 31) return 0;
  uint32_t q = v >> shift, rem = v & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) q++;
  return q;
}

/* IEEE-style minifloat with E exponent and M mantissa bits. HasInf: the top exponent encodes inf/NaN
 * (fp16, e5m2); otherwise only all-ones is NaN (e4m3fn). Saturate: overflow gives the largest finite
 * value (NVIDIA's SATFINITE conversion for fp8) instead of infinity. */
template <int E, int M, bool HasInf, bool Saturate>
struct MiniFloat {
  static constexpr int bias = (1 << (E - 1)) - 1;
  static constexpr uint32_t nanCode = HasInf ? ((((1u << E) - 1) << M) | (1u << (M - 1))) : ((1u << (E + M)) - 1);
  static constexpr uint32_t infCode = ((1u << E) - 1) << M;
  static constexpr uint32_t maxCode = HasInf ? infCode - 1 : nanCode - 1;

  static PLEXUS_HD uint32_t encode(float f) {
    uint32_t x = floatBits(f), sign = (x >> 31) << (E + M);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return sign | nanCode;
    if (x == 0x7f800000u) return sign | (HasInf && !Saturate ? infCode : maxCode);
    int exp = (int)(x >> 23) - 127;
    if (exp < -bias - M - 1) return sign; /* far below the smallest subnormal */
    uint32_t full = (x & 0x7fffffu) | 0x800000u;
    int e = exp + bias;
    uint32_t code;
    if (e >= 1) {
      uint32_t r = shiftRne(full, 23 - M);
      if (r >= (2u << M)) { r >>= 1; e++; }
      code = ((uint32_t)e << M) | (r & ((1u << M) - 1));
    } else {
      code = shiftRne(full, 23 - M + 1 - e); /* a carry lands in the exponent field: smallest normal */
    }
    if (code > maxCode) code = HasInf && !Saturate ? infCode : maxCode;
    return sign | code;
  }

  static PLEXUS_HD float decode(uint32_t c) {
    uint32_t sign = (c >> (E + M)) & 1u, e = (c >> M) & ((1u << E) - 1), m = c & ((1u << M) - 1);
    float v;
    if ((c & ((1u << (E + M)) - 1)) == nanCode || (HasInf && e == (1u << E) - 1 && m != 0)) {
      v = bitsFloat(0x7fc00000u);
    } else if (HasInf && e == (1u << E) - 1) {
      v = bitsFloat(0x7f800000u);
    } else if (e == 0) {
      v = (float)m * bitsFloat((uint32_t)(127 + 1 - bias - M) << 23);
    } else {
      v = bitsFloat(((e - bias + 127) << 23) | (m << (23 - M)));
    }
    return sign ? -v : v;
  }
};

using Fp16Format = MiniFloat<5, 10, true, false>;
using E4M3Format = MiniFloat<4, 3, false, true>;
using E5M2Format = MiniFloat<5, 2, true, true>;

PLEXUS_HD float toFloat(half_t h) { return Fp16Format::decode(h.bits); }
PLEXUS_HD float toFloat(bf16_t h) { return bitsFloat((uint32_t)h.bits << 16); }
PLEXUS_HD float toFloat(fp8e4m3_t h) { return E4M3Format::decode(h.bits); }
PLEXUS_HD float toFloat(fp8e5m2_t h) { return E5M2Format::decode(h.bits); }

template <typename T> PLEXUS_HD T fromFloat(float f);
template <> PLEXUS_HD half_t fromFloat<half_t>(float f) { return half_t{(uint16_t)Fp16Format::encode(f)}; }
template <> PLEXUS_HD bf16_t fromFloat<bf16_t>(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return bf16_t{(uint16_t)((x >> 16) | 0x40)};
  return bf16_t{(uint16_t)shiftRne(x, 16)};
}
template <> PLEXUS_HD fp8e4m3_t fromFloat<fp8e4m3_t>(float f) { return fp8e4m3_t{(uint8_t)E4M3Format::encode(f)}; }
template <> PLEXUS_HD fp8e5m2_t fromFloat<fp8e5m2_t>(float f) { return fp8e5m2_t{(uint8_t)E5M2Format::encode(f)}; }

template <typename T> struct IsMiniFloat { static constexpr bool value = false; };
template <> struct IsMiniFloat<half_t> { static constexpr bool value = true; };
template <> struct IsMiniFloat<bf16_t> { static constexpr bool value = true; };
template <> struct IsMiniFloat<fp8e4m3_t> { static constexpr bool value = true; };
template <> struct IsMiniFloat<fp8e5m2_t> { static constexpr bool value = true; };

/* Integer arithmetic wraps (computed unsigned) as on a GPU; no signed-overflow UB on the host. */
template <typename T> struct Wrap { using U = T; };
template <> struct Wrap<int8_t> { using U = uint8_t; };
template <> struct Wrap<int32_t> { using U = uint32_t; };
template <> struct Wrap<int64_t> { using U = uint64_t; };

template <typename T> PLEXUS_HD T addOp(T a, T b) {
  using U = typename Wrap<T>::U;
  return (T)(U)((U)a + (U)b);
}
template <> PLEXUS_HD float addOp<float>(float a, float b) { return a + b; }
template <> PLEXUS_HD double addOp<double>(double a, double b) { return a + b; }
template <typename T> PLEXUS_HD T mulOp(T a, T b) {
  using U = typename Wrap<T>::U;
  return (T)(U)((U)a * (U)b);
}
template <> PLEXUS_HD float mulOp<float>(float a, float b) { return a * b; }
template <> PLEXUS_HD double mulOp<double>(double a, double b) { return a * b; }
template <> PLEXUS_HD uint8_t mulOp<uint8_t>(uint8_t a, uint8_t b) { return (uint8_t)((uint32_t)a * b); }
template <> PLEXUS_HD int8_t mulOp<int8_t>(int8_t a, int8_t b) { return (int8_t)(uint8_t)((uint32_t)(uint8_t)a * (uint8_t)b); }

/* The operators: op(a, b) combines, pre(x) is applied to a rank's own input once, post(x) to the final
 * result. scalar carries PreMulSum's factor or SumPostDiv's divisor, in T's bits. */
template <typename T> struct FuncSum {
  PLEXUS_HD explicit FuncSum(uint64_t) {}
  PLEXUS_HD T op(T a, T b) const { return addOp(a, b); }
  PLEXUS_HD T pre(T x) const { return x; }
  PLEXUS_HD T post(T x) const { return x; }
  static constexpr bool hasPre = false, hasPost = false;
};
template <typename T> struct FuncProd {
  PLEXUS_HD explicit FuncProd(uint64_t) {}
  PLEXUS_HD T op(T a, T b) const { return mulOp(a, b); }
  PLEXUS_HD T pre(T x) const { return x; }
  PLEXUS_HD T post(T x) const { return x; }
  static constexpr bool hasPre = false, hasPost = false;
};
template <typename T> struct FuncMax {
  PLEXUS_HD explicit FuncMax(uint64_t) {}
  PLEXUS_HD T op(T a, T b) const { return a < b ? b : a; }
  PLEXUS_HD T pre(T x) const { return x; }
  PLEXUS_HD T post(T x) const { return x; }
  static constexpr bool hasPre = false, hasPost = false;
};
template <typename T> struct FuncMin {
  PLEXUS_HD explicit FuncMin(uint64_t) {}
  PLEXUS_HD T op(T a, T b) const { return b < a ? b : a; }
  PLEXUS_HD T pre(T x) const { return x; }
  PLEXUS_HD T post(T x) const { return x; }
  static constexpr bool hasPre = false, hasPost = false;
};
template <typename T> PLEXUS_HD T scalarFromBits(uint64_t bits) {
  union { uint64_t u; T t; } c;
  c.u = bits;
  return c.t;
}
template <typename T> struct FuncPreMulSum {
  T scalar;
  PLEXUS_HD explicit FuncPreMulSum(uint64_t arg) : scalar(scalarFromBits<T>(arg)) {}
  PLEXUS_HD T op(T a, T b) const { return addOp(a, b); }
  PLEXUS_HD T pre(T x) const { return mulOp(x, scalar); }
  PLEXUS_HD T post(T x) const { return x; }
  static constexpr bool hasPre = true, hasPost = false;
};
template <typename T> struct FuncSumPostDiv {
  T divisor;
  PLEXUS_HD explicit FuncSumPostDiv(uint64_t arg) : divisor((T)arg) {}
  PLEXUS_HD T op(T a, T b) const { return addOp(a, b); }
  PLEXUS_HD T pre(T x) const { return x; }
  PLEXUS_HD T post(T x) const { return (T)(x / divisor); }
  static constexpr bool hasPre = false, hasPost = true;
};

/* Minifloats: the same operators, computed in float. */
template <template <typename> class F, typename T> struct ViaFloat {
  F<float> f;
  PLEXUS_HD explicit ViaFloat(uint64_t arg) : f(floatArg(arg)) {}
  static PLEXUS_HD uint64_t floatArg(uint64_t arg) {
    /* PreMulSum's scalar arrives in T's bits; hand float's bits to the float operator. */
    return (uint64_t)floatBits(toFloat(scalarFromBits<T>(arg)));
  }
  PLEXUS_HD T op(T a, T b) const { return fromFloat<T>(f.op(toFloat(a), toFloat(b))); }
  PLEXUS_HD T pre(T x) const { return fromFloat<T>(f.pre(toFloat(x))); }
  PLEXUS_HD T post(T x) const { return x; }
  static constexpr bool hasPre = F<float>::hasPre, hasPost = false;
};
#define PLEXUS_MINIFLOAT_FUNC(F)                                                        \
  template <> struct F<half_t> : ViaFloat<F, half_t> { using ViaFloat::ViaFloat; };       \
  template <> struct F<bf16_t> : ViaFloat<F, bf16_t> { using ViaFloat::ViaFloat; };       \
  template <> struct F<fp8e4m3_t> : ViaFloat<F, fp8e4m3_t> { using ViaFloat::ViaFloat; }; \
  template <> struct F<fp8e5m2_t> : ViaFloat<F, fp8e5m2_t> { using ViaFloat::ViaFloat; };
PLEXUS_MINIFLOAT_FUNC(FuncSum)
PLEXUS_MINIFLOAT_FUNC(FuncProd)
PLEXUS_MINIFLOAT_FUNC(FuncMax)
PLEXUS_MINIFLOAT_FUNC(FuncMin)
PLEXUS_MINIFLOAT_FUNC(FuncPreMulSum)
#undef PLEXUS_MINIFLOAT_FUNC

/* Calls fn.template operator()<T, Func>() for a runtime (datatype, redop). Integer types never see
 * PreMulSum of a float scalar: the planner turns ncclAvg of integers into SumPostDiv. SumPostDiv on a
 * float type is not produced either; it maps to Sum there. Returns false for an unknown pair. */
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <typename T, typename Fn> PLEXUS_HD bool dispatchOp(int redop, Fn& fn) {
  switch (redop) {
    case plexusDevSum: fn.template operator()<T, FuncSum<T>>(); return true;
    case plexusDevProd: fn.template operator()<T, FuncProd<T>>(); return true;
    case plexusDevMax: fn.template operator()<T, FuncMax<T>>(); return true;
    case plexusDevMin: fn.template operator()<T, FuncMin<T>>(); return true;
    case plexusDevPreMulSum: fn.template operator()<T, FuncPreMulSum<T>>(); return true;
    case plexusDevSumPostDiv:
      if constexpr (IsMiniFloat<T>::value) fn.template operator()<T, FuncSum<T>>();
      else fn.template operator()<T, FuncSumPostDiv<T>>();
      return true;
  }
  return false;
}

#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <typename Fn> PLEXUS_HD bool dispatchTypeOp(int datatype, int redop, Fn& fn) {
  switch (datatype) {
    case ncclInt8: return dispatchOp<int8_t>(redop, fn);
    case ncclUint8: return dispatchOp<uint8_t>(redop, fn);
    case ncclInt32: return dispatchOp<int32_t>(redop, fn);
    case ncclUint32: return dispatchOp<uint32_t>(redop, fn);
    case ncclInt64: return dispatchOp<int64_t>(redop, fn);
    case ncclUint64: return dispatchOp<uint64_t>(redop, fn);
    case ncclFloat16: return dispatchOp<half_t>(redop, fn);
    case ncclFloat32: return dispatchOp<float>(redop, fn);
    case ncclFloat64: return dispatchOp<double>(redop, fn);
    case ncclBfloat16: return dispatchOp<bf16_t>(redop, fn);
    case ncclFloat8e4m3: return dispatchOp<fp8e4m3_t>(redop, fn);
    case ncclFloat8e5m2: return dispatchOp<fp8e5m2_t>(redop, fn);
  }
  return false;
}

}  // namespace plexus::dev

#endif /* PLEXUS_DEVICE_REDUCE_H_ */
