// snapkv CLI: chat prompts from the flags (--chat, --system, --messages, --chat-template,
// --question), shared by `snapkv run` and `snapkv chat-template`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "snapkv/chat_template.h"

namespace snapkv::cli {

/// The chat flags of a command.
struct ChatFlags {
  std::string system;         ///< --system TEXT: a system message before the others
  std::string messages_file;  ///< --messages FILE: OpenAI-style JSON array of messages
  std::string template_flag;  ///< --chat-template FILE|NAME
  std::string tools_file;     ///< --tools FILE: JSON array of tool definitions
  bool add_generation_prompt = true;
};

/// The template to use: --chat-template (an existing file's text, else a built-in name) or the
/// model's (`model_template()`, e.g. Engine::chat_template(); its fallback warning is printed to
/// stderr). bos/eos tokens from `tok`. Throws snapkv::Error for an unknown name, an unreadable
/// file or a parse error.
ChatTemplate load_chat_template(const ChatFlags& flags, const std::function<ChatTemplate()>& model_template,
                                const Tokenizer& tok);

/// The conversation as a JSON array: --messages, with --system put first (an error if the file
/// starts with a system message already) and `user_text` (-p/-f, if given) appended as a user
/// message. Throws snapkv::Error when it ends up empty or the file is not a JSON array.
std::string build_messages(const ChatFlags& flags, const std::string* user_text);

/// A rendered prompt, split for the query-agnostic protocol: `context` is everything up to the
/// end of the last user message's own text; `question` ("\n\n" + question, the end of that turn
/// and the generation prompt) is empty without a question.
struct ChatPrompt {
  RenderedChat context;
  RenderedChat question;
};

/// Renders `messages_json`; with a non-empty `question`, the question is appended to the last
/// message (which must be a user message with text content) and the prompt split after the
/// context. Throws snapkv::Error for render errors.
ChatPrompt render_chat_prompt(const ChatTemplate& tmpl, const ChatFlags& flags, const std::string& messages_json,
                              const std::string& question);

/// Renders and tokenizes `messages_json` with its question span (tokenize_chat_question: the last
/// user message from byte `question_at` of its text on), for window=question presses. Throws
/// snapkv::Error for render errors.
ChatTokens tokenize_chat_prompt_question(const ChatTemplate& tmpl, const Tokenizer& tok, const ChatFlags& flags,
                                         const std::string& messages_json, size_t question_at);

}  // namespace snapkv::cli
