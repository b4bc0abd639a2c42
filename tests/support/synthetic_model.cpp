// snapkv: writes synthetic Llama-architecture GGUF models (random Q8_0 weights, byte-level vocab).
#include "support/synthetic_model.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <numbers>
#include <vector>

#include "snapkv/engine.h"
#include "snapkv/error.h"
#include "support/gguf_writer.h"

namespace snapkv {
namespace {

constexpr int64_t kQ8Block = 32;
constexpr int64_t kQ8BlockBytes = 34;
constexpr int64_t kFirstPlainToken = 3 + 256;  // after <unk> <s> </s> and the 256 byte tokens

// SplitMix64 (Steele, Lea, Flood 2014): a fast, well-mixed 64-bit generator; used both to derive
// per-row keys and as the row's stream.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Fills `out` with N(0, std^2) samples (Box-Muller) from the stream keyed by (seed, tensor, row).
void normal_row(uint64_t seed, uint64_t tensor, uint64_t row, float stddev, std::vector<float>& out) {
  uint64_t s = seed;
  uint64_t state = splitmix64(s) ^ (tensor * 0xd1b54a32d192ed03ull);
  state = splitmix64(state) ^ (row * 0x8cb92ba72f3d8dd7ull);
  constexpr double kInv53 = 1.0 / 9007199254740992.0;  // 2^-53
  for (size_t j = 0; j < out.size(); j += 2) {
    const double u1 = (static_cast<double>(splitmix64(state) >> 11) + 1.0) * kInv53;  // (0, 1]
    const double u2 = static_cast<double>(splitmix64(state) >> 11) * kInv53;          // [0, 1)
    const double r = std::sqrt(-2.0 * std::log(u1)) * stddev;
    const double a = 2.0 * std::numbers::pi * u2;
    out[j] = static_cast<float>(r * std::cos(a));
    if (j + 1 < out.size()) out[j + 1] = static_cast<float>(r * std::sin(a));
  }
}

/// A Q8_0 tensor of `rows` x `cols` random weights.
std::vector<uint8_t> random_q8_0(int64_t cols, int64_t rows, uint64_t seed, uint64_t tensor, float stddev) {
  const int64_t row_bytes = cols / kQ8Block * kQ8BlockBytes;
  std::vector<uint8_t> data(static_cast<size_t>(row_bytes * rows));
#pragma omp parallel
  {
    std::vector<float> buf(static_cast<size_t>(cols));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      normal_row(seed, tensor, static_cast<uint64_t>(r), stddev, buf);
      quantize_q8_0_into(buf.data(), cols, data.data() + r * row_bytes);
    }
  }
  return data;
}

[[noreturn]] void bad(const std::string& what) { throw Error("synthetic model: " + what); }

}  // namespace

void validate_synthetic_config(const SyntheticModelConfig& c) {
  const auto positive = [](const char* name, int64_t v) {
    if (v < 1) bad(fmt::format("{}={} must be >= 1", name, v));
  };
  positive("n_layer", c.n_layer);
  positive("n_head", c.n_head);
  positive("n_head_kv", c.n_head_kv);
  positive("head_dim", c.head_dim);
  positive("n_embd", c.n_embd);
  positive("n_ff", c.n_ff);
  positive("n_ctx", c.n_ctx);
  if (c.n_layer > 4096) bad(fmt::format("n_layer={} is unreasonably large", c.n_layer));
  const auto mult32 = [](const char* name, int64_t v) {
    if (v % kQ8Block != 0) bad(fmt::format("{}={} is not a multiple of 32 (Q8_0 rows)", name, v));
  };
  mult32("n_embd", c.n_embd);
  mult32("n_ff", c.n_ff);
  mult32("n_head*head_dim", c.n_head * c.head_dim);
  if (c.n_head % c.n_head_kv != 0)
    bad(fmt::format("n_head={} is not a multiple of n_head_kv={}", c.n_head, c.n_head_kv));
  if (c.n_vocab <= kFirstPlainToken || c.n_vocab > (int64_t{1} << 31)) {
    bad(fmt::format("n_vocab={} must be in {}..2^31", c.n_vocab, kFirstPlainToken + 1));
  }
  if (c.n_ctx > (int64_t{1} << 32) - 1) bad(fmt::format("n_ctx={} does not fit in uint32", c.n_ctx));
  // Keep every Q8_0 tensor below 2^40 bytes: guards the size arithmetic against absurd flags.
  const int64_t widest = std::max({c.n_embd, c.n_ff, c.n_head * c.head_dim, c.n_vocab});
  if (c.n_embd > (int64_t{1} << 20) || c.n_ff > (int64_t{1} << 20) || c.head_dim > (int64_t{1} << 16) ||
      c.n_head > 4096 || widest > (int64_t{1} << 31)) {
    bad("shapes are unreasonably large");
  }
  if (!(c.rope_base > 0.0f) || !std::isfinite(c.rope_base)) bad(fmt::format("rope_base={} must be > 0", c.rope_base));
  if (!(c.rms_eps > 0.0f) || !std::isfinite(c.rms_eps)) bad(fmt::format("rms_eps={} must be > 0", c.rms_eps));
  if (!(c.weight_std > 0.0f) || !std::isfinite(c.weight_std)) {
    bad(fmt::format("weight_std={} must be > 0", c.weight_std));
  }
}

