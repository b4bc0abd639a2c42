// snapkv: byte layouts of the ggml quantized blocks (ggml-common.h) and small readers for
// them. Blocks are read through byte pointers + memcpy so any alignment is safe.
//
//   Q4_0  (18 B / 32):  f16 d | u8 qs[16]            x = d * (nibble - 8)
//   Q4_1  (20 B / 32):  f16 d | f16 m | u8 qs[16]    x = d * nibble + m
//   Q5_0  (22 B / 32):  f16 d | u32 qh | u8 qs[16]   x = d * ((nibble | bit<<4) - 16)
//   Q5_1  (24 B / 32):  f16 d | f16 m | u32 qh | u8 qs[16]   x = d * (nibble | bit<<4) + m
//   Q8_0  (34 B / 32):  f16 d | i8 qs[32]            x = d * q
//   Q4_K  (144 B / 256): f16 d | f16 dmin | u8 scales[12] | u8 qs[128]
//   Q5_K  (176 B / 256): f16 d | f16 dmin | u8 scales[12] | u8 qh[32] | u8 qs[128]
//   Q6_K  (210 B / 256): u8 ql[128] | u8 qh[64] | i8 scales[16] | f16 d
// In the 32-element blocks, qs[j] holds element j in its low nibble and element j+16 in its
// high nibble; qh bit j is the 5th bit of element j.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/fp16.h"

namespace snapkv::quant {

inline constexpr int kQK = 32;     ///< elements per block of the legacy quants
inline constexpr int kQK_K = 256;  ///< elements per super-block of the K-quants

// Block sizes in bytes.
inline constexpr int kQ4_0Bytes = 18;
inline constexpr int kQ4_1Bytes = 20;
inline constexpr int kQ5_0Bytes = 22;
inline constexpr int kQ5_1Bytes = 24;
inline constexpr int kQ8_0Bytes = 34;
inline constexpr int kQ4_KBytes = 144;
inline constexpr int kQ5_KBytes = 176;
inline constexpr int kQ6_KBytes = 210;

// Field offsets inside the K-quant super-blocks.
inline constexpr int kQ4_KScales = 4;  ///< 12 bytes of packed 6-bit scales / mins
inline constexpr int kQ4_KQs = 16;
inline constexpr int kQ5_KScales = 4;
inline constexpr int kQ5_KQh = 16;
inline constexpr int kQ5_KQs = 48;
inline constexpr int kQ6_KQl = 0;
inline constexpr int kQ6_KQh = 128;
inline constexpr int kQ6_KScales = 192;
inline constexpr int kQ6_KD = 208;

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
/// The f16 stored at p, as float.
inline float load_f16(const uint8_t* p) { return fp16_to_fp32(load_u16(p)); }

/// f16_f32_table()[h] = fp16_to_fp32(h) for every IEEE half h (65,536 floats, 256 KiB, built
/// once, thread-safe): the decode kernels look block scales up in it instead of converting them
/// on the shuffle port (kern_legacy.h).
const float* f16_f32_table();

/// Decodes the 8 six-bit scales and 8 six-bit mins of a Q4_K / Q5_K super-block (ggml
/// `get_scale_min_k4`): sub-block j (32 elements) has scale sc[j] and min m[j].
/// Bytes 0..3: low 6 bits = sc[0..3], top 2 bits = high bits of sc[4..7];
/// bytes 4..7: low 6 bits = m[0..3], top 2 bits = high bits of m[4..7];
/// bytes 8..11: low nibble = low 4 bits of sc[4..7], high nibble = low 4 bits of m[4..7].
inline void decode_k4_scales(const uint8_t* q, uint8_t sc[8], uint8_t m[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = q[j] & 63;
    m[j] = q[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
    m[j] = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace snapkv::quant
