// Internal: the architecture factories behind Model::load().
#pragma once

#include <memory>

#include "snapkv/gguf.h"
#include "snapkv/model.h"

namespace snapkv {

/// `llama` (Llama 2/3, Mistral, TinyLlama, SmolLM): see src/model/llama.cpp.
std::shared_ptr<const Model> make_llama_model(GGUFFile&& f);
/// `gemma3`: see src/model/gemma3.cpp.
std::shared_ptr<const Model> make_gemma3_model(GGUFFile&& f);

/// Reads an integer hyper-parameter `<arch>.<key>` (throws naming the key if missing/invalid),
/// checking lo <= value <= hi.
int64_t read_int(const GGUFFile& f, const std::string& key, int64_t lo, int64_t hi);
/// Same, with a default when the key is absent.
int64_t read_int_or(const GGUFFile& f, const std::string& key, int64_t def, int64_t lo, int64_t hi);
/// Float hyper-parameter with a default when absent; must be finite and > 0.
float read_float_or(const GGUFFile& f, const std::string& key, float def);
/// Float hyper-parameter; throws naming the key if missing; must be finite and > 0.
float read_float(const GGUFFile& f, const std::string& key);

}  // namespace snapkv
