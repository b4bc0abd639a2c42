// snapkv chat: the question span of a chat prompt (tokenize_chat_question, snapkv/chat_template.h).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "snapkv/chat_template.h"

namespace snapkv {
namespace {

// Never produced by a tokenizer-visible template and never in user text we accept as is: the
// group separator control character around a name.
const std::string kSpanMarker = "\x1dsnapkv-question-span\x1d";

/// The question span of `plain_ids` (the prompt's plain tokenization) from the marker in
/// `marked`: the ids after the longest common prefix of plain_ids and the ids of the text before
/// the marker. False when the marker is not there exactly once.
bool span_from_marker(const Tokenizer& tok, const RenderedChat& marked, ChatTokens& out) {
  const size_t at = marked.text.find(kSpanMarker);
  if (at == std::string::npos || marked.text.find(kSpanMarker, at + 1) != std::string::npos) return false;
  const std::vector<int32_t> head = tokenize_chat(tok, marked.slice(0, at), true);
  size_t common = 0;
  while (common < head.size() && common < out.ids.size() && head[common] == out.ids[common]) ++common;
  out.question_tokens = static_cast<int64_t>(out.ids.size() - common);
  return true;
}

}  // namespace

ChatTokens tokenize_chat_question(const Tokenizer& tok, const ChatTemplate& tmpl, std::string_view messages_json,
                                  const ChatTemplateOptions& opt, size_t question_at) {
  ChatTokens out;
  out.ids = tokenize_chat(tok, tmpl.render_json(messages_json, opt), true);  // validates the messages
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(messages_json);
  if (j.empty()) return out;
  auto& last = j.back();
  if (last.value("role", "") != "user" || !last.contains("content") || !last["content"].is_string()) return out;
  std::string text = last["content"].get<std::string>();
  if (question_at > text.size()) return out;
  text.insert(question_at, kSpanMarker);
  last["content"] = text;
  span_from_marker(tok, tmpl.render_json(j.dump(), opt), out);
  return out;
}

ChatTokens tokenize_chat_question(const Tokenizer& tok, const ChatTemplate& tmpl, std::span<const ChatMessage> messages,
                                  const ChatTemplateOptions& opt, size_t question_at) {
  ChatTokens out;
  out.ids = tokenize_chat(tok, tmpl.render(messages, opt), true);
  if (messages.empty() || messages.back().role != "user" || question_at > messages.back().content.size()) return out;
  std::vector<ChatMessage> marked(messages.begin(), messages.end());
  marked.back().content.insert(question_at, kSpanMarker);
  span_from_marker(tok, tmpl.render(marked, opt), out);
  return out;
}

}  // namespace snapkv
