// snapkv server: chat prompt tokens (see chat_prompt.h).
//
// The chat format renders the conversation with each content replaced by a marker that cannot
// occur in the template text; the rendered text is then tokenized piece by piece: template
// pieces with special-token parsing, contents without. (Until the Jinja renderer of
// snapkv/chat_template.h is on main: then its template spans replace the markers.)
#include "server/chat_prompt.h"

#include <fmt/format.h>

#include <string>
#include <string_view>

#include "snapkv/error.h"
#include "snapkv/tokenizer.h"

namespace snapkv::server {

namespace {

constexpr char kMark = '\x1f';  // ASCII unit separator: in no chat format's text

std::string_view trim_ws(std::string_view s) {  // as chat.h's Gemma and Llama 3 formats trim contents
  constexpr std::string_view kWs = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(kWs);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kWs) - b + 1);
}

}  // namespace

std::vector<int32_t> chat_prompt_tokens(const Engine& engine, std::span<const ChatMessage> messages) {
  const ChatFormat fmt_ = engine.chat_format();
  const Tokenizer& tok = engine.tokenizer();
  std::vector<ChatMessage> marked(messages.begin(), messages.end());
  for (size_t i = 0; i < marked.size(); ++i) marked[i].content = fmt::format("{}{}{}", kMark, i, kMark);
  const std::string text = format_chat(fmt_, marked, /*add_generation_prompt=*/true);

  std::vector<int32_t> ids;
  if (tok.add_bos() && tok.bos() >= 0) ids.push_back(tok.bos());
  const auto append = [&ids](const std::vector<int32_t>& v) { ids.insert(ids.end(), v.begin(), v.end()); };
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t b = text.find(kMark, pos);
    if (b == std::string::npos) {
      append(tok.encode(std::string_view(text).substr(pos), false, /*parse_special=*/true));
      break;
    }
    if (b > pos) append(tok.encode(std::string_view(text).substr(pos, b - pos), false, true));
    const size_t e = text.find(kMark, b + 1);
    if (e == std::string::npos) throw Error("chat prompt: unbalanced content marker");
    const size_t idx = std::stoul(text.substr(b + 1, e - b - 1));
    if (idx >= messages.size()) throw Error("chat prompt: bad content marker");
    std::string_view content = messages[idx].content;
    if (fmt_ != ChatFormat::ChatML) content = trim_ws(content);
    if (!content.empty()) append(tok.encode(content, false, /*parse_special=*/false));
    pos = e + 1;
  }
  return ids;
}

}  // namespace snapkv::server
