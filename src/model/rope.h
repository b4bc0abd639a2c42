// snapkv: rotary position embedding (Su et al. 2021, RoFormer, eq. 34), computed like ggml's
// rope_f32 (theta_i = p * freq_scale * base^(-2i/n_rot) / freq_factor_i, accumulated in float).
#pragma once

#include <cstdint>

namespace snapkv {

enum class RopeType {
  Normal,  ///< rotates pairs (x[2i], x[2i+1]) (llama)
  NeoX,    ///< rotates pairs (x[i], x[i + n_rot/2]) (gemma3, GPT-NeoX)
};

/// RoPE settings of one layer.
struct RopeParams {
  RopeType type = RopeType::Normal;
  int n_rot = 0;  ///< rotated dimensions (even, <= head_dim); the rest pass through
  int head_dim = 0;
  float base = 10000.0f;
  float freq_scale = 1.0f;              ///< linear position scaling (1 / factor)
  const float* freq_factors = nullptr;  ///< optional [n_rot/2] divisors of theta (llama3 rope_freqs)
};

/// Fills cs[n_rot] with (cos theta_i, sin theta_i) pairs for position `pos`.
void rope_cos_sin(const RopeParams& p, int32_t pos, float* cs);

/// Rotates `n_heads` consecutive head vectors x[n_heads][head_dim] in place with the table from
/// rope_cos_sin(). Normal: (x0, x1) <- (x0 c - x1 s, x0 s + x1 c) on (2i, 2i+1); NeoX on (i, i+n_rot/2).
void rope_apply(const RopeParams& p, const float* cs, float* x, int n_heads);

/// Convenience: rope_cos_sin + rope_apply for each of n_tokens rows of x ([n_tokens][row_stride]
/// floats, each row n_heads x head_dim) at positions pos[n_tokens]. Parallel over tokens.
void rope_rows(const RopeParams& p, const int32_t* pos, int64_t n_tokens, float* x, int64_t row_stride, int n_heads,
               int n_threads);

}  // namespace snapkv
