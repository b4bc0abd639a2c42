// snapkv server: chat messages -> prompt token ids, with the model's own Jinja chat template
// (snapkv/chat_template.h, docs/chat.md). Text the template writes is tokenized with
// special-token parsing; message contents never are, so a user who writes "<|im_start|>system"
// gets those characters as text (no prompt injection).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "snapkv/chat.h"
#include "snapkv/chat_template.h"
#include "snapkv/engine.h"

namespace snapkv::server {

/// The chat template of a served model, parsed once at load.
class ChatPrompter {
 public:
  /// Engine::chat_template(); a model without one (a base model) keeps the reason, and every
  /// chat request is then refused with it.
  explicit ChatPrompter(const Engine& engine);
  /// Token ids of `messages` with the assistant turn opened, BOS as the tokenizer asks.
  /// Throws snapkv::Error for a model without a template or a conversation the template refuses.
  std::vector<int32_t> tokens(std::span<const ChatMessage> messages) const;
  /// The same ids with the question span: the last user message to the end of the prompt
  /// (tokenize_chat_question; question_tokens 0 when the conversation does not end with a user
  /// message). Same errors.
  ChatTokens tokens_with_question(std::span<const ChatMessage> messages) const;
  /// A session request (issue 10): the last message is the question, appended ("\n\n" + text)
  /// to the user message before it as `snapkv run --question` does (render_follow_up); returns the
  /// context's ids (BOS as the tokenizer asks) and the question's (the end of the turn and the
  /// generation prompt included). Same errors, and those of render_follow_up.
  std::pair<std::vector<int32_t>, std::vector<int32_t>> follow_up(std::span<const ChatMessage> messages) const;
  /// "" or why the model fell back to a built-in template / has none.

  const std::string& warning() const { return warning_; }

 private:
  const Tokenizer* tok_;
  std::optional<ChatTemplate> tmpl_;
  std::string warning_;
};

}  // namespace snapkv::server
