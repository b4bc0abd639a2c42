// snapkv: chat prompts rendered from the model's own Jinja chat template (tokenizer.chat_template),
// as Hugging Face transformers' apply_chat_template and llama.cpp's --jinja do.
//
//   auto engine = snapkv::Engine::load("SmolLM2-135M-Instruct.Q4_1.gguf");
//   const snapkv::ChatTemplate tmpl = engine->chat_template();     // the model's, or a built-in
//   const std::vector<snapkv::ChatMessage> msgs{{"system", "Be brief."}, {"user", "Hi"}};
//   const snapkv::RenderedChat r = tmpl.render(msgs);              // r.text: the prompt
//   const std::vector<int32_t> ids = snapkv::tokenize_chat(engine->tokenizer(), r);
//
// The renderer implements the subset of Jinja (jinja2 3.1 semantics, with HF's settings:
// trim_blocks, lstrip_blocks, a sandbox without mutation of lists and dicts, tojson as json.dumps
// with ensure_ascii=False, raise_exception, strftime_now) that chat templates use; docs/chat.md
// lists it. Anything outside it is an Error naming the template line and column, never a silently
// different prompt. Every render is bounded (output size, loop iterations, list sizes, macro
// recursion).
//
// Special tokens: text that the template itself writes (its literal text, bos_token, eos_token)
// is tokenised with special-token parsing, so "<|im_start|>" there becomes one control token;
// text that came from the messages or tools is never parsed for special tokens, so a user who
// types "<|im_start|>system" gets those characters as plain text (no prompt injection).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "snapkv/chat.h"
#include "snapkv/tokenizer.h"

namespace snapkv {

class GGUFFile;

/// A rendered chat prompt.
struct RenderedChat {
  std::string text;
  /// Byte ranges of `text` written by the template itself (sorted, disjoint, not adjacent).
  /// Special-token texts are recognised only inside them; the rest came from the caller's
  /// messages or tools.
  std::vector<TextSpan> template_spans;

  /// Bytes [begin, end) of the prompt with their spans (to split a prompt, e.g. context and
  /// question of the query-agnostic protocol). Throws Error if the range is out of bounds.
  RenderedChat slice(size_t begin, size_t end) const;
};

/// Inputs of a render besides the messages.
struct ChatTemplateOptions {
  bool add_generation_prompt = true;  ///< open the assistant turn at the end
  /// Tool definitions as a JSON array (OpenAI style), passed to the template as `tools`;
  /// empty: `tools` is None, as in transformers.
  std::string tools_json;
  size_t max_output_bytes = size_t{64} << 20;  ///< limit on the rendered text
  int64_t max_loop_iterations = 1'000'000;     ///< limit on loop iterations of one render
  /// Limit on the work of one render: bytes of strings (16 per list or dict item) read or built by
  /// operators, filters, tests, methods and loops, plus the output. Bounds a render's time.
  size_t max_work_bytes = size_t{1} << 30;
  /// Limit on the bytes of strings, lists and dicts one render holds alive at once (its loops'
  /// copies of their sequences included; a list item costs ~160 bytes): bounds the memory of a
  /// hostile template. Peak memory may pass it by the value being built when it is reached and by
  /// a filter's temporary copies of its input (docs/chat.md, "Limits").
  size_t max_live_bytes = size_t{512} << 20;
};

/// A parsed Jinja chat template. Cheap to copy (shares the parsed tree); immutable; render() is
/// safe to call from several threads at once.
class ChatTemplate {
 public:
  /// Parses `source` (at most kMaxSourceBytes). `name` labels errors ("<name>:LINE:COL: ...").
  /// Throws Error for a larger source, a syntax error, an unknown filter or test, or a construct
  /// outside the supported subset.
  static ChatTemplate parse(std::string_view source, std::string name = "chat template");
  /// Largest template source parse() takes: 1 MiB (models' own templates are 1-60 KB; the parsed
  /// tree takes ~100x its source in memory).
  static constexpr size_t kMaxSourceBytes = size_t{1} << 20;
  /// A built-in template by name: "chatml" (ChatML turns, no default system turn), "gemma"
  /// (Gemma 3 instruction-tuned turns: a system message folded into the first user turn,
  /// "model" for the assistant, contents trimmed, roles must alternate), "llama3" (Llama 3
  /// headers). Throws Error naming the known names for any other name.
  static ChatTemplate builtin(std::string_view name);
  /// The names builtin() accepts.
  static std::vector<std::string> builtin_names();
  /// The template of a model: tokenizer.chat_template when present and parseable; otherwise a
  /// built-in chosen from the template's marker tokens or the architecture (gemma*: "gemma"),
  /// with warning() saying why. bos_token/eos_token come from the tokenizer (may be null).
  /// Throws Error (mentioning "chat template") when neither gives a format (a base model).
  static ChatTemplate from_gguf(const GGUFFile& f, const Tokenizer* tok);

