// snapkv: synthetic Llama-architecture GGUF models with random Q8_0 weights, for benchmarks and tests
// that need realistic shapes (e.g. SmolLM2-135M with a 32K context) without a real checkpoint.
// Tensor names and metadata keys follow llama.cpp (llama-arch.cpp, LLM_ARCH_LLAMA).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace snapkv {

class Engine;

/// Shapes and hyper-parameters. Defaults = SmolLM2-135M (HF config.json of HuggingFaceTB/SmolLM2-135M),
/// except the context length (32768, so that 32K-token prompts fit).
struct SyntheticModelConfig {
  int64_t n_layer = 30;
  int64_t n_head = 9;       ///< query heads
  int64_t n_head_kv = 3;    ///< key/value heads (GQA); must divide n_head
  int64_t head_dim = 64;    ///< per-head size; n_head * head_dim must be a multiple of 32
  int64_t n_embd = 576;     ///< model width; multiple of 32 (Q8_0 rows)
  int64_t n_ff = 1536;      ///< FFN hidden size; multiple of 32
  int64_t n_vocab = 49152;  ///< >= 260: 3 specials + 256 byte tokens + at least one "tok<N>"
  int64_t n_ctx = 32768;    ///< llama.context_length
  float rope_base = 100000.0f;
  float rms_eps = 1e-5f;
  float weight_std = 0.02f;  ///< weights ~ N(0, weight_std^2) before Q8_0 quantization
  uint64_t seed = 1234;
  std::string name = "synthetic SmolLM2-135M shapes (random Q8_0 weights)";
  bool with_tokenizer = true;  ///< false: no tokenizer.* keys (a model without a tokenizer)
};

/// Throws snapkv::Error naming the first bad field (e.g. "synthetic model: n_embd=100 is not a multiple of 32").
void validate_synthetic_config(const SyntheticModelConfig& cfg);

/// Writes the model to `path` as GGUF v3 and returns the file size in bytes.
///
/// Metadata: general.architecture "llama", general.name, general.file_type 7 (MOSTLY_Q8_0),
/// llama.{context_length, embedding_length, block_count, feed_forward_length, attention.head_count,
/// attention.head_count_kv, attention.key_length, attention.value_length, attention.layer_norm_rms_epsilon,
/// rope.freq_base, rope.dimension_count (= head_dim), vocab_size}; a byte-level "llama" (SentencePiece-style)
/// vocabulary: ids 0..2 = <unk>, <s>, </s> (token types 2, 3, 3; score 0), ids 3..258 = "<0x00>".."<0xFF>"
/// (type 6 = byte, score 0), id N >= 259 = "tok<N>" (type 1, score -N); bos 1, eos 2, unk 0, add_bos true.
///
/// Tensors (GGUF dims {cols, rows}, i.e. dims[0] innermost): token_embd.weight / output.weight Q8_0
/// {n_embd, n_vocab}; output_norm.weight F32 {n_embd}; per layer N: blk.N.attn_norm / ffn_norm F32 {n_embd}
/// (all 1.0), attn_q Q8_0 {n_embd, n_head*head_dim}, attn_k / attn_v {n_embd, n_head_kv*head_dim},
/// attn_output {n_head*head_dim, n_embd}, ffn_gate / ffn_up {n_embd, n_ff}, ffn_down {n_ff, n_embd}.
///
/// Weights are drawn row by row from a counter-based generator keyed by (seed, tensor, row), so the
/// file is identical for a given config whatever the thread count. Throws snapkv::Error on a bad
/// config or an I/O failure.
uint64_t write_synthetic_model(const SyntheticModelConfig& cfg, const std::string& path);

/// A small model whose head_dim a Q8_0 KV cache can hold (a multiple of 32): 2 layers, 4 query
/// heads on 2 KV heads of 32 dims, n_embd 128, n_ff 256, vocab 512, context 4096, weight std 0.08.
SyntheticModelConfig small_q8_kv_config();

/// Writes `cfg` to a fresh file in the system temp directory, loads it as an Engine running
/// `n_threads` threads and removes the file (the mapping stays valid). Throws snapkv::Error.
std::shared_ptr<const Engine> load_synthetic_engine(const SyntheticModelConfig& cfg, int n_threads);

}  // namespace snapkv
