// snapkv: scalar dequantization of every supported type (the reference of truth for the
// kernels) and the slow f32 dot product built on it. Formulas: ggml-quants.c
// dequantize_row_* (evaluation order kept so embedding lookups match ggml bit for bit).
#include <fmt/format.h>

#include <vector>

#include "core/q8_0_rows.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "snapkv/error.h"

namespace snapkv {
namespace {

using namespace quant;

void deq_q4_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

void deq_q4_1(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float m = load_f16(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
    y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

void deq_q5_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const uint32_t qh = load_u32(b + 2);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
    const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
    y[j] = static_cast<float>(((qs[j] & 0x0F) | h0) - 16) * d;
    y[j + 16] = static_cast<float>(((qs[j] >> 4) | h1) - 16) * d;
  }
}

void deq_q5_1(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float m = load_f16(b + 2);
  const uint32_t qh = load_u32(b + 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
    const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
    y[j] = static_cast<float>((qs[j] & 0x0F) | h0) * d + m;
    y[j + 16] = static_cast<float>((qs[j] >> 4) | h1) * d + m;
  }
}

void deq_q8_0(const uint8_t* b, float* y) { dequantize_q8_0_row(b, y, kQK); }

// Q4_K: sub-block j of 32 elements is d*sc[j]*q - dmin*m[j]; the 64 elements of chunk c
// share 32 bytes of qs: low nibbles = sub-block 2c, high nibbles = sub-block 2c+1.
void deq_q4_k(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  uint8_t sc[8], m[8];
  decode_k4_scales(b + kQ4_KScales, sc, m);
  const uint8_t* q = b + kQ4_KQs;
  for (int c = 0; c < 4; ++c) {
    const float d1 = d * sc[2 * c], m1 = dmin * m[2 * c];
    const float d2 = d * sc[2 * c + 1], m2 = dmin * m[2 * c + 1];
    for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 0x0F) - m1;
    for (int l = 0; l < 32; ++l) y[l + 32] = d2 * static_cast<float>(q[l] >> 4) - m2;
    q += 32;
    y += 64;
  }
}

// Q5_K: as Q4_K plus a 5th bit: bit 2c of qh[l] for element l of sub-block 2c, bit 2c+1
// for element l of sub-block 2c+1.
void deq_q5_k(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  uint8_t sc[8], m[8];
  decode_k4_scales(b + kQ5_KScales, sc, m);
  const uint8_t* qh = b + kQ5_KQh;
  const uint8_t* ql = b + kQ5_KQs;
  for (int c = 0; c < 4; ++c) {
    const float d1 = d * sc[2 * c], m1 = dmin * m[2 * c];
    const float d2 = d * sc[2 * c + 1], m2 = dmin * m[2 * c + 1];
    const uint8_t u1 = static_cast<uint8_t>(1u << (2 * c)), u2 = static_cast<uint8_t>(2u << (2 * c));
    for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>((ql[l] & 0x0F) + (qh[l] & u1 ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) y[l + 32] = d2 * static_cast<float>((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    ql += 32;
    y += 64;
  }
}

// Q6_K: two halves of 128 elements; in half h, element l (0..31) of each quarter k takes
// 4 low bits from ql (k=0: ql[l] low, 1: ql[l+32] low, 2: ql[l] high, 3: ql[l+32] high) and
// 2 high bits from qh[l] bits 2k..2k+1; scale index 8h + 2k + l/16; value d*sc*(q - 32).
void deq_q6_k(const uint8_t* b, float* y) {
  const float d = load_f16(b + kQ6_KD);
  const uint8_t* ql = b + kQ6_KQl;
  const uint8_t* qh = b + kQ6_KQh;
  const auto* sc = reinterpret_cast<const int8_t*>(b + kQ6_KScales);
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

struct BlockDeq {
  BlockFn fn;
  int64_t block;  // elements per block
  int bytes;      // bytes per block
};

BlockDeq block_dequantizer(GGMLType type) {
  switch (type) {
    case GGMLType::Q4_0:
      return {deq_q4_0, kQK, kQ4_0Bytes};
    case GGMLType::Q4_1:
      return {deq_q4_1, kQK, kQ4_1Bytes};
    case GGMLType::Q5_0:
      return {deq_q5_0, kQK, kQ5_0Bytes};
    case GGMLType::Q5_1:
      return {deq_q5_1, kQK, kQ5_1Bytes};
    case GGMLType::Q8_0:
      return {deq_q8_0, kQK, kQ8_0Bytes};
    case GGMLType::Q4_K:
      return {deq_q4_k, kQK_K, kQ4_KBytes};
    case GGMLType::Q5_K:
      return {deq_q5_k, kQK_K, kQ5_KBytes};
    case GGMLType::Q6_K:
      return {deq_q6_k, kQK_K, kQ6_KBytes};
    default:
      return {nullptr, 0, 0};
  }
}

void check_row(GGMLType type, int64_t n, const char* what) {
  const auto id = static_cast<uint32_t>(type);
  if (!ggml_type_known(id) || !ggml_type_supported(type)) {
    throw Error(fmt::format("{}: tensor type {} has no snapkv kernels", what, ggml_type_name(id)));
  }
  const int64_t bs = ggml_type_traits(id).block_size;
  if (n < 0 || n % bs != 0) {
    throw Error(
        fmt::format("{}: {} elements is not a multiple of the {} block size {}", what, n, ggml_type_name(id), bs));
  }
}

}  // namespace

void dequantize_row(GGMLType type, const void* src, float* dst, int64_t n) {
  check_row(type, n, "dequantize_row");
  const auto* p = static_cast<const uint8_t*>(src);
  switch (type) {
    case GGMLType::F32:
      std::memcpy(dst, p, static_cast<size_t>(n) * 4);
      return;
    case GGMLType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load_u16(p + 2 * i));
      return;
    case GGMLType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load_u16(p + 2 * i));
      return;
    default:
      break;
  }
  const BlockDeq bd = block_dequantizer(type);
  for (int64_t i = 0; i < n / bd.block; ++i) bd.fn(p + i * bd.bytes, dst + i * bd.block);
}

float dot_row_f32(const WeightView& W, int64_t row, const float* x) {
  check_row(W.type, W.cols, "dot_row_f32");
  if (row < 0 || row >= W.rows) {
    throw Error(fmt::format("dot_row_f32: row {} out of range [0, {})", row, W.rows));
  }
  const uint8_t* p = W.row(row);
  // Dequantize one block at a time (256 floats at most) and accumulate in double.
  const int64_t bs = ggml_type_traits(static_cast<uint32_t>(W.type)).block_size;
  const int64_t chunk = bs == 1 ? 256 : bs;
  const size_t chunk_bytes = ggml_row_bytes(W.type, chunk);
  float buf[256];
  double acc = 0.0;
  int64_t i = 0;
  for (; i + chunk <= W.cols; i += chunk, p += chunk_bytes) {
    dequantize_row(W.type, p, buf, chunk);
    for (int64_t k = 0; k < chunk; ++k) acc += static_cast<double>(buf[k]) * x[i + k];
  }
  if (i < W.cols) {  // plain types only: a partial chunk
    dequantize_row(W.type, p, buf, W.cols - i);
    for (int64_t k = 0; k < W.cols - i; ++k) acc += static_cast<double>(buf[k]) * x[i + k];
  }
  return static_cast<float>(acc);
}

}  // namespace snapkv
