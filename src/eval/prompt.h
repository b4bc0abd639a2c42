// snapkv eval: a task's text turned into the model's token ids, as RULER's prepare.py does: the
// task text inside the model's chat template (or as is, for a base model), then the answer
// prefix, so the model's first tokens are the answer. The prompt is split after the context for
// the query-agnostic protocol; both protocols use the same ids.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "snapkv/chat_template.h"
#include "snapkv/tokenizer.h"

namespace snapkv {
class Engine;
}

namespace snapkv::eval {

enum class ChatMode { Auto, On, Off };

/// "auto", "on", "off"; parse_chat_mode throws snapkv::Error for anything else.
const char* chat_mode_name(ChatMode m);
ChatMode parse_chat_mode(const std::string& s);

/// An example exchange before the task (RULER's in-context example of vt and cwe).
struct Shot {
  std::string user;       ///< the example's task text
  std::string assistant;  ///< its answer prefix and answer
};

/// The text of one prompt: `context` then `question` form the last user message; the model's
/// answer starts after `answer_prefix` (put after the template's generation prompt).
struct TaskText {
  std::vector<Shot> shots;
  std::string context;
  std::string question;
  std::string answer_prefix;
};

/// Token ids of a prompt: `context` (with BOS) is what the query-agnostic protocol compresses;
/// `question` follows it.
struct PromptIds {
  std::vector<int32_t> context;
  std::vector<int32_t> question;
  size_t size() const { return context.size() + question.size(); }
};

class PromptFormat {
 public:
  /// `auto`: the chat template when the model's GGUF has a usable `tokenizer.chat_template`
  /// (Engine::chat_template() without a fallback warning), else the base format. `on` uses the
  /// model's template even when it is a built-in fallback; throws snapkv::Error for a model with
  /// none. The engine must outlive the format.
  /// `answer_prefix` false: the task's answer prefix is not put after the question (the model
  /// answers in its own words, as users ask in a chat; scoring is unchanged: string_match_all).
  PromptFormat(const Engine& engine, ChatMode mode, bool answer_prefix = true);

  bool chat() const { return tmpl_.has_value(); }
  /// "base" or the template's name; with ", no answer prefix" when answer_prefix is false.
  std::string name() const;
  const Tokenizer& tokenizer() const { return *tok_; }

  PromptIds tokenize(const TaskText& t) const;
  /// Token ids that continue the prompt of `first` (context + question, as tokenize() gives them)
  /// with `first_answer` as the model's answer to it and then `next`'s question (with its answer
  /// prefix) as a follow-up: in the chat format an assistant turn and a new user turn rendered by
  /// the template; in the base format " " + the answer, "\n\n" and the question's text (RULER's
  /// questions start with their own "\n"). `next.context`
  /// is not used. Throws snapkv::Error when the template does not render the first turn as a
  /// prefix of the conversation.
  std::vector<int32_t> follow_up(const TaskText& first, const std::string& first_answer, const TaskText& next) const;
  /// The text the template renders for `t` (context and question parts), for inspection.
  std::pair<std::string, std::string> render(const TaskText& t) const;

 private:
  const Tokenizer* tok_;
  std::optional<ChatTemplate> tmpl_;
  bool answer_prefix_ = true;
  const std::string& prefix(const TaskText& t) const;
  std::pair<RenderedChat, RenderedChat> render_chat(const TaskText& t) const;
};

}  // namespace snapkv::eval
