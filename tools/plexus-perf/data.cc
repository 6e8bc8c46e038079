// Element types, deterministic input patterns, and the host-side result check.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "perf.h"

namespace perf {
namespace {

struct TypeInfo {
  ncclDataType_t type;
  const char* name;
  size_t size;
  bool integer;
  double exactMax;   // every integer in [0, exactMax] is representable and in range
  int maxPow2;       // 2^maxPow2 is representable and in range
  int mantissaBits;  // precision; sizes the tolerance of floating-point averages
};

// nccl-tests' names and order (-d all runs them in this order).
const TypeInfo kTypes[] = {
    {ncclInt8, "int8", 1, true, 127, 6, 7},
    {ncclUint8, "uint8", 1, true, 254, 7, 8},  // 255 is the poison byte of unwritten results
    {ncclInt32, "int32", 4, true, 2147483647.0, 30, 31},
    {ncclUint32, "uint32", 4, true, 4294967295.0, 31, 32},
    {ncclInt64, "int64", 8, true, 9007199254740992.0, 62, 63},
    {ncclUint64, "uint64", 8, true, 9007199254740992.0, 63, 64},
    {ncclFloat16, "half", 2, false, 2048, 15, 10},
    {ncclFloat32, "float", 4, false, 16777216.0, 127, 23},
    {ncclFloat64, "double", 8, false, 9007199254740992.0, 1023, 52},
    {ncclBfloat16, "bfloat16", 2, false, 256, 127, 7},
    {ncclFloat8e4m3, "f8e4m3", 1, false, 16, 8, 3},
    {ncclFloat8e5m2, "f8e5m2", 1, false, 8, 15, 2},
};

const TypeInfo& info(ncclDataType_t type) {
  for (const TypeInfo& t : kTypes)
    if (t.type == type) return t;
  return kTypes[7];
}

// ---- Narrow floating-point formats (half, bfloat16, fp8) ----------------------------------------

struct MiniFmt {
  int expBits;
  int manBits;
  int bias;
  bool hasInf;  // false: OCP e4m3 ("fn"), whose only non-finite encoding is S.1111.111 = NaN
};
constexpr MiniFmt kHalfFmt{5, 10, 15, true};
constexpr MiniFmt kBf16Fmt{8, 7, 127, true};
constexpr MiniFmt kE4m3Fmt{4, 3, 7, false};
constexpr MiniFmt kE5m2Fmt{5, 2, 15, true};

double miniDecode(uint32_t bits, MiniFmt f) {
  const uint32_t manMask = (1u << f.manBits) - 1, expMax = (1u << f.expBits) - 1;
  const bool neg = (bits >> (f.expBits + f.manBits)) & 1;
  const uint32_t e = (bits >> f.manBits) & expMax, m = bits & manMask;
  double v;
  if (f.hasInf && e == expMax)
    v = m ? NAN : INFINITY;
  else if (!f.hasInf && e == expMax && m == manMask)
    v = NAN;
  else if (e == 0)
    v = std::ldexp(double(m), 1 - f.bias - f.manBits);
  else
    v = std::ldexp(double(m | (1u << f.manBits)), int(e) - f.bias - f.manBits);
  return neg ? -v : v;
}

// Round to nearest even; out-of-range values become inf (or the largest finite value for e4m3).
uint32_t miniEncode(double x, MiniFmt f) {
  const uint32_t manMask = (1u << f.manBits) - 1, expMax = (1u << f.expBits) - 1;
  const uint32_t sign = std::signbit(x) ? 1u << (f.expBits + f.manBits) : 0;
  const uint32_t inf = f.hasInf ? expMax << f.manBits : (expMax << f.manBits) | (manMask - 1);
  if (std::isnan(x)) return sign | (expMax << f.manBits) | manMask;
  double a = std::fabs(x);
  if (std::isinf(a)) return sign | inf;
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);
  int be = e - 1 + f.bias;  // biased exponent of a = 1.m * 2^(e-1)
  uint64_t code;
  if (be <= 0) {
    // Subnormal: a multiple of 2^(1-bias-manBits). Rounding up to 2^manBits yields the smallest normal.
    code = uint64_t(std::nearbyint(std::ldexp(a, f.bias - 1 + f.manBits)));
  } else {
    uint64_t m = uint64_t(std::nearbyint(std::ldexp(a, f.manBits - (e - 1))));  // in [2^M, 2^(M+1)]
    if (m >> (f.manBits + 1)) {
      m >>= 1;
      ++be;
    }
    code = (uint64_t(be) << f.manBits) | (m & manMask);
  }
  const uint64_t maxFinite = f.hasInf ? ((uint64_t(expMax) - 1) << f.manBits) | manMask : inf;
  if (code > maxFinite) code = inf;
  return sign | uint32_t(code);
}

// ---- Type dispatch -------------------------------------------------------------------------------

template <class T>
struct PlainTag {
  using S = T;
  static double load(S v) { return double(v); }
  static S store(double d) { return S(d); }
};

template <class T, MiniFmt F>
struct MiniTag {
  using S = T;
  static double load(S v) { return miniDecode(v, F); }
  static S store(double d) { return S(miniEncode(d, F)); }
};

template <class Fn>
auto withType(ncclDataType_t type, Fn&& fn) {
  switch (type) {
    case ncclInt8: return fn(PlainTag<int8_t>{});
    case ncclUint8: return fn(PlainTag<uint8_t>{});
    case ncclInt32: return fn(PlainTag<int32_t>{});
    case ncclUint32: return fn(PlainTag<uint32_t>{});
    case ncclInt64: return fn(PlainTag<int64_t>{});
    case ncclUint64: return fn(PlainTag<uint64_t>{});
    case ncclFloat16: return fn(MiniTag<uint16_t, kHalfFmt>{});
    case ncclFloat32: return fn(PlainTag<float>{});
    case ncclFloat64: return fn(PlainTag<double>{});
    case ncclBfloat16: return fn(MiniTag<uint16_t, kBf16Fmt>{});
    case ncclFloat8e4m3: return fn(MiniTag<uint8_t, kE4m3Fmt>{});
    case ncclFloat8e5m2: return fn(MiniTag<uint8_t, kE5m2Fmt>{});
    default: return fn(PlainTag<uint8_t>{});
  }
}

}  // namespace

