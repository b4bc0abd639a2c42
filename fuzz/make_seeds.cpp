// Writes the small GGUF seed files of the fuzz corpus (fuzz/seeds/*.gguf, each < 8 KB) with GGUFWriter.
// Usage: fuzz_make_seeds <output dir>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "snapkv/error.h"
#include "snapkv/gguf_writer.h"

namespace {

using snapkv::GGMLType;
using snapkv::GGUFValueType;
using snapkv::GGUFWriter;
using V = snapkv::GGUFWriterValue;

void save(const std::string& dir, const char* name, const GGUFWriter& w, uint32_t version = 3) {
  std::vector<uint8_t> b = w.to_bytes();
  b[4] = static_cast<uint8_t>(version);  // the writer emits v3; v2 has the same layout
  const std::string path = dir + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(b.data(), 1, b.size(), f) != b.size() || std::fclose(f) != 0) {
    throw snapkv::Error(path + ": cannot write seed");
  }
  std::printf("%s: %zu bytes\n", path.c_str(), b.size());
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = scale * std::sin(0.7f * static_cast<float>(k));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output dir>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  try {
    save(dir, "empty.gguf", GGUFWriter());

    GGUFWriter all;
    all.add_u8("t.u8", 7);
    all.add_i8("t.i8", -7);
    all.add_u16("t.u16", 700);
    all.add_i16("t.i16", -700);
    all.add_u32("t.u32", 70000);
    all.add_i32("t.i32", -70000);
    all.add_u64("t.u64", 1ull << 40);
    all.add_i64("t.i64", -(1ll << 40));
    all.add_f32("t.f32", 0.5f);
    all.add_f64("t.f64", 0.25);
    all.add_bool("t.bool", true);
    all.add_string("t.str", "hello");
    all.add_string_array("t.strs", {"a", "bc", ""});
    all.add_f32_array("t.f32s", {1.0f, -1.0f});
    all.add_i32_array("t.i32s", {1, -1});
    all.add("t.nested", V::array(GGUFValueType::ARRAY, {V::array(GGUFValueType::UINT8, {V::u8(1)}),
                                                        V::array(GGUFValueType::STRING, {V::string("x")})}));
    const auto w64 = ramp(64, 1.0f);
    all.add_tensor_f32("f32", {8, 8}, w64);
    all.add_tensor("q8", GGMLType::Q8_0, {32, 2}, snapkv::quantize_q8_0(w64.data(), 64));
    save(dir, "all_types.gguf", all);
    save(dir, "all_types_v2.gguf", all, 2);

    GGUFWriter al(64);
    al.add_string("general.architecture", "test");
    al.add_tensor("f16", GGMLType::F16, {4, 2, 2}, std::vector<uint8_t>(32, 0x3c));
    std::vector<uint8_t> q4k(144);
    for (size_t k = 0; k < q4k.size(); ++k) q4k[k] = static_cast<uint8_t>(k * 13);
    al.add_tensor("q4k", GGMLType::Q4_K, {256}, q4k);
    al.add_tensor("i32", GGMLType::I32, {3, 1, 1, 2}, std::vector<uint8_t>(24, 1));
    save(dir, "alignment64.gguf", al);

    GGUFWriter vocab;
    vocab.add_string("tokenizer.ggml.model", "gpt2");
    vocab.add_string("tokenizer.ggml.pre", "default");
    std::vector<std::string> toks;
    std::vector<float> scores;
    std::vector<int32_t> types;
    for (int k = 0; k < 64; ++k) {
      toks.push_back(k < 3 ? (k == 0 ? "<unk>" : k == 1 ? "<s>" : "</s>") : "t" + std::to_string(k));
      scores.push_back(-static_cast<float>(k));
      types.push_back(k < 3 ? 3 : 1);
    }
    vocab.add_string_array("tokenizer.ggml.tokens", toks);
    vocab.add_f32_array("tokenizer.ggml.scores", scores);
    vocab.add_i32_array("tokenizer.ggml.token_type", types);
    vocab.add_string_array("tokenizer.ggml.merges", {"t 3", "t3 t4", "a b"});
    vocab.add_u32("tokenizer.ggml.bos_token_id", 1);
    vocab.add_bool("tokenizer.ggml.add_bos_token", true);
    save(dir, "vocab.gguf", vocab);

    // A llama-shaped model: n_embd 32, 1 layer, 2 heads of 16, n_ff 32, vocab 16, F32 weights.
    GGUFWriter m;
    m.add_string("general.architecture", "llama");
    m.add_u32("llama.block_count", 1);
    m.add_u32("llama.embedding_length", 32);
    m.add_u32("llama.feed_forward_length", 32);
    m.add_u32("llama.attention.head_count", 2);
    m.add_u32("llama.attention.head_count_kv", 1);
    m.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    m.add_u32("llama.context_length", 128);
    const auto embd = ramp(32 * 16, 0.02f);
    const auto sq = ramp(32 * 32, 0.02f);
    const auto kv = ramp(32 * 16, 0.02f);
    const std::vector<float> ones(32, 1.0f);
    m.add_tensor("token_embd.weight", GGMLType::Q8_0, {32, 16}, snapkv::quantize_q8_0(embd.data(), 32 * 16));
    m.add_tensor_f32("output_norm.weight", {32}, ones);
    m.add_tensor_f32("blk.0.attn_norm.weight", {32}, ones);
    m.add_tensor("blk.0.attn_q.weight", GGMLType::Q8_0, {32, 32}, snapkv::quantize_q8_0(sq.data(), 32 * 32));
    m.add_tensor("blk.0.attn_k.weight", GGMLType::Q8_0, {32, 16}, snapkv::quantize_q8_0(kv.data(), 32 * 16));
    m.add_tensor("blk.0.attn_v.weight", GGMLType::Q8_0, {32, 16}, snapkv::quantize_q8_0(kv.data(), 32 * 16));
    m.add_tensor("blk.0.attn_output.weight", GGMLType::Q8_0, {32, 32}, snapkv::quantize_q8_0(sq.data(), 32 * 32));
    save(dir, "tiny_llama.gguf", m);
  } catch (const snapkv::Error& e) {
    std::fprintf(stderr, "fuzz_make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
