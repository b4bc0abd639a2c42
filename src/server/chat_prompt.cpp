// snapkv server: chat prompt tokens (see chat_prompt.h).
#include "server/chat_prompt.h"

#include "snapkv/error.h"
#include "snapkv/tokenizer.h"

namespace snapkv::server {

ChatPrompter::ChatPrompter(const Engine& engine) : tok_(&engine.tokenizer()) {
  try {
    tmpl_ = engine.chat_template();
    warning_ = tmpl_->warning();
  } catch (const Error& e) {
    warning_ = e.what();
  }
}

std::vector<int32_t> ChatPrompter::tokens(std::span<const ChatMessage> messages) const {
  if (!tmpl_) throw Error(warning_);
  return tokenize_chat(*tok_, tmpl_->render(messages), /*add_special=*/true);
}

std::pair<std::vector<int32_t>, std::vector<int32_t>> ChatPrompter::follow_up(
    std::span<const ChatMessage> messages) const {
  if (!tmpl_) throw Error(warning_);
  if (messages.size() < 2) throw Error("a follow-up needs the document's user message and the question");
  const ChatSplit sp = render_follow_up(*tmpl_, messages.first(messages.size() - 1), messages.back().content);
  return {tokenize_chat(*tok_, sp.context, /*add_special=*/true), tokenize_chat(*tok_, sp.question, false)};
}

ChatTokens ChatPrompter::tokens_with_question(std::span<const ChatMessage> messages) const {
  if (!tmpl_) throw Error(warning_);
  return tokenize_chat_question(*tok_, *tmpl_, messages);
}

}  // namespace snapkv::server
