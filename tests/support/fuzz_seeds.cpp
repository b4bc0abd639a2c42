// snapkv: the GGUF seed files of the parser fuzzer, built with GGUFWriter.
#include "support/fuzz_seeds.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "snapkv/error.h"
#include "support/gguf_writer.h"

namespace snapkv {
namespace {

using V = GGUFWriterValue;

FuzzSeed seed(const char* name, const GGUFWriter& w, uint32_t version = 3) {
  FuzzSeed s{name, w.to_bytes()};
  s.bytes[4] = static_cast<uint8_t>(version);  // the writer emits v3; v2 has the same layout
  return s;
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = scale * std::sin(0.7f * static_cast<float>(k));
  return v;
}

GGUFWriter all_types() {
  GGUFWriter w;
  w.add_u8("t.u8", 7);
  w.add_i8("t.i8", -7);
  w.add_u16("t.u16", 700);
  w.add_i16("t.i16", -700);
  w.add_u32("t.u32", 70000);
  w.add_i32("t.i32", -70000);
  w.add_u64("t.u64", 1ull << 40);
  w.add_i64("t.i64", -(1ll << 40));
  w.add_f32("t.f32", 0.5f);
  w.add_f64("t.f64", 0.25);
  w.add_bool("t.bool", true);
  w.add_string("t.str", "hello");
  w.add_string_array("t.strs", {"a", "bc", ""});
  w.add_f32_array("t.f32s", {1.0f, -1.0f});
  w.add_i32_array("t.i32s", {1, -1});
  w.add("t.nested", V::array(GGUFValueType::ARRAY, {V::array(GGUFValueType::UINT8, {V::u8(1)}),
                                                    V::array(GGUFValueType::STRING, {V::string("x")})}));
  const auto w64 = ramp(64, 1.0f);
  w.add_tensor_f32("f32", {8, 8}, w64);
  w.add_tensor("q8", GGMLType::Q8_0, {32, 2}, quantize_q8_0(w64.data(), 64));
  return w;
}

GGUFWriter alignment64() {
  GGUFWriter w(64);
  w.add_string("general.architecture", "test");
  w.add_tensor("f16", GGMLType::F16, {4, 2, 2}, std::vector<uint8_t>(32, 0x3c));
  std::vector<uint8_t> q4k(144);
  for (size_t k = 0; k < q4k.size(); ++k) q4k[k] = static_cast<uint8_t>(k * 13);
  w.add_tensor("q4k", GGMLType::Q4_K, {256}, q4k);
  w.add_tensor("i32", GGMLType::I32, {3, 1, 1, 2}, std::vector<uint8_t>(24, 1));
  return w;
}

GGUFWriter vocab() {
  GGUFWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "default");
  std::vector<std::string> toks;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (int k = 0; k < 64; ++k) {
    toks.push_back(k < 3 ? (k == 0 ? "<unk>" : k == 1 ? "<s>" : "</s>") : "t" + std::to_string(k));
    scores.push_back(-static_cast<float>(k));
    types.push_back(k < 3 ? 3 : 1);
  }
  w.add_string_array("tokenizer.ggml.tokens", toks);
  w.add_f32_array("tokenizer.ggml.scores", scores);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_string_array("tokenizer.ggml.merges", {"t 3", "t3 t4", "a b"});
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  return w;
}

// A llama-shaped model: n_embd 32, 1 layer, 2 heads of 16, n_ff 32, vocab 16, F32 and Q8_0 weights.
GGUFWriter tiny_llama() {
  GGUFWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.block_count", 1);
  w.add_u32("llama.embedding_length", 32);
  w.add_u32("llama.feed_forward_length", 32);
  w.add_u32("llama.attention.head_count", 2);
  w.add_u32("llama.attention.head_count_kv", 1);
  w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.add_u32("llama.context_length", 128);
  const auto embd = ramp(32 * 16, 0.02f);
  const auto sq = ramp(32 * 32, 0.02f);
  const auto kv = ramp(32 * 16, 0.02f);
  const std::vector<float> ones(32, 1.0f);
  w.add_tensor("token_embd.weight", GGMLType::Q8_0, {32, 16}, quantize_q8_0(embd.data(), 32 * 16));
  w.add_tensor_f32("output_norm.weight", {32}, ones);
  w.add_tensor_f32("blk.0.attn_norm.weight", {32}, ones);
  w.add_tensor("blk.0.attn_q.weight", GGMLType::Q8_0, {32, 32}, quantize_q8_0(sq.data(), 32 * 32));
  w.add_tensor("blk.0.attn_k.weight", GGMLType::Q8_0, {32, 16}, quantize_q8_0(kv.data(), 32 * 16));
  w.add_tensor("blk.0.attn_v.weight", GGMLType::Q8_0, {32, 16}, quantize_q8_0(kv.data(), 32 * 16));
  w.add_tensor("blk.0.attn_output.weight", GGMLType::Q8_0, {32, 32}, quantize_q8_0(sq.data(), 32 * 32));
  return w;
}

}  // namespace

std::vector<FuzzSeed> make_fuzz_seeds() {
  const GGUFWriter all = all_types();
  std::vector<FuzzSeed> seeds;
  seeds.push_back(seed("empty.gguf", GGUFWriter()));
  seeds.push_back(seed("all_types.gguf", all));
  seeds.push_back(seed("all_types_v2.gguf", all, 2));
  seeds.push_back(seed("alignment64.gguf", alignment64()));
  seeds.push_back(seed("vocab.gguf", vocab()));
  seeds.push_back(seed("tiny_llama.gguf", tiny_llama()));
  return seeds;
}

std::vector<std::string> write_fuzz_seeds(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw Error("fuzz seeds: output directory '" + dir + "' does not exist or is not a directory");
  }
  std::vector<std::string> paths;
  for (const FuzzSeed& s : make_fuzz_seeds()) {
    const std::string path = (std::filesystem::path(dir) / s.name).string();
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) throw Error("fuzz seeds: cannot open '" + path + "' for writing");
    const bool ok = std::fwrite(s.bytes.data(), 1, s.bytes.size(), f) == s.bytes.size();
    if (std::fclose(f) != 0 || !ok) throw Error("fuzz seeds: cannot write '" + path + "'");
    paths.push_back(path);
  }
  return paths;
}

}  // namespace snapkv
