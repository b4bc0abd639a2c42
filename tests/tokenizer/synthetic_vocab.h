// Small in-memory vocabularies (GGUF images) for targeted tokenizer tests.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "snapkv/tokenizer.h"
#include "support/gguf_writer.h"

namespace snapkv::test {

struct SynTok {
  std::string text;
  float score = 0.0f;
  int32_t type = 1;  ///< 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte
};

/// "<unk>", "<s>", "</s>", then (if with_bytes) the 256 "<0xNN>" byte tokens (ids 3..258).
inline std::vector<SynTok> spm_base(bool with_bytes = true) {
  std::vector<SynTok> t = {{"<unk>", 0, 2}, {"<s>", 0, 3}, {"</s>", 0, 3}};
  if (with_bytes) {
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) t.push_back({std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0, 6});
  }
  return t;
}

/// A GGUF image with the tokenizer keys for `toks`; `extra` adds or overrides keys.
inline std::vector<uint8_t> vocab_gguf(const std::string& model, const std::vector<SynTok>& toks,
                                       const std::function<void(GGUFWriter&)>& extra = {}) {
  GGUFWriter w;
  w.add_string("general.architecture", "llama");
  w.add_string("tokenizer.ggml.model", model);
  std::vector<std::string> texts;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (const auto& t : toks) {
    texts.push_back(t.text);
    scores.push_back(t.score);
    types.push_back(t.type);
  }
  w.add_string_array("tokenizer.ggml.tokens", texts);
  w.add_f32_array("tokenizer.ggml.scores", scores);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  if (extra) extra(w);
  return w.to_bytes();
}

inline std::unique_ptr<Tokenizer> make_tokenizer(const std::vector<uint8_t>& image,
                                                 const std::string& name = "syn.gguf") {
  return Tokenizer::from_gguf(GGUFFile::from_memory(image, name));
}

}  // namespace snapkv::test
