// snapkv chat: a prompt split for a follow-up question (render_follow_up, snapkv/chat_template.h).
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "snapkv/chat_template.h"
#include "snapkv/error.h"

namespace snapkv {
namespace {

// Marks where the question starts inside the last user turn; never produced by user text
// (control characters U+001D around a name).
const std::string kQuestionMarker = "\x1dsnapkv-question\x1d";

const char* const kNeedsUser =
    "a follow-up question needs the conversation to end with a user message with text content";

ChatSplit split_at_marker(const RenderedChat& full) {
  const size_t at = full.text.find(kQuestionMarker);
  if (at == std::string::npos || full.text.find(kQuestionMarker, at + 1) != std::string::npos)
    throw Error(
        "the chat template does not keep the user's text as given, so a follow-up question cannot be placed in it");
  return {full.slice(0, at), full.slice(at + kQuestionMarker.size(), full.text.size())};
}

void check_question(const std::string& question) {
  if (question.empty()) throw Error("a follow-up question must not be empty");
}

}  // namespace

ChatSplit render_follow_up(const ChatTemplate& tmpl, std::string_view messages_json, const std::string& question,
                           const ChatTemplateOptions& opt) {
  check_question(question);
  auto msgs = nlohmann::ordered_json::parse(messages_json, nullptr, false);
  if (msgs.is_discarded() || !msgs.is_array() || msgs.empty()) throw Error(kNeedsUser);
  auto& last = msgs.back();
  if (!last.is_object() || last.value("role", "") != "user" || !last.contains("content") ||
      !last["content"].is_string())
    throw Error(kNeedsUser);
  last["content"] = last["content"].get<std::string>() + kQuestionMarker + "\n\n" + question;
  return split_at_marker(tmpl.render_json(msgs.dump(), opt));
}

ChatSplit render_follow_up(const ChatTemplate& tmpl, std::span<const ChatMessage> messages, const std::string& question,
                           const ChatTemplateOptions& opt) {
  check_question(question);
  if (messages.empty() || messages.back().role != "user") throw Error(kNeedsUser);
  std::vector<ChatMessage> m(messages.begin(), messages.end());
  m.back().content += kQuestionMarker + "\n\n" + question;
  return split_at_marker(tmpl.render(m, opt));
}

}  // namespace snapkv
