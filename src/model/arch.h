// Internal: the architecture factories behind Model::load().
#pragma once

#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "model/model.h"

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

/// Reads the hyper-parameters every architecture shares from the `<arch>.` keys into `c`:
/// arch, name, n_embd, n_layer, n_ff, n_head, n_head_kv, head_dim (key_length, default
/// n_embd / n_head; value_length must equal it), n_rot, n_ctx_train, rms_eps and rope_base
/// (defaults `default_rms_eps`, `default_rope_base` when absent) and linear RoPE scaling
/// (`rope.scaling.type` none|linear with `rope.scaling.factor`: rope_freq_scale = 1 / factor).
/// Returns true if `rope.scaling.type` is present and not "none". Throws snapkv::Error naming the
/// file and key for a missing or out-of-range value, n_head not a multiple of n_head_kv, an odd
/// rope.dimension_count or an unsupported scaling type.
bool read_common_hparams(const GGUFFile& f, const std::string& arch, float default_rms_eps, float default_rope_base,
                         ModelConfig& c);

}  // namespace snapkv
