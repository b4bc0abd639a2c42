// Real GGUF files from ../shared (tiny models and vocab-only files) and the cached Gemma 3 270M model,
// checked against gguf-py dumps (../shared/models/golden/*/metadata.{txt,json}) and values read
// independently with gguf-py (byte sums, offsets).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "test_util.h"

namespace snapkv {
namespace {

namespace fs = std::filesystem;

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

uint64_t byte_sum(const GGUFTensorInfo& t) {
  uint64_t s = 0;
  for (uint64_t k = 0; k < t.nbytes; ++k) s += t.data[k];
  return s;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(' ');
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(' ') - a + 1);
}

/// One listing line of gguf_dump.py, split on its first three '|' separators (no std::regex: GCC 12
/// warns inside <regex> under -O2 + ASan).
///   metadata: "  N: TYPE | count | key = value"  or  "  N: [ELEM] | count | key"
///   tensor:   "  N: n_elements | d0, d1, d2, d3 | TYPE | name"
struct DumpLine {
  bool tensor = false;
  std::string head;  // after "N: "
  std::string f1, f2, f3;
};

bool split_dump_line(const std::string& line, DumpLine& out) {
  const size_t colon = line.find(": ");
  const size_t p1 = line.find('|');
  if (colon == std::string::npos || p1 == std::string::npos || colon > p1) return false;
  const size_t p2 = line.find('|', p1 + 1);
  if (p2 == std::string::npos) return false;
  out.head = trim(line.substr(colon + 2, p1 - colon - 2));
  out.f1 = trim(line.substr(p1 + 1, p2 - p1 - 1));
  out.tensor = out.f1.find(',') != std::string::npos;
  if (!out.tensor) {
    out.f2 = line.substr(p2 + 2);  // "key = value" (a value may contain '|')
    return true;
  }
  const size_t p3 = line.find('|', p2 + 1);
  if (p3 == std::string::npos) return false;
  out.f2 = trim(line.substr(p2 + 1, p3 - p2 - 1));
  out.f3 = trim(line.substr(p3 + 1));
  return true;
}

/// Compares a model with the gguf_dump.py listing in golden/<model>/metadata.txt: every key's type,
/// scalar value and array length, and every tensor's name, dims, element count and type, in order.
void check_against_dump(const std::string& model) {
  const fs::path gguf = test::shared_dir() / "models" / (model + ".gguf");
  const fs::path dump = test::shared_dir() / "models" / "golden" / model / "metadata.txt";
  if (!fs::exists(gguf) || !fs::exists(dump)) GTEST_SKIP() << "missing " << gguf << " or " << dump;
  const GGUFFile g = GGUFFile::open(gguf.string());

  std::ifstream in(dump);
  std::string line;
  size_t n_kv = 0;
  size_t n_t = 0;
  uint64_t header_kv = 0;
  uint64_t header_t = 0;
  DumpLine d;
  while (std::getline(in, line)) {
    if (!split_dump_line(line, d)) continue;
    SCOPED_TRACE(line);
    if (d.tensor) {
      ASSERT_LT(n_t, g.tensors().size());
      const GGUFTensorInfo& t = g.tensors()[n_t++];
      EXPECT_EQ(t.name, d.f3);
      EXPECT_EQ(t.n_elements(), std::stoll(d.head));
      std::vector<int64_t> dims = t.dims;
      dims.resize(4, 1);
      std::istringstream ds(d.f1);
      for (int k = 0; k < 4; ++k) {
        int64_t want = 0;
        char comma = 0;
        ds >> want;
        if (k < 3) ds >> comma;
        EXPECT_EQ(dims[k], want) << k;
      }
      EXPECT_EQ(ggml_type_name(t.type), d.f2);
      EXPECT_EQ(g.find_tensor(t.name), &t);
      continue;
    }
    const size_t eq = d.f2.find(" = ");
    const std::string key = eq == std::string::npos ? trim(d.f2) : d.f2.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : d.f2.substr(eq + 3);
    if (key == "GGUF.version") {
      EXPECT_EQ(g.version(), std::stoul(value));
      continue;
    }
    if (key == "GGUF.tensor_count") {
      header_t = std::stoull(value);
      continue;
    }
    if (key == "GGUF.kv_count") {
      header_kv = std::stoull(value);
      continue;
    }
    ++n_kv;
    const GGUFValue* v = g.find(key);
    ASSERT_NE(v, nullptr) << key;
    if (d.head.front() == '[') {
      EXPECT_EQ(v->type, GGUFValueType::ARRAY);
      EXPECT_EQ(upper(gguf_value_type_name(v->elem_type)), d.head.substr(1, d.head.size() - 2));
      EXPECT_EQ(v->arr.size(), std::stoull(d.f1));
      continue;
    }
    EXPECT_EQ(upper(gguf_value_type_name(v->type)), d.head);
    if (v->type == GGUFValueType::STRING) {
      ASSERT_GE(value.size(), 2u);
      EXPECT_EQ(g.get_string(key), value.substr(1, value.size() - 2));
    } else if (v->is_float()) {
      EXPECT_EQ(g.get_f64(key), std::stod(value));  // gguf-py prints the exact double
    } else {
      EXPECT_EQ(g.get_u64(key), std::stoull(value));
    }
  }
  EXPECT_EQ(n_t, g.tensors().size());
  EXPECT_EQ(header_t, g.tensors().size());
  EXPECT_EQ(n_kv, g.metadata().size());
  EXPECT_EQ(header_kv, g.metadata().size());
  EXPECT_GT(n_kv, 10u);
}

TEST(GGUFShared, Stories260KMatchesDump) { check_against_dump("stories260K"); }
TEST(GGUFShared, TinyRandomMatchesDump) { check_against_dump("llama-2-tiny-random"); }

TEST(GGUFShared, Stories260KFields) {
  const fs::path p = test::shared_dir() / "models" / "stories260K.gguf";
  if (!fs::exists(p)) GTEST_SKIP() << "missing " << p;
  const GGUFFile g = GGUFFile::open(p.string());
  EXPECT_EQ(g.file_size(), 1185376u);
  EXPECT_EQ(g.get_string("general.architecture"), "llama");
  EXPECT_EQ(g.get_u64("llama.block_count"), 5u);
  EXPECT_EQ(g.get_u64("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(g.get_u64("tokenizer.ggml.seperator_token_id"), 4294967295u);
  EXPECT_FALSE(g.get_f64_opt("llama.rope.freq_base").has_value());
  EXPECT_EQ(g.tensors().size(), 48u);
  EXPECT_EQ(g.alignment(), 32u);
  // Values read with gguf-py: data section start, tensor placements and byte sums.
  EXPECT_EQ(g.data_offset(), 14176u);
  const auto& embd = g.tensor("token_embd.weight");
  EXPECT_EQ(embd.ggml_type(), GGMLType::F32);
  EXPECT_EQ(embd.dims, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(embd.offset, 0u);
  EXPECT_EQ(embd.nbytes, 131072u);
  EXPECT_EQ(byte_sum(embd), 16323101u);
  EXPECT_EQ(g.tensor("output_norm.weight").data - embd.data, 145248 - 14176);
  EXPECT_EQ(byte_sum(g.tensor("output_norm.weight")), 29934u);
  const auto& last = g.tensors().back();
  EXPECT_EQ(last.name, "blk.4.ffn_norm.weight");
  EXPECT_EQ(g.data_offset() + last.offset, 1185120u);
  EXPECT_EQ(byte_sum(last), 29409u);
  EXPECT_EQ(g.data_offset() + last.offset + last.nbytes, g.file_size());
}

TEST(GGUFShared, Stories260KVocabMatchesJsonDump) {
  const fs::path p = test::shared_dir() / "models" / "stories260K.gguf";
  const fs::path j = test::shared_dir() / "models" / "golden" / "stories260K" / "metadata.json";
  if (!fs::exists(p) || !fs::exists(j)) GTEST_SKIP() << "missing " << p << " or " << j;
  const GGUFFile g = GGUFFile::open(p.string());
  std::ifstream in(j);
  const auto dump = nlohmann::json::parse(in);
  const auto& md = dump.at("metadata");
  const auto tokens = g.get_string_array("tokenizer.ggml.tokens");
  const auto scores = g.get_f32_array("tokenizer.ggml.scores");
  const auto types = g.get_i64_array("tokenizer.ggml.token_type");
  const auto& jt = md.at("tokenizer.ggml.tokens").at("value");
  const auto& js = md.at("tokenizer.ggml.scores").at("value");
  const auto& jy = md.at("tokenizer.ggml.token_type").at("value");
  ASSERT_EQ(tokens.size(), 512u);
  ASSERT_EQ(jt.size(), tokens.size());
  ASSERT_EQ(js.size(), scores.size());
  ASSERT_EQ(jy.size(), types.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_EQ(tokens[i], jt[i].get<std::string>()) << i;
    EXPECT_EQ(static_cast<double>(scores[i]), js[i].get<double>()) << i;
    EXPECT_EQ(types[i], jy[i].get<int64_t>()) << i;
  }
  // Tensor shapes and types from the same dump.
  const auto& jtens = dump.at("tensors");
  ASSERT_EQ(jtens.size(), g.tensors().size());
  for (const auto& [name, info] : jtens.items()) {
    const auto& t = g.tensor(name);
    EXPECT_EQ(t.dims, info.at("shape").get<std::vector<int64_t>>()) << name;
    EXPECT_EQ(ggml_type_name(t.type), info.at("type").get<std::string>()) << name;
    EXPECT_EQ(&g.tensors()[info.at("index").get<size_t>()], &t) << name;
  }
}

TEST(GGUFShared, TinyRandomFields) {
  const fs::path p = test::shared_dir() / "models" / "llama-2-tiny-random.gguf";
  if (!fs::exists(p)) GTEST_SKIP() << "missing " << p;
  const GGUFFile g = GGUFFile::open(p.string());
  EXPECT_EQ(g.data_offset(), 724416u);
  const auto& embd = g.tensor("token_embd.weight");
  EXPECT_EQ(embd.ggml_type(), GGMLType::F16);
  EXPECT_EQ(embd.dims, (std::vector<int64_t>{8, 32000}));
  EXPECT_EQ(byte_sum(embd), 56510668u);
  EXPECT_EQ(byte_sum(g.tensor("blk.0.attn_q.weight")), 13123u);
  EXPECT_EQ(byte_sum(g.tensor("output.weight")), 56453087u);
  EXPECT_EQ(g.get_string_array("tokenizer.ggml.tokens").size(), 32000u);
  EXPECT_EQ(g.get_string_array("tokenizer.ggml.tokens")[16000],
            "\xe2\x96\x81"
            "deleg");
}

struct VocabCase {
  const char* file;
  const char* model;
  const char* pre;
  size_t n_tokens;
  const char* middle;  // token n_tokens / 2
  const char* last;
  size_t n_merges;  // 0: no merges key
  size_t n_kv;
};

// Values read with gguf-py 0.x from the same files.
const VocabCase kVocabs[] = {
    {"ggml-vocab-llama-spm.gguf", "llama", "default", 32000,
     "\xe2\x96\x81"
     "deleg",
     "\xe7\xbb\x99", 0, 22},
    {"ggml-vocab-phi-3.gguf", "llama", "default", 32064, "\xe2\x96\x81Import", "[PAD32063]", 0, 26},
    {"ggml-vocab-gpt-2.gguf", "gpt2", "gpt-2", 50257, "++++++++", "<|endoftext|>", 50000, 16},
    {"ggml-vocab-deepseek-coder.gguf", "gpt2", "deepseek-coder", 32256, "fony", "[PAD32255]", 31757, 25},
    {"ggml-vocab-falcon.gguf", "gpt2", "falcon", 65024, "\xc4\xa0MX", "\xc4\xa0victoria", 64784, 18},
    {"ggml-vocab-mpt.gguf", "gpt2", "mpt", 50432, "Lower", "[PAD50431]", 50009, 17},
};

TEST(GGUFShared, VocabOnlyFiles) {
  for (const VocabCase& c : kVocabs) {
    SCOPED_TRACE(c.file);
    const fs::path p = test::shared_dir() / "tokenizers" / c.file;
    if (!fs::exists(p)) GTEST_SKIP() << "missing " << p;
    const GGUFFile g = GGUFFile::open(p.string());
    EXPECT_EQ(g.version(), 3u);
    EXPECT_TRUE(g.tensors().empty());
    EXPECT_EQ(g.metadata().size(), c.n_kv);
    EXPECT_EQ(g.get_string("tokenizer.ggml.model"), c.model);
    EXPECT_EQ(g.get_string("tokenizer.ggml.pre"), c.pre);
    const auto tokens = g.get_string_array("tokenizer.ggml.tokens");
    ASSERT_EQ(tokens.size(), c.n_tokens);
    EXPECT_EQ(tokens[c.n_tokens / 2], c.middle);
    EXPECT_EQ(tokens.back(), c.last);
    EXPECT_EQ(g.get_i64_array("tokenizer.ggml.token_type").size(), c.n_tokens);
    if (g.has("tokenizer.ggml.scores")) {
      EXPECT_EQ(g.get_f32_array("tokenizer.ggml.scores").size(), c.n_tokens);
    }
    if (c.n_merges == 0) {
      EXPECT_FALSE(g.has("tokenizer.ggml.merges"));
    } else {
      const auto merges = g.get_string_array("tokenizer.ggml.merges");
      EXPECT_EQ(merges.size(), c.n_merges);
      for (size_t i = 0; i < merges.size(); i += 997) EXPECT_NE(merges[i].find(' '), std::string_view::npos);
    }
  }
}

TEST(GGUFShared, Gemma3) {
  const fs::path p = test::gemma_path();
  if (!fs::exists(p)) GTEST_SKIP() << "Gemma model not in the cache (" << p << "); run scripts/get-model.sh";
  double best = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    const GGUFFile g = GGUFFile::open(p.string());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const GGUFFile g = GGUFFile::open(p.string());
  EXPECT_EQ(g.get_string("general.architecture"), "gemma3");
  EXPECT_EQ(g.get_u64("gemma3.block_count"), 18u);
  EXPECT_EQ(g.get_u64("gemma3.embedding_length"), 640u);
  EXPECT_EQ(g.get_u64("gemma3.attention.head_count_kv"), 1u);
  EXPECT_EQ(g.get_u64("gemma3.attention.key_length"), 256u);
  EXPECT_EQ(g.get_u64("gemma3.attention.sliding_window"), 512u);
  EXPECT_EQ(g.get_f64("gemma3.rope.freq_base"), 1000000.0);
  EXPECT_EQ(g.get_u64("tokenizer.ggml.bos_token_id"), 2u);
  EXPECT_TRUE(g.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(g.get_string_array("general.tags"),
            (std::vector<std::string_view>{"gemma3", "gemma", "google", "text-generation"}));
  EXPECT_EQ(g.metadata().size(), 33u);
  EXPECT_EQ(g.tensors().size(), 236u);
  const auto tokens = g.get_string_array("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens.size(), 262144u);
  EXPECT_EQ(g.get_f32_array("tokenizer.ggml.scores").size(), 262144u);
  const auto& embd = g.tensor("token_embd.weight");
  EXPECT_EQ(embd.ggml_type(), GGMLType::Q8_0);
  EXPECT_EQ(embd.dims, (std::vector<int64_t>{640, 262144}));
  EXPECT_EQ(embd.nbytes, 178257920u);
  // Placement and bytes as read by gguf-py.
  EXPECT_EQ(g.data_offset(), 6525120u);
  EXPECT_EQ(g.data_offset() + embd.offset, 6527680u);
  const auto& k0 = g.tensor("blk.0.attn_k.weight");
  EXPECT_EQ(k0.ggml_type(), GGMLType::Q5_0);
  EXPECT_EQ(k0.dims, (std::vector<int64_t>{640, 256}));
  EXPECT_EQ(byte_sum(k0), 13895111u);
  EXPECT_EQ(g.tensor("blk.0.attn_output.weight").ggml_type(), GGMLType::Q4_K);
  EXPECT_EQ(g.tensor("blk.0.ffn_down.weight").ggml_type(), GGMLType::Q6_K);
  EXPECT_EQ(byte_sum(g.tensors().back()), 172460u);
  std::printf("[ gemma ] open+parse best of 3: %.3f s\n", best);
#if defined(__SANITIZE_ADDRESS__) || defined(SNAPKV_TEST_ASAN)
  EXPECT_LT(best, 5.0);
#else
  EXPECT_LT(best, 0.5);
#endif
}

}  // namespace
}  // namespace snapkv
