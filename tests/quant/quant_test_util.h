// Test helpers for the quant module: random but realistic quantized rows, a per-element
// dequantization reference written from the block specs (independently of src/quant), and
// references of the activation quantization ggml applies before its integer dot products.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "core/ggml_type.h"

namespace snapkv::qtest {

inline const GGMLType kAllTypes[] = {GGMLType::F32,  GGMLType::F16,  GGMLType::BF16, GGMLType::Q8_0,
                                     GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q5_0, GGMLType::Q5_1,
                                     GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K};

inline int64_t block_of(GGMLType t) { return ggml_type_traits(static_cast<uint32_t>(t)).block_size; }
inline size_t bytes_of(GGMLType t) { return ggml_type_traits(static_cast<uint32_t>(t)).type_size; }

inline uint16_t rd16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline void wr16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
inline double h2d(const uint8_t* p) { return fp16_to_fp32(rd16(p)); }

/// bf16 with round-to-nearest-even (independent of the library's helper).
inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16);
}

/// `rows` rows of `cols` elements of type t: random quants, f16 scales in realistic ranges.
inline std::vector<uint8_t> random_rows(GGMLType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u01(0.0f, 1.0f);
  auto uni = [&](float a, float b) { return a + (b - a) * u01(rng); };
  const int64_t n = rows * cols;
  const int64_t nblocks = n / block_of(t);
  std::vector<uint8_t> out(static_cast<size_t>(nblocks) * bytes_of(t));
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  uint8_t* p = out.data();
  const size_t bs = bytes_of(t);
  auto h = [](float v) { return fp32_to_fp16(v); };
  for (int64_t i = 0; i < nblocks; ++i, p += bs) {
    const float sgn = (rng() & 1u) ? 1.0f : -1.0f;
    switch (t) {
      case GGMLType::F32: {
        const float v = uni(-1.0f, 1.0f);
        std::memcpy(p, &v, 4);
        break;
      }
      case GGMLType::F16:
        wr16(p, h(uni(-1.0f, 1.0f)));
        break;
      case GGMLType::BF16:
        wr16(p, to_bf16(uni(-1.0f, 1.0f)));
        break;
      case GGMLType::Q4_0:
      case GGMLType::Q5_0:
        wr16(p, h(sgn * uni(0.005f, 0.02f)));
        break;
      case GGMLType::Q4_1:
      case GGMLType::Q5_1:
        wr16(p, h(uni(0.002f, 0.01f)));
        wr16(p + 2, h(uni(-0.15f, 0.0f)));
        break;
      case GGMLType::Q8_0:
        wr16(p, h(sgn * uni(1e-4f, 1e-3f)));
        break;
      case GGMLType::Q4_K:
      case GGMLType::Q5_K:
        wr16(p, h(uni(1e-4f, 1e-3f)));
        wr16(p + 2, h(uni(1e-4f, 1e-3f)));
        break;
      case GGMLType::Q6_K:
        wr16(p + 208, h(sgn * uni(1e-5f, 1e-4f)));
        break;
      default:
        break;
    }
  }
  return out;
}

