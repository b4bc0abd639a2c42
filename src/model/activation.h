// snapkv: the gated FFN activations (SwiGLU, tanh-GELU GLU), computed like ggml's CPU ops.
#pragma once

#include <cstdint>

namespace snapkv {

/// SwiGLU: a[i] = silu(a[i]) * b[i] with silu(x) = x / (1 + exp(-x)) (Shazeer 2020). With
/// AVX-512 or AVX2 exp is the prefill softmax's vector exp (attn::exp16 / exp8, the same bits,
/// ~2 ulp; ggml's CPU silu also uses a vector exp of its own); a value does not depend on n,
/// n_threads or its index's lane.
void swiglu_inplace(float* a, const float* b, int64_t n, int n_threads);

/// GEGLU with the tanh GELU approximation: a[i] = gelu(a[i]) * b[i], where
/// gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks & Gimpel 2016).
/// Like ggml's CPU path (GGML_GELU_FP16) gelu is read from an F16 table indexed by the F16
/// rounding of x for -10 < x < 10 (0 below, x above).
void geglu_inplace(float* a, const float* b, int64_t n, int n_threads);

/// The exact f32 tanh GELU (reference for tests).
float gelu_tanh_ref(float x);

}  // namespace snapkv
