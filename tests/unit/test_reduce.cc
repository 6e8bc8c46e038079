// Element types and operators as kernels apply them.
#include <doctest/doctest.h>
#include <plexus/device/reduce.h>
#include <plexus/device/reduce_copy.h>
#include <plexus/device/work.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "reference.h"

using namespace plexus::dev;

// The tests' own conversions (tests/common/reference.h), from which the collectives' expected values come,
// pinned against sources that share nothing with them or with the library: the compiler's _Float16, and
// IEEE 754 / OCP 8-bit float tables.
TEST_CASE("reference conversions: the compiler's _Float16, and IEEE/OCP tables for bf16 and fp8") {
#ifdef __FLT16_MAX__
  size_t decodeWrong = 0, encodeWrong = 0;
  for (uint32_t b = 0; b < 65536; b++) {
    uint16_t bits = (uint16_t)b;
    _Float16 h;
    memcpy(&h, &bits, 2);
    const double want = (double)h, got = reference::decode(reference::kHalf, b);
    decodeWrong += !(want == got || (std::isnan(want) && std::isnan(got))) || std::signbit(want) != std::signbit(got);
    // Halfway between this pattern and the next: the compiler's rounding (to nearest even) and ours agree.
    uint16_t next = (uint16_t)(b + 1);
    _Float16 hn;
    memcpy(&hn, &next, 2);
    if (std::isfinite(want) && std::isfinite((double)hn) && (b & 0x7fff) < 0x7bff) {
      const double mid = (want + (double)hn) / 2;
      const _Float16 rounded = (_Float16)mid;
      uint16_t r;
      memcpy(&r, &rounded, 2);
      encodeWrong += reference::encode(reference::kHalf, mid) != r;
    }
  }
  CHECK(decodeWrong == 0);
  CHECK(encodeWrong == 0);
#else
  MESSAGE("this compiler has no _Float16: the fp16 reference is checked against the tables only");
#endif
  CHECK(reference::decode(reference::kHalf, 0x7bff) == 65504.0);
  CHECK(reference::encode(reference::kHalf, 65520.0) == 0x7c00);  // IEEE: half an ulp past the largest is inf
  CHECK(reference::decode(reference::kBf16, 0x3f80) == 1.0);
  CHECK(reference::decode(reference::kBf16, 0x7f7f) == 0x1.fep127);
  CHECK(reference::decode(reference::kBf16, 0x0001) == 0x1p-133);
  CHECK(std::isinf(reference::decode(reference::kBf16, 0x7f80)));
  // OCP 8-bit floating point, v1.0: E4M3 max 448 (S.1111.110), NaN S.1111.111, no infinity; E5M2 max 57344.
  CHECK(reference::decode(reference::kE4m3, 0x7e) == 448.0);
  CHECK(std::isnan(reference::decode(reference::kE4m3, 0x7f)));
  CHECK(reference::decode(reference::kE4m3, 0x78) == 256.0);
  CHECK(reference::decode(reference::kE4m3, 0x38) == 1.0);
  CHECK(reference::decode(reference::kE4m3, 0x01) == 0x1p-9);
  CHECK(reference::encode(reference::kE4m3, 1000.0) == 0x7e);  // saturates, as NCCL's conversion
  CHECK(reference::decode(reference::kE5m2, 0x7b) == 57344.0);
  CHECK(std::isinf(reference::decode(reference::kE5m2, 0x7c)));
  CHECK(reference::decode(reference::kE5m2, 0x3c) == 1.0);
  CHECK(reference::decode(reference::kE5m2, 0x01) == 0x1p-16);
  CHECK(reference::encode(reference::kE5m2, 30.0) == 0x50);  // a tie between 28 (0x4f) and 32: the even pattern
}

// The library's conversions against that reference, over every pattern of every small float.
TEST_CASE("the library's minifloat conversions agree with the reference on every bit pattern") {
  size_t wrong = 0;
  auto same = [](double a, double b) { return (a == b && std::signbit(a) == std::signbit(b)) || (std::isnan(a) && std::isnan(b)); };
  for (uint32_t b = 0; b < 65536; b++) {
    wrong += !same(toFloat(half_t{(uint16_t)b}), reference::decode(reference::kHalf, b));
    wrong += !same(toFloat(bf16_t{(uint16_t)b}), reference::decode(reference::kBf16, b));
  }
  for (uint32_t b = 0; b < 256; b++) {
    wrong += !same(toFloat(fp8e4m3_t{(uint8_t)b}), reference::decode(reference::kE4m3, b));
    wrong += !same(toFloat(fp8e5m2_t{(uint8_t)b}), reference::decode(reference::kE5m2, b));
  }
  CHECK(wrong == 0);
  // And the rounding of small integers and halves, the values the collectives' tests use.
  size_t rounding = 0;
  for (int v = -600; v <= 600; v++)
    for (double x : {(double)v, v + 0.5}) {
      rounding += fromFloat<half_t>((float)x).bits != reference::encode(reference::kHalf, x);
      rounding += fromFloat<bf16_t>((float)x).bits != reference::encode(reference::kBf16, x);
      rounding += fromFloat<fp8e4m3_t>((float)x).bits != reference::encode(reference::kE4m3, x);
      rounding += fromFloat<fp8e5m2_t>((float)x).bits != reference::encode(reference::kE5m2, x);
    }
  CHECK(rounding == 0);
}

