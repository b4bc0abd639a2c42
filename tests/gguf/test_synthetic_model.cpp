// The synthetic-model generator (library function behind tools/make_synthetic_gguf): tiny shapes,
// written to a temp dir and read back through GGUFFile.
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "gguf/gguf.h"
#include "snapkv/error.h"
#include "support/synthetic_model.h"

namespace snapkv {
namespace {

namespace fs = std::filesystem;

class SyntheticModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("snapkv_synth_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    cfg_.n_layer = 2;
    cfg_.n_head = 4;
    cfg_.n_head_kv = 2;
    cfg_.head_dim = 16;
    cfg_.n_embd = 96;
    cfg_.n_ff = 160;
    cfg_.n_vocab = 300;
    cfg_.n_ctx = 512;
    cfg_.seed = 7;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& n) const { return (dir_ / n).string(); }

  static std::vector<char> slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  fs::path dir_;
  SyntheticModelConfig cfg_;
};

/// Dequantizes a Q8_0 tensor (block: f16 d, int8 q[32]; x = d * q).
std::vector<float> dequant_q8_0(const GGUFTensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  for (size_t b = 0; b < out.size() / 32; ++b) {
    uint16_t dh;
    std::memcpy(&dh, t.data + b * 34, 2);
    const float d = fp16_to_fp32(dh);
    for (size_t j = 0; j < 32; ++j)
      out[b * 32 + j] = d * static_cast<float>(static_cast<int8_t>(t.data[b * 34 + 2 + j]));
  }
  return out;
}

TEST_F(SyntheticModel, MetadataVocabAndTensors) {
  const std::string p = path("m.gguf");
  const uint64_t n = write_synthetic_model(cfg_, p);
  EXPECT_EQ(n, fs::file_size(p));
  const GGUFFile g = GGUFFile::open(p);
  EXPECT_EQ(g.get_string("general.architecture"), "llama");
  EXPECT_EQ(g.get_string("general.name"), "synthetic SmolLM2-135M shapes (random Q8_0 weights)");
  EXPECT_EQ(g.get_u64("llama.context_length"), 512u);
  EXPECT_EQ(g.get_u64("llama.embedding_length"), 96u);
  EXPECT_EQ(g.get_u64("llama.block_count"), 2u);
  EXPECT_EQ(g.get_u64("llama.feed_forward_length"), 160u);
  EXPECT_EQ(g.get_u64("llama.attention.head_count"), 4u);
  EXPECT_EQ(g.get_u64("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(g.get_u64("llama.attention.key_length"), 16u);
  EXPECT_EQ(g.get_u64("llama.rope.dimension_count"), 16u);
  EXPECT_EQ(g.get_u64("llama.vocab_size"), 300u);
  EXPECT_EQ(g.get_f64("llama.rope.freq_base"), 100000.0);
  EXPECT_EQ(g.get_f64("llama.attention.layer_norm_rms_epsilon"), static_cast<double>(1e-5f));
  EXPECT_EQ(g.find("llama.block_count")->type, GGUFValueType::UINT32);

  EXPECT_EQ(g.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(g.get_u64("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(g.get_u64("tokenizer.ggml.eos_token_id"), 2u);
  const auto tokens = g.get_string_array("tokenizer.ggml.tokens");
  const auto scores = g.get_f32_array("tokenizer.ggml.scores");
  const auto types = g.get_i64_array("tokenizer.ggml.token_type");
  ASSERT_EQ(tokens.size(), 300u);
  ASSERT_EQ(scores.size(), 300u);
  ASSERT_EQ(types.size(), 300u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ((std::vector<int64_t>{types[0], types[1], types[2]}), (std::vector<int64_t>{2, 3, 3}));
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(tokens[3 + 0x41], "<0x41>");
  EXPECT_EQ(tokens[258], "<0xFF>");
  for (int i = 3; i < 259; ++i) EXPECT_EQ(types[i], 6) << i;
  EXPECT_EQ(tokens[259], "tok259");
  EXPECT_EQ(tokens[299], "tok299");
  EXPECT_EQ(types[299], 1);
  EXPECT_EQ(scores[299], -299.0f);
  EXPECT_EQ(scores[5], 0.0f);

  ASSERT_EQ(g.tensors().size(), 3u + 9u * 2u);
  const auto dims = [&](const char* name) { return g.tensor(name).dims; };
  using D = std::vector<int64_t>;
  EXPECT_EQ(dims("token_embd.weight"), (D{96, 300}));
  EXPECT_EQ(dims("output.weight"), (D{96, 300}));
  EXPECT_EQ(dims("output_norm.weight"), (D{96}));
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(dims((b + "attn_norm.weight").c_str()), (D{96}));
    EXPECT_EQ(dims((b + "ffn_norm.weight").c_str()), (D{96}));
    EXPECT_EQ(dims((b + "attn_q.weight").c_str()), (D{96, 64}));
    EXPECT_EQ(dims((b + "attn_k.weight").c_str()), (D{96, 32}));
    EXPECT_EQ(dims((b + "attn_v.weight").c_str()), (D{96, 32}));
    EXPECT_EQ(dims((b + "attn_output.weight").c_str()), (D{64, 96}));
    EXPECT_EQ(dims((b + "ffn_gate.weight").c_str()), (D{96, 160}));
    EXPECT_EQ(dims((b + "ffn_up.weight").c_str()), (D{96, 160}));
    EXPECT_EQ(dims((b + "ffn_down.weight").c_str()), (D{160, 96}));
  }
  // Norms are F32 ones; weights Q8_0 ~ N(0, 0.02^2).
  double sum = 0, sum2 = 0;
  size_t count = 0;
  for (const auto& t : g.tensors()) {
    if (t.name.find("norm") != std::string::npos) {
      ASSERT_EQ(t.ggml_type(), GGMLType::F32) << t.name;
      for (int64_t k = 0; k < t.n_elements(); ++k) {
        float v;
        std::memcpy(&v, t.data + 4 * k, 4);
        ASSERT_EQ(v, 1.0f) << t.name;
      }
      continue;
    }
    ASSERT_EQ(t.ggml_type(), GGMLType::Q8_0) << t.name;
    for (float v : dequant_q8_0(t)) {
      sum += v;
      sum2 += static_cast<double>(v) * v;
      ++count;
    }
  }
  const double mean = sum / static_cast<double>(count);
  const double sd = std::sqrt(sum2 / static_cast<double>(count) - mean * mean);
  EXPECT_GT(count, 100000u);
  EXPECT_NEAR(mean, 0.0, 5e-4);
  EXPECT_NEAR(sd, 0.02, 0.0006);
}

TEST_F(SyntheticModel, DeterministicPerSeedAndThreadCount) {
  write_synthetic_model(cfg_, path("a.gguf"));
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  write_synthetic_model(cfg_, path("b.gguf"));
  omp_set_num_threads(threads);
  cfg_.seed = 8;
  write_synthetic_model(cfg_, path("c.gguf"));
  const auto a = slurp(path("a.gguf"));
  EXPECT_EQ(a, slurp(path("b.gguf")));
  const auto c = slurp(path("c.gguf"));
  ASSERT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
  // Different tensors (and rows) get different streams.
  const GGUFFile g = GGUFFile::open(path("a.gguf"));
  const auto& q = g.tensor("blk.0.attn_q.weight");
  const auto& k = g.tensor("blk.1.attn_q.weight");
  EXPECT_NE(std::memcmp(q.data, k.data, q.nbytes), 0);
  EXPECT_NE(std::memcmp(q.data, q.data + 3 * 34, 3 * 34), 0);
}

TEST_F(SyntheticModel, DefaultsAreSmolLM2Shapes) {
  const SyntheticModelConfig d;
  EXPECT_EQ(d.n_layer, 30);
  EXPECT_EQ(d.n_head, 9);
  EXPECT_EQ(d.n_head_kv, 3);
  EXPECT_EQ(d.head_dim, 64);
  EXPECT_EQ(d.n_embd, 576);
  EXPECT_EQ(d.n_ff, 1536);
  EXPECT_EQ(d.n_vocab, 49152);
  EXPECT_EQ(d.n_ctx, 32768);
  EXPECT_EQ(d.rope_base, 100000.0f);
  EXPECT_EQ(d.rms_eps, 1e-5f);
  EXPECT_NO_THROW(validate_synthetic_config(d));
}

TEST_F(SyntheticModel, RejectsBadShapes) {
  const auto err = [](SyntheticModelConfig c) -> std::string {
    try {
      validate_synthetic_config(c);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  SyntheticModelConfig c = cfg_;
  c.n_embd = 100;
  EXPECT_NE(err(c).find("n_embd=100"), std::string::npos) << err(c);
  c = cfg_;
  c.n_head_kv = 3;
  EXPECT_NE(err(c).find("n_head_kv=3"), std::string::npos) << err(c);
  c = cfg_;
  c.n_vocab = 259;
  EXPECT_NE(err(c).find("n_vocab=259"), std::string::npos) << err(c);
  c = cfg_;
  c.n_layer = 0;
  EXPECT_NE(err(c).find("n_layer=0"), std::string::npos) << err(c);
  c = cfg_;
  c.rms_eps = -1.0f;
  EXPECT_NE(err(c).find("rms_eps"), std::string::npos) << err(c);
  EXPECT_THROW(write_synthetic_model(c, path("bad.gguf")), Error);
  EXPECT_FALSE(fs::exists(path("bad.gguf")));
}

}  // namespace
}  // namespace snapkv