size_t typeSize(ncclDataType_t type) { return info(type).size; }
const char* typeName(ncclDataType_t type) { return info(type).name; }

const std::vector<ncclDataType_t>& allTypes() {
  static const std::vector<ncclDataType_t> v = [] {
    std::vector<ncclDataType_t> r;
    for (const TypeInfo& t : kTypes) r.push_back(t.type);
    return r;
  }();
  return v;
}

const std::vector<ncclRedOp_t>& allOps() {
  static const std::vector<ncclRedOp_t> v{ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  return v;
}

const char* opName(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    default: return "?";
  }
}

bool parseType(const std::string& s, ncclDataType_t* type) {
  for (const TypeInfo& t : kTypes)
    if (s == t.name) return *type = t.type, true;
  static const struct {
    const char* alias;
    ncclDataType_t type;
  } kAliases[] = {{"char", ncclInt8},          {"int", ncclInt32},       {"float16", ncclFloat16},
                  {"fp16", ncclFloat16},       {"float32", ncclFloat32}, {"fp32", ncclFloat32},
                  {"float64", ncclFloat64},    {"fp64", ncclFloat64},    {"bf16", ncclBfloat16},
                  {"fp8e4m3", ncclFloat8e4m3}, {"e4m3", ncclFloat8e4m3}, {"fp8e5m2", ncclFloat8e5m2},
                  {"e5m2", ncclFloat8e5m2}};
  for (const auto& a : kAliases)
    if (s == a.alias) return *type = a.type, true;
  return false;
}

bool parseOp(const std::string& s, ncclRedOp_t* op) {
  for (ncclRedOp_t o : allOps())
    if (s == opName(o)) return *op = o, true;
  return false;
}

Pattern makePattern(ncclDataType_t type, ncclRedOp_t op, bool reduces, int nranks, uint64_t seed) {
  const TypeInfo& t = info(type);
  const uint64_t exact = uint64_t(t.exactMax);
  Pattern p;
  p.nranks = nranks;
  p.seed = seed;
  if (!reduces || op == ncclMax || op == ncclMin) {
    // Any exact value works; a wide range makes misplaced elements visible.
    p.kind = Pattern::kMod;
    p.mod = std::min<uint64_t>(exact, reduces ? 1000 : 1u << 20) + 1;
  } else if (op == ncclProd) {
    // Powers of two stay exact; element i gets a 2 from a varying number of ranks.
    p.kind = Pattern::kPow2;
    p.maxTwos = std::min(t.maxPow2, nranks);
  } else {
    // Sum/avg: bound the values so the sum over all ranks stays exact.
    uint64_t maxVal = std::min<uint64_t>(exact / uint64_t(nranks), 1000);
    if (maxVal >= 1) {
      p.kind = Pattern::kMod;
      p.mod = maxVal + 1;
    } else {
      p.kind = Pattern::kOneHot;  // too many ranks for the type's range: one rank contributes a 1
    }
  }
  return p;
}

double reduceOverRanks(const ExpectCtx& c, size_t idx) {
  const Pattern& p = *c.pattern;
  double acc = p.value(0, idx);
  for (int q = 1; q < c.nranks; ++q) {
    double v = p.value(q, idx);
    switch (c.op) {
      case ncclProd: acc *= v; break;
      case ncclMax: acc = std::max(acc, v); break;
      case ncclMin: acc = std::min(acc, v); break;
      default: acc += v; break;
    }
  }
  if (c.op == ncclAvg) acc = info(c.type).integer ? std::trunc(acc / c.nranks) : acc / c.nranks;
  return acc;
}

void fillPattern(void* buf, ncclDataType_t type, const Pattern& p, int rank, size_t n) {
  withType(type, [&](auto tag) {
    using Tag = decltype(tag);
    using S = typename Tag::S;
    S* b = static_cast<S*>(buf);
    // Values are small non-negative integers: encode them once (narrow floats are slow to encode).
    const uint64_t lutSize = std::min<uint64_t>(p.maxValue() + 1, 1u << 16);
    std::vector<S> lut(lutSize);
    for (uint64_t k = 0; k < lutSize; ++k) lut[k] = Tag::store(double(k));
    for (size_t i = 0; i < n; ++i) {
      double v = p.value(rank, i);
      b[i] = v < double(lutSize) ? lut[size_t(v)] : Tag::store(v);
    }
  });
}

int64_t countWrong(const void* buf, size_t n, const ExpectCtx& ctx, int rank, ExpectFn expect) {
  const TypeInfo& t = info(ctx.type);
  // Only averages of floating-point types are inexact: implementations may scale before or after
  // summing, so allow a few ulps per rank.
  const double tol = (ctx.op == ncclAvg && !t.integer) ? (ctx.nranks + 2) * std::ldexp(1.0, -t.mantissaBits) : 0.0;
  return withType(ctx.type, [&](auto tag) -> int64_t {
    using Tag = decltype(tag);
    const auto* b = static_cast<const typename Tag::S*>(buf);
    int64_t wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      double got = Tag::load(b[i]), want = expect(ctx, rank, i);
      bool ok = tol == 0 ? got == want : std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
      wrong += !ok;
    }
    return wrong;
  });
}

}  // namespace perf
