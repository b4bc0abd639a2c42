// `snapkv tokenize`: token ids and pieces of a text, with the model's own tokenizer.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "gguf/gguf.h"
#include "snapkv/error.h"
#include "snapkv/tokenizer.h"

namespace snapkv::cli {

int tokenize_command(const TokenizeOptions& o) {
  // main.cpp rejects -p together with -f.
  if (!o.text_set && o.text_file.empty()) throw Error("no text to tokenize: give -p TEXT or -f FILE");
  const std::string text = o.text_file.empty() ? o.text : read_text_file(o.text_file);
  const std::string path = resolve_model_path(o.model);
  const GGUFFile g = GGUFFile::open(path);
  auto tok = Tokenizer::from_gguf(g);
  const std::vector<int32_t> ids = tok->encode(text, o.add_special, o.parse_special);
  if (o.json) {
    nlohmann::json pieces = nlohmann::json::array();
    for (int32_t id : ids) pieces.push_back(std::string(tok->token_text(id)));
    const nlohmann::json j = {{"n_tokens", ids.size()}, {"ids", ids}, {"pieces", pieces}};
    // Invalid UTF-8 inside a piece (byte tokens) is replaced rather than aborting the dump.
    fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return 0;
  }
  for (int32_t id : ids) {
    nlohmann::json piece = std::string(tok->token_text(id));
    fmt::print("{:>8} {}\n", id, piece.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  fmt::print("{} tokens\n", ids.size());
  return 0;
}

}  // namespace snapkv::cli