/// Element i (0 <= i < block size) of the block at b, from the ggml-common.h specs, in double.
inline double ref_element(GGMLType t, const uint8_t* b, int i) {
  switch (t) {
    case GGMLType::F32: {
      float f;
      std::memcpy(&f, b, 4);
      return f;
    }
    case GGMLType::F16:
      return h2d(b);
    case GGMLType::BF16: {
      const uint32_t u = static_cast<uint32_t>(rd16(b)) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case GGMLType::Q8_0:
      return h2d(b) * static_cast<int8_t>(b[2 + i]);
    case GGMLType::Q4_0:
    case GGMLType::Q4_1:
    case GGMLType::Q5_0:
    case GGMLType::Q5_1: {
      const bool has_min = t == GGMLType::Q4_1 || t == GGMLType::Q5_1;
      const bool five = t == GGMLType::Q5_0 || t == GGMLType::Q5_1;
      const int qs = (has_min ? 4 : 2) + (five ? 4 : 0);
      const uint8_t byte = b[qs + i % 16];
      int q = i < 16 ? (byte & 15) : (byte >> 4);
      if (five) {
        uint32_t qh;
        std::memcpy(&qh, b + (has_min ? 4 : 2), 4);
        q += static_cast<int>((qh >> i) & 1u) * 16;
      }
      if (has_min) return h2d(b) * q + h2d(b + 2);
      return h2d(b) * (q - (five ? 16 : 8));
    }
    case GGMLType::Q4_K:
    case GGMLType::Q5_K: {
      const bool five = t == GGMLType::Q5_K;
      const uint8_t* sc = b + 4;
      const int s = i / 32;  // sub-block
      int scale, mn;
      if (s < 4) {
        scale = sc[s] & 63;
        mn = sc[s + 4] & 63;
      } else {
        scale = (sc[s + 4] & 15) | ((sc[s - 4] >> 6) << 4);
        mn = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
      }
      const uint8_t* qs = b + (five ? 48 : 16);
      const int l = i % 32;
      const uint8_t byte = qs[32 * (i / 64) + l];
      int q = (s % 2 == 0) ? (byte & 15) : (byte >> 4);
      if (five) q += ((b[16 + l] >> s) & 1) * 16;
      return h2d(b) * scale * q - h2d(b + 2) * mn;
    }
    case GGMLType::Q6_K: {
      const int h = i / 128, k = (i % 128) / 32, l = i % 32;
      const uint8_t* ql = b + 64 * h;
      const uint8_t lowbyte = (k & 1) ? ql[32 + l] : ql[l];
      const int low = k < 2 ? (lowbyte & 15) : (lowbyte >> 4);
      const int high = (b[128 + 32 * h + l] >> (2 * k)) & 3;
      const int q = (low | (high << 4)) - 32;
      const auto sc = static_cast<int8_t>(b[192 + i / 16]);
      return h2d(b + 208) * sc * q;
    }
    default:
      return 0.0;
  }
}

/// Row r of a matrix of `cols` columns dequantized by ref_element.
inline std::vector<double> ref_row(GGMLType t, const uint8_t* data, int64_t cols, int64_t r) {
  const int64_t bs = block_of(t);
  const size_t row_bytes = static_cast<size_t>(cols / bs) * bytes_of(t);
  const uint8_t* p = data + static_cast<size_t>(r) * row_bytes;
  std::vector<double> out(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) {
    out[static_cast<size_t>(c)] =
        ref_element(t, p + static_cast<size_t>(c / bs) * bytes_of(t), static_cast<int>(c % bs));
  }
  return out;
}

inline float round_half_even(float v) { return std::nearbyint(v); }

/// What the kernel really multiplies the weights with: x after ggml's activation quantization
/// for weight type t (Q8_0 / Q8_1 per 32, Q8_K per 256, f16 / bf16 rounding, f32 as is).
/// `err` receives a bound on |xq - x| per element.
inline std::vector<double> quantized_activation(GGMLType t, const float* x, int64_t cols, std::vector<double>* err) {
  std::vector<double> out(static_cast<size_t>(cols));
  err->assign(static_cast<size_t>(cols), 0.0);
  switch (t) {
    case GGMLType::F32:
      for (int64_t c = 0; c < cols; ++c) out[c] = x[c];
      return out;
    case GGMLType::F16:
      for (int64_t c = 0; c < cols; ++c) {
        out[c] = fp16_to_fp32(fp32_to_fp16(x[c]));
        (*err)[c] = std::fabs(x[c]) * std::ldexp(1.0, -11);
      }
      return out;
    case GGMLType::BF16:
      for (int64_t c = 0; c < cols; ++c) {
        const uint32_t u = static_cast<uint32_t>(to_bf16(x[c])) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        out[c] = f;
        (*err)[c] = std::fabs(x[c]) * std::ldexp(1.0, -8);
      }
      return out;
    case GGMLType::Q4_K:
    case GGMLType::Q5_K:
    case GGMLType::Q6_K:
      for (int64_t b0 = 0; b0 < cols; b0 += 256) {
        float amax = 0.0f, mx = 0.0f;
        for (int j = 0; j < 256; ++j) {
          if (std::fabs(x[b0 + j]) > amax) {
            amax = std::fabs(x[b0 + j]);
            mx = x[b0 + j];
          }
        }
        if (amax == 0.0f) continue;
        const float iscale = -127.0f / mx;
        const float d = 1.0f / iscale;
        for (int j = 0; j < 256; ++j) {
          const float q = std::min(127.0f, round_half_even(iscale * x[b0 + j]));
          out[b0 + j] = static_cast<double>(d) * q;
          // |d*q - x| <= d/2, plus the rounding of iscale and d (relative 2^-23 each).
          (*err)[b0 + j] = 0.5 * std::fabs(d) + 4.0 * std::ldexp(1.0, -24) * amax;
        }
      }
      return out;
    default:  // Q8_0 / Q8_1 activations
      for (int64_t b0 = 0; b0 < cols; b0 += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b0 + j]));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const double dh = fp16_to_fp32(fp32_to_fp16(d));
        for (int j = 0; j < 32; ++j) {
          const float q = std::clamp(round_half_even(x[b0 + j] * id), -127.0f, 127.0f);
          out[b0 + j] = dh * q;
          // |d*q - x| <= d/2 (+ float rounding), and |dh - d| <= d * 2^-11 with |q| <= 127.
          (*err)[b0 + j] = (0.5 + 127.0 * std::ldexp(1.0, -11) + 1e-5) * d;
        }
      }
      return out;
  }
}

}  // namespace snapkv::qtest
