// `snapkv chat-template`: the prompt a chat template renders for a conversation, to check the
// formatting by eye (or, with --json, with its token count and ids).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/chat_prompt.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "gguf/gguf.h"
#include "snapkv/error.h"
#include "snapkv/tokenizer.h"

namespace snapkv::cli {

int chat_template_command(const ChatTemplateCommandOptions& o) {
  std::string text;
  const bool have_text = o.prompt_set || !o.prompt_file.empty();
  if (!o.prompt_file.empty()) text = read_text_file(o.prompt_file);
  if (o.prompt_set) text = o.prompt;
  if (!have_text && o.chat_flags.messages_file.empty()) {
    throw Error("no messages: give -p TEXT, -f FILE or --messages FILE");
  }
  const std::string path = resolve_model_path(o.model);
  const GGUFFile g = GGUFFile::open(path);
  if (!g.has("tokenizer.ggml.model")) throw Error(fmt::format("{}: the model has no tokenizer", path));
  const auto tok = Tokenizer::from_gguf(g);
  const ChatTemplate tmpl = load_chat_template(
      o.chat_flags, [&] { return ChatTemplate::from_gguf(g, tok.get()); }, *tok);
  const std::string msgs = build_messages(o.chat_flags, have_text ? &text : nullptr);
  const RenderedChat r = render_chat_prompt(tmpl, o.chat_flags, msgs, "").context;
  if (!o.json) {
    write_stdout(r.text);
    return 0;
  }
  const std::vector<int32_t> ids = tokenize_chat(*tok, r, true);
  nlohmann::json spans = nlohmann::json::array();
  for (const TextSpan& s : r.template_spans) spans.push_back({s.begin, s.end});
  const nlohmann::json j = {{"model", path}, {"template", tmpl.name()}, {"text", r.text}, {"n_tokens", ids.size()},
                            {"ids", ids},    {"template_spans", spans}};
  write_stdout(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  return 0;
}

}  // namespace snapkv::cli