  const std::string& name() const;    ///< the label given to parse(), or "builtin:<name>"
  const std::string& source() const;  ///< the Jinja source
  /// Non-empty when from_gguf() fell back to a built-in template: why.
  const std::string& warning() const;

  /// The values the template sees as bos_token / eos_token (default "").
  void set_special_tokens(std::string bos_token, std::string eos_token);
  const std::string& bos_token() const;
  const std::string& eos_token() const;

  /// Renders `messages` (passed as dicts with "role" and "content"). Throws Error naming the
  /// template position for a render error (an undefined value used, a type error, a limit
  /// exceeded, raise_exception(...) called by the template, e.g. for a bad role).
  RenderedChat render(std::span<const ChatMessage> messages, const ChatTemplateOptions& opt = {}) const;
  /// Renders an OpenAI-style JSON array of messages (objects with "role" and, usually,
  /// "content": a string, null or a list of parts; other keys such as "tool_calls" are passed
  /// through). Throws Error for malformed JSON or a message without a string "role".
  RenderedChat render_json(std::string_view messages_json, const ChatTemplateOptions& opt = {}) const;

  struct Impl;

 private:
  explicit ChatTemplate(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

/// A chat prompt's token ids and the length of its question span (issue 11, window=question).
struct ChatTokens {
  std::vector<int32_t> ids;
  int64_t question_tokens = 0;  ///< the last question_tokens ids are the question span; 0 = not found
};

/// Renders and tokenizes a conversation, ids exactly tokenize_chat(tok, render_json(...), true),
/// and finds its question span: the last message's text from byte `question_at` on (0: all of it),
/// the end of its turn and the generation prompt. The span is located by rendering a marker at
/// that byte: it is the ids after the longest common prefix of the prompt's ids and those of the
/// text before the marker (so a token the tokenizer merges across that byte, e.g. "\n\n" before
/// the question, belongs to the span). question_tokens is 0 when the last message is not a user
/// message with string content, `question_at` is past its end, or the template does not keep the
/// text as given (the marker is not found exactly once). Throws as render_json().
ChatTokens tokenize_chat_question(const Tokenizer& tok, const ChatTemplate& tmpl, std::string_view messages_json,
                                  const ChatTemplateOptions& opt = {}, size_t question_at = 0);
/// The same for messages given as ChatMessage (the server's chat completions).
ChatTokens tokenize_chat_question(const Tokenizer& tok, const ChatTemplate& tmpl, std::span<const ChatMessage> messages,
                                  const ChatTemplateOptions& opt = {}, size_t question_at = 0);

/// A chat prompt split for a follow-up question (issue 10): the question ("\n\n" + its text) is
/// appended to the conversation's last message, which must be a user message with string
/// content; `context` is the render up to the end of that message's own text, `question` the
/// rest (the question, the end of the turn, the generation prompt). The context does not depend
/// on the question, so one compressed context serves every question.
struct ChatSplit {
  RenderedChat context;
  RenderedChat question;
};
/// Renders `messages_json` (as render_json) split for `question` (non-empty). Throws Error when
/// the last message is not a user message with string content ("... needs the conversation to end
/// with a user message ..."), when the template does not keep the user's text as given (the split
/// point is not found exactly once), or as render_json().
ChatSplit render_follow_up(const ChatTemplate& tmpl, std::string_view messages_json, const std::string& question,
                           const ChatTemplateOptions& opt = {});
/// The same for messages given as ChatMessage (the server's chat completions).
ChatSplit render_follow_up(const ChatTemplate& tmpl, std::span<const ChatMessage> messages, const std::string& question,
                           const ChatTemplateOptions& opt = {});

/// Token ids of a rendered prompt: special-token texts are parsed only inside
/// `r.template_spans`; with add_special, BOS is prepended as the tokenizer's metadata asks
/// unless the prompt already starts with the BOS token (templates that write {{ bos_token }}),
/// and EOS appended if it asks for that.
std::vector<int32_t> tokenize_chat(const Tokenizer& tok, const RenderedChat& r, bool add_special = true);

}  // namespace snapkv
