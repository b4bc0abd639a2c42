// `snapkv inspect`: what a GGUF holds (architecture, hyper-parameters, metadata, tensors).
#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "snapkv/gguf.h"
#include "snapkv/model.h"

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

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i ? " x " : "") + std::to_string(d[i]);
  return s;
}

}  // namespace

int inspect_command(const std::string& model_flag, bool json) {
  const std::string path = resolve_model_path(model_flag);
  auto model = Model::load(path);
  const GGUFFile& g = model->gguf();
  const ModelConfig& c = model->config();

  nlohmann::json hp = {{"arch", c.arch},
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
    nlohmann::json j = {{"file", path},         {"gguf_version", g.version()}, {"file_bytes", g.file_size()},
                        {"hyperparameters", hp}, {"tensor_bytes", total},     {"types", types},
                        {"metadata", meta},      {"tensors", tensors}};
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("file:          {}\n", path);
  fmt::print("gguf version:  {}   file size: {:.1f} MiB   tensors: {} ({:.1f} MiB)\n", g.version(),
             g.file_size() / 1048576.0, g.tensors().size(), total / 1048576.0);
  fmt::print("\nhyper-parameters:\n");
  for (const auto& [k, v] : hp.items()) fmt::print("  {:<16} {}\n", k, v.dump());
  fmt::print("\ntensor types:\n");
  for (const auto& [n, cb] : by_type) fmt::print("  {:<6} {:>5} tensors {:>10.2f} MiB\n", n, cb.first, cb.second / 1048576.0);
  fmt::print("\nmetadata:\n");
  for (const auto& [k, v] : meta.items()) {
    std::string s = v.is_string() ? v.get<std::string>() : v.dump();
    if (s.size() > 100) s = s.substr(0, 97) + "...";
    fmt::print("  {:<40} {}\n", k, s);
  }
  fmt::print("\ntensors:\n");
  for (const auto& t : g.tensors()) {
    fmt::print("  {:<36} {:<6} {:<18} {:>12} bytes\n", t.name, ggml_type_name(t.type), dims_str(t.dims), t.nbytes);
  }
  return 0;
}

}  // namespace snapkv::cli