uint64_t write_synthetic_model(const SyntheticModelConfig& c, const std::string& path) {
  validate_synthetic_config(c);
  GGUFWriter w;
  const auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  w.add_string("general.architecture", "llama");
  w.add_string("general.name", c.name);
  w.add_u32("general.file_type", 7);  // LLAMA_FTYPE_MOSTLY_Q8_0
  w.add_u32("general.quantization_version", 2);
  w.add_u32("llama.context_length", u32(c.n_ctx));
  w.add_u32("llama.embedding_length", u32(c.n_embd));
  w.add_u32("llama.block_count", u32(c.n_layer));
  w.add_u32("llama.feed_forward_length", u32(c.n_ff));
  w.add_u32("llama.attention.head_count", u32(c.n_head));
  w.add_u32("llama.attention.head_count_kv", u32(c.n_head_kv));
  w.add_u32("llama.attention.key_length", u32(c.head_dim));
  w.add_u32("llama.attention.value_length", u32(c.head_dim));
  w.add_f32("llama.attention.layer_norm_rms_epsilon", c.rms_eps);
  w.add_f32("llama.rope.freq_base", c.rope_base);
  w.add_u32("llama.rope.dimension_count", u32(c.head_dim));
  w.add_u32("llama.vocab_size", u32(c.n_vocab));

  // Byte-level SentencePiece-style vocabulary (token types: 1 normal, 2 unknown, 3 control, 6 byte).
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens.reserve(static_cast<size_t>(c.n_vocab));
  scores.reserve(static_cast<size_t>(c.n_vocab));
  types.reserve(static_cast<size_t>(c.n_vocab));
  const auto add_token = [&](std::string s, float score, int32_t type) {
    tokens.push_back(std::move(s));
    scores.push_back(score);
    types.push_back(type);
  };
  add_token("<unk>", 0.0f, 2);
  add_token("<s>", 0.0f, 3);
  add_token("</s>", 0.0f, 3);
  for (int b = 0; b < 256; ++b) add_token(fmt::format("<0x{:02X}>", b), 0.0f, 6);
  for (int64_t id = kFirstPlainToken; id < c.n_vocab; ++id) {
    add_token(fmt::format("tok{}", id), -static_cast<float>(id), 1);
  }
  if (c.with_tokenizer) {
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_f32_array("tokenizer.ggml.scores", scores);
    w.add_i32_array("tokenizer.ggml.token_type", types);
    w.add_u32("tokenizer.ggml.bos_token_id", 1);
    w.add_u32("tokenizer.ggml.eos_token_id", 2);
    w.add_u32("tokenizer.ggml.unknown_token_id", 0);
    w.add_bool("tokenizer.ggml.add_bos_token", true);
    w.add_bool("tokenizer.ggml.add_eos_token", false);
  }
  tokens = {};

  uint64_t tensor_id = 0;
  const auto q8 = [&](const std::string& name, int64_t cols, int64_t rows) {
    w.add_tensor(name, GGMLType::Q8_0, {cols, rows}, random_q8_0(cols, rows, c.seed, tensor_id++, c.weight_std));
  };
  const std::vector<float> ones(static_cast<size_t>(c.n_embd), 1.0f);
  const auto norm = [&](const std::string& name) {
    w.add_tensor_f32(name, {c.n_embd}, ones);
    ++tensor_id;
  };
  const int64_t q_dim = c.n_head * c.head_dim;
  const int64_t kv_dim = c.n_head_kv * c.head_dim;
  q8("token_embd.weight", c.n_embd, c.n_vocab);
  norm("output_norm.weight");
  q8("output.weight", c.n_embd, c.n_vocab);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    norm(p + "attn_norm.weight");
    q8(p + "attn_q.weight", c.n_embd, q_dim);
    q8(p + "attn_k.weight", c.n_embd, kv_dim);
    q8(p + "attn_v.weight", c.n_embd, kv_dim);
    q8(p + "attn_output.weight", q_dim, c.n_embd);
    norm(p + "ffn_norm.weight");
    q8(p + "ffn_gate.weight", c.n_embd, c.n_ff);
    q8(p + "ffn_up.weight", c.n_embd, c.n_ff);
    q8(p + "ffn_down.weight", c.n_ff, c.n_embd);
  }
  return w.write(path);
}

SyntheticModelConfig small_q8_kv_config() {
  SyntheticModelConfig c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = 32;
  c.n_embd = 128;
  c.n_ff = 256;
  c.n_vocab = 512;
  c.n_ctx = 4096;
  c.weight_std = 0.08f;
  c.name = "small synthetic llama (head_dim 32)";
  return c;
}

std::shared_ptr<const Engine> load_synthetic_engine(const SyntheticModelConfig& cfg, int n_threads) {
  static std::atomic<int> counter{0};
  const std::filesystem::path p = std::filesystem::temp_directory_path() /
                                  fmt::format("snapkv_synthetic_{}_{}.gguf", ::getpid(), counter.fetch_add(1));
  write_synthetic_model(cfg, p.string());
  EngineOptions o;
  o.n_threads = n_threads;
  std::shared_ptr<const Engine> e;
  try {
    e = Engine::load(p.string(), o);
  } catch (...) {
    std::filesystem::remove(p);
    throw;
  }
  std::filesystem::remove(p);
  return e;
}

}  // namespace snapkv
