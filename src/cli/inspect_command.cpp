// `snapkv inspect`: what a GGUF holds (architecture, hyper-parameters, metadata, tensors).
#include <fmt/format.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "snapkv/error.h"

namespace snapkv::cli {
namespace {

// Short human/JSON rendering of a metadata value; long arrays are summarised.
nlohmann::json value_json(const GGUFValue& v, size_t max_elems) {
  switch (v.type) {
    case GGUFValueType::STRING:
      return std::string(v.str);
    case GGUFValueType::BOOL:
      return v.u != 0;
    case GGUFValueType::FLOAT32:
    case GGUFValueType::FLOAT64:
      return v.f;
    case GGUFValueType::ARRAY: {
      if (v.arr.size() > max_elems) {
        return fmt::format("[array of {} {}]", v.arr.size(), gguf_value_type_name(v.elem_type));
      }
      nlohmann::json a = nlohmann::json::array();
      for (const auto& e : v.arr) a.push_back(value_json(e, max_elems));
      return a;
    }
    case GGUFValueType::INT8:
    case GGUFValueType::INT16:
    case GGUFValueType::INT32:
    case GGUFValueType::INT64:
      return v.i;
    default:
      return v.u;
  }
}

// At most `max_bytes` bytes of `s` (valid UTF-8), cut on a character boundary, with "..." if cut.
std::string shorten(const std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t n = max_bytes - 3;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // continuation byte
  return s.substr(0, n) + "...";
}

std::string dump(const nlohmann::json& j, int indent = -1) {
  // Strings from the file may hold invalid UTF-8: replaced (U+FFFD) rather than aborting.
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i ? " x " : "") + std::to_string(d[i]);
  return s;
}

nlohmann::json hyperparameters_json(const ModelConfig& c) {
  return {{"arch", c.arch},
          {"name", c.name},
          {"n_layer", c.n_layer},
          {"n_embd", c.n_embd},
          {"n_head", c.n_head},
          {"n_head_kv", c.n_head_kv},
          {"head_dim", c.head_dim},
          {"n_ff", c.n_ff},
          {"n_vocab", c.n_vocab},
          {"n_ctx_train", c.n_ctx_train},
          {"rms_eps", c.rms_eps},
          {"rope_base", c.rope_base},
          {"rope_base_swa", c.rope_base_swa},
          {"rope_type", c.rope_type == RopeType::NeoX ? "neox" : "normal"},
          {"n_rot", c.n_rot},
          {"attn_scale", c.attn_scale},
          {"sliding_window", c.sliding_window},
          {"layer_is_swa", c.layer_is_swa},
          {"qk_norm", c.qk_norm},
          {"tied_output", c.tied_output}};
}

}  // namespace

int inspect_command(const std::string& model_flag, bool json) {
  const std::string path = resolve_model_path(model_flag);
  // A GGUF that snapkv cannot run (vocab-only file, unsupported architecture, missing tensor)
  // is still inspected: metadata and tensors, with the reason in place of the hyper-parameters.
  std::shared_ptr<const Model> model;
  std::optional<GGUFFile> file_only;
  std::string model_error;
  try {
    model = Model::load(path);
  } catch (const Error& e) {
    file_only.emplace(GGUFFile::open(path));  // throws if the file itself is not a valid GGUF
    model_error = e.what();
  }
  const GGUFFile& g = model ? model->gguf() : *file_only;
  const nlohmann::json hp = model ? hyperparameters_json(model->config()) : nlohmann::json(nullptr);
  if (!model && json) fmt::print(stderr, "snapkv: note: snapkv cannot run this file: {}\n", printable(model_error));

  nlohmann::json tensors = nlohmann::json::array();
  std::map<std::string, std::pair<int, uint64_t>> by_type;
  uint64_t total = 0;
  for (const auto& t : g.tensors()) {
    tensors.push_back({{"name", t.name}, {"type", ggml_type_name(t.type)}, {"dims", t.dims}, {"bytes", t.nbytes}});
    auto& bt = by_type[ggml_type_name(t.type)];
    bt.first += 1;
    bt.second += t.nbytes;
    total += t.nbytes;
  }
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [k, v] : g.metadata()) meta[k] = value_json(v, json ? 64 : 16);

  if (json) {
    nlohmann::json types = nlohmann::json::object();
    for (const auto& [n, cb] : by_type) types[n] = {{"tensors", cb.first}, {"bytes", cb.second}};
    nlohmann::json j = {{"file", path},
                        {"gguf_version", g.version()},
                        {"file_bytes", g.file_size()},
                        {"runnable", model != nullptr},
                        {"model_error", model ? nlohmann::json(nullptr) : nlohmann::json(model_error)},
                        {"hyperparameters", hp},
                        {"tensor_bytes", total},
                        {"types", types},
                        {"metadata", meta},
                        {"tensors", tensors}};
    fmt::print("{}\n", dump(j, 2));
    return 0;
  }
  fmt::print("file:          {}\n", printable(path));
  fmt::print("gguf version:  {}   file size: {:.1f} MiB   tensors: {} ({:.1f} MiB)\n", g.version(),
             g.file_size() / 1048576.0, g.tensors().size(), total / 1048576.0);
  fmt::print("\nhyper-parameters:\n");
  if (!model) fmt::print("  (none: snapkv cannot run this file: {})\n", printable(model_error));
  if (model) {
    for (const auto& [k, v] : hp.items()) fmt::print("  {:<16} {}\n", k, printable(dump(v)));
  }
  fmt::print("\ntensor types:\n");
  for (const auto& [n, cb] : by_type)
    fmt::print("  {:<6} {:>5} tensors {:>10.2f} MiB\n", n, cb.first, cb.second / 1048576.0);
  fmt::print("\nmetadata:\n");
  for (const auto& [k, v] : meta.items()) {
    const std::string s = v.is_string() ? v.get<std::string>() : dump(v);
    fmt::print("  {:<40} {}\n", printable(k), shorten(printable(s), 100));
  }
  fmt::print("\ntensors:\n");
  for (const auto& t : g.tensors()) {
    fmt::print("  {:<36} {:<6} {:<18} {:>12} bytes\n", printable(t.name), ggml_type_name(t.type), dims_str(t.dims),
               t.nbytes);
  }
  return 0;
}

}  // namespace snapkv::cli