TEST_CASE("fp16 conversion rounds to nearest even and handles the edges") {
  CHECK(toFloat(fromFloat<half_t>(1.0f)) == 1.0f);
  CHECK(fromFloat<half_t>(1.0f).bits == 0x3c00);
  CHECK(fromFloat<half_t>(65504.0f).bits == 0x7bff);
  CHECK(fromFloat<half_t>(65520.0f).bits == 0x7c00);  // rounds up to infinity
  CHECK(fromFloat<half_t>(-0.0f).bits == 0x8000);
  CHECK(fromFloat<half_t>(5.960464477539063e-08f).bits == 0x0001);  // smallest subnormal
  CHECK(fromFloat<half_t>(2.98e-08f).bits == 0x0000);               // below half of it
  CHECK(std::isnan(toFloat(fromFloat<half_t>(NAN))));
  // Ties go to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  CHECK(fromFloat<half_t>(1.0f + 0.00048828125f).bits == 0x3c00);
  CHECK(fromFloat<half_t>(1.0f + 3 * 0.00048828125f).bits == 0x3c02);
  for (uint32_t b = 0; b < 0x7c00; b++) CHECK_MESSAGE(fromFloat<half_t>(toFloat(half_t{(uint16_t)b})).bits == b, b);
}

TEST_CASE("bf16 and fp8 conversions") {
  CHECK(fromFloat<bf16_t>(1.0f).bits == 0x3f80);
  CHECK(toFloat(fromFloat<bf16_t>(3.0f)) == 3.0f);
  CHECK(fromFloat<fp8e4m3_t>(448.0f).bits == 0x7e);
  CHECK(fromFloat<fp8e4m3_t>(1000.0f).bits == 0x7e);  // saturates
  CHECK(fromFloat<fp8e4m3_t>(NAN).bits == 0x7f);
  CHECK(fromFloat<fp8e5m2_t>(57344.0f).bits == 0x7b);
  CHECK(fromFloat<fp8e5m2_t>(1e9f).bits == 0x7b);
  for (uint32_t b = 0; b < 0x7f; b++) CHECK(fromFloat<fp8e4m3_t>(toFloat(fp8e4m3_t{(uint8_t)b})).bits == b);
  for (uint32_t b = 0; b < 0x7c; b++) CHECK(fromFloat<fp8e5m2_t>(toFloat(fp8e5m2_t{(uint8_t)b})).bits == b);
}

TEST_CASE("operators: integer wrap-around, pre-multiplication, post-division") {
  CHECK(FuncSum<int8_t>(0).op(127, 1) == -128);
  CHECK(FuncProd<uint8_t>(0).op(16, 16) == 0);
  CHECK(FuncMax<int32_t>(0).op(-5, 3) == 3);
  CHECK(FuncMin<float>(0).op(-5.f, 3.f) == -5.f);
  FuncPreMulSum<float> pms(floatBits(0.25f));
  CHECK(pms.pre(8.0f) == 2.0f);
  FuncSumPostDiv<int32_t> spd(4);
  CHECK(spd.post(10) == 2);
  FuncPreMulSum<half_t> hpms(fromFloat<half_t>(0.5f).bits);
  CHECK(toFloat(hpms.pre(fromFloat<half_t>(3.0f))) == 1.5f);
}

TEST_CASE("reduceCopy combines sources into every destination") {
  std::vector<float> a(1000), b(1000), c(1000), d0(1000), d1(1000);
  for (int i = 0; i < 1000; i++) a[i] = (float)i, b[i] = 2.0f * i, c[i] = 1.0f;
  const float* srcs[3] = {a.data(), b.data(), c.data()};
  float* dsts[2] = {d0.data(), d1.data()};
  FuncSum<float> f(0);
  reduceCopy<float, FuncSum<float>>(0, 1, f, srcs, 3, false, dsts, 2, false, 1000);
  for (int i = 0; i < 1000; i++) {
    CHECK(d0[i] == 3.0f * i + 1.0f);
    CHECK(d1[i] == d0[i]);
  }
  // Split over 3 "threads": together they cover every element once.
  std::fill(d0.begin(), d0.end(), 0.0f);
  for (int t = 0; t < 3; t++) reduceCopy<float, FuncSum<float>>(t, 3, f, srcs, 2, false, dsts, 1, false, 1000);
  for (int i = 0; i < 1000; i++) CHECK(d0[i] == 3.0f * i);
}

TEST_CASE("channelPart splits a count into aligned, disjoint, covering parts") {
  for (size_t count : {0ul, 1ul, 15ul, 16ul, 1000ul, 1000003ul})
    for (int nch = 1; nch <= 5; nch++) {
      plexusDevWork_v1_t w{};
      w.channelLo = 2;
      w.nChannels = (uint8_t)nch;
      size_t expect = 0;
      for (int c = 2; c < 2 + nch; c++) {
        size_t off, n;
        channelPart(&w, c, count, 16, &off, &n);
        if (n) {
          CHECK(off == expect);
          CHECK(off % 16 == 0);
        }
        expect = off + n;
      }
      CHECK(expect == count);
    }
}
