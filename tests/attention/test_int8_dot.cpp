// attention/int8_dot.h: the INT8 prefill's dot-product step, acc + 4 products of unsigned by
// signed bytes per int32 lane, against a scalar reference: the AVX2 form (vpmaddubsw, vpmaddwd,
// vpaddd) on every AVX2 build, the VNNI form (vpdpbusd) where this build has it, on the operand
// ranges the kernel makes (|u|, |s| <= 127) including their extremes; and the AVX2 form's limit
// outside them (an int16 pair saturates), which is why the kernel keeps its bytes within 127.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention/int8_dot.h"

namespace snapkv::attn {
namespace {

#if SNAPKV_ATTN_AVX2

struct Operands {
  std::array<int32_t, 8> acc;
  std::array<uint8_t, 32> u;
  std::array<int8_t, 32> s;
};

std::array<int32_t, 8> reference(const Operands& o) {
  std::array<int32_t, 8> r{};
  for (int i = 0; i < 8; ++i) {
    int64_t v = o.acc[static_cast<size_t>(i)];
    for (int k = 0; k < 4; ++k)
      v += static_cast<int64_t>(o.u[static_cast<size_t>(4 * i + k)]) * o.s[static_cast<size_t>(4 * i + k)];
    r[static_cast<size_t>(i)] = static_cast<int32_t>(v);
  }
  return r;
}

template <class F>
std::array<int32_t, 8> run(F f, const Operands& o) {
  const __m256i acc = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(o.acc.data()));
  const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(o.u.data()));
  const __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(o.s.data()));
  std::array<int32_t, 8> r{};
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(r.data()), f(acc, u, s));
  return r;
}

/// Random operands in the kernel's ranges (u in [0, 127], s in [-127, 127]; |acc| up to 8.3M,
/// wider than the kernel's sums of 32 dims per Q K^T group or 64 keys per P V block), then the
/// extremes: every product at +-127 x 127.
std::vector<Operands> kernel_range_cases() {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> ud(0, 127), sd(-127, 127), ad(-8'300'000, 8'300'000);
  std::vector<Operands> out;
  for (int t = 0; t < 2000; ++t) {
    Operands o{};
    for (auto& a : o.acc) a = ad(rng);
    for (auto& u : o.u) u = static_cast<uint8_t>(ud(rng));
    for (auto& s : o.s) s = static_cast<int8_t>(sd(rng));
    out.push_back(o);
  }
  for (const int sign : {1, -1}) {
    Operands o{};
    o.acc.fill(sign * 8'000'000);
    o.u.fill(127);
    o.s.fill(static_cast<int8_t>(sign * 127));
    out.push_back(o);
  }
  return out;
}

TEST(Int8Dot, Avx2FormEqualsTheReferenceInTheKernelsRange) {
  for (const Operands& o : kernel_range_cases()) ASSERT_EQ(run(int8_dot4_avx2, o), reference(o));
}

TEST(Int8Dot, VnniFormEqualsTheReferenceAndTheAvx2Form) {
#if SNAPKV_INT8_DOT_VNNI
  for (const Operands& o : kernel_range_cases()) {
    ASSERT_EQ(run(int8_dot4_vnni, o), reference(o));
    ASSERT_EQ(run(int8_dot4_vnni, o), run(int8_dot4_avx2, o));
  }
#else
  GTEST_SKIP() << "this build has no AVX512-VNNI / AVX-VNNI (it runs " << kInt8PrefillIsa << ")";
#endif
}

TEST(Int8Dot, Avx2FormSaturatesOutsideTheKernelsRange) {
  // u = 255 with s = 127: a pair sums to 64,770 > 32,767, which vpmaddubsw saturates; the kernel
  // never makes such bytes (quantize to at most 127).
  Operands o{};
  o.acc.fill(0);
  o.u.fill(255);
  o.s.fill(127);
  EXPECT_EQ(reference(o)[0], 4 * 255 * 127);
  EXPECT_EQ(run(int8_dot4_avx2, o)[0], 2 * 32767);
#if SNAPKV_INT8_DOT_VNNI
  EXPECT_EQ(run(int8_dot4_vnni, o)[0], 4 * 255 * 127);
#endif
}

TEST(Int8Dot, TheBuildsFormIsTheOneReported) {
#if SNAPKV_INT8_DOT_VNNI
  EXPECT_NE(std::string(kInt8PrefillIsa).find("vnni"), std::string::npos);
#else
  EXPECT_STREQ(kInt8PrefillIsa, "avx2-int8");
#endif
  const Operands o = kernel_range_cases().front();
  EXPECT_EQ(run(int8_dot4, o), reference(o));
}

#else

TEST(Int8Dot, NoAvx2NoInt8Prefill) { EXPECT_STREQ(kInt8PrefillIsa, "unsupported"); }

#endif

}  // namespace
}  // namespace snapkv::attn
