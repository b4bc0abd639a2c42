#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "core/ggml_type.h"
#include "snapkv/error.h"

namespace snapkv {

TEST(Fp16, RoundTripsEveryHalfValue) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(fp32_to_fp16(f), h) << "half bits " << h;
  }
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(1e6f), 0x7c00);                          // overflow -> +inf
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie rounds to even
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
}

TEST(GGMLType, TraitsMatchTheSpec) {
  EXPECT_EQ(ggml_type_traits(12).type_size, 144u);  // Q4_K
  EXPECT_EQ(ggml_type_traits(14).type_size, 210u);  // Q6_K
  EXPECT_EQ(ggml_type_traits(13).type_size, 176u);  // Q5_K
  EXPECT_EQ(ggml_type_traits(8).type_size, 34u);    // Q8_0
  EXPECT_EQ(ggml_row_bytes(GGMLType::Q4_K, 512), 288u);
  EXPECT_THROW(ggml_row_bytes(GGMLType::Q4_K, 100), Error);
  EXPECT_THROW(ggml_type_traits(31), Error);
  EXPECT_EQ(ggml_type_name(99), "unknown(99)");
  EXPECT_TRUE(ggml_type_supported(GGMLType::Q6_K));
  EXPECT_FALSE(ggml_type_supported(GGMLType::IQ2_XXS));
}

}  // namespace snapkv
