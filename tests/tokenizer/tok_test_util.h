// Helpers for the tokenizer tests: cached tokenizers and llama.cpp's vocab test vectors.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "snapkv/tokenizer.h"
#include "test_util.h"

namespace snapkv::test {

/// Tokenizer of a GGUF file, loaded once per process.
inline const Tokenizer& cached_tokenizer(const std::filesystem::path& p) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[p.string()];
  if (!slot) slot = Tokenizer::from_gguf(GGUFFile::open(p.string()));
  return *slot;
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// One test case of ../shared/tokenizers/X.gguf.inp/.out.
struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

/// The cases of vocab file `name` (e.g. "gpt-2"): the .inp pieces split on "\n__ggml_vocab_test__\n"
/// (the file ends with a separator) paired with the .out lines.
inline std::vector<VocabCase> load_vocab_cases(const std::string& name) {
  const auto dir = shared_dir() / "tokenizers";
  const std::string inp = read_file(dir / ("ggml-vocab-" + name + ".gguf.inp"));
  const std::string out = read_file(dir / ("ggml-vocab-" + name + ".gguf.out"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VocabCase> cases;
  size_t pos = 0;
  while (true) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) break;
    cases.push_back({inp.substr(pos, next - pos), {}});
    pos = next + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line) && i < cases.size()) {
    std::istringstream nums(line);
    int32_t id = 0;
    while (nums >> id) cases[i].ids.push_back(id);
    ++i;
  }
  if (i != cases.size()) throw std::runtime_error(name + ": .out has fewer lines than .inp has cases");
  return cases;
}

}  // namespace snapkv::test
