// snapkv: the built-in chat prompt formats written out in C++ (kept for compatibility; --chat and
// the server render the model's Jinja template with snapkv/chat_template.h).
#pragma once

#include <span>
#include <string>

namespace snapkv {

class GGUFFile;

/// One chat turn. role: "system", "user" or "assistant".
struct ChatMessage {
  std::string role;
  std::string content;
};

/// Supported turn formats.
enum class ChatFormat {
  Gemma,   ///< <start_of_turn>user\n...<end_of_turn>\n (Gemma 1/2/3)
  ChatML,  ///< <|im_start|>role\n...<|im_end|>\n (Qwen, SmolLM, ...)
  Llama3,  ///< <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> (Llama 3.x)
};

/// Name of the format ("gemma", "chatml", "llama3").
const char* chat_format_name(ChatFormat fmt);

/// Chooses the format from tokenizer.chat_template by its marker tokens ("<start_of_turn>" -> Gemma,
/// "<|im_start|>" -> ChatML, "<|start_header_id|>" -> Llama3) or, when the key is absent, from
/// general.architecture (gemma, gemma2, gemma3 -> Gemma: the Gemma 3 270M GGUF has no template key).
/// Throws Error("<file>: model has no chat template (base model?) ...") when neither tells, and
/// Error naming the template when it has none of the markers.
ChatFormat detect_chat_format(const GGUFFile& f);

/// The prompt text for `messages`, plus the opening of the assistant turn if add_generation_prompt.
/// BOS is not included (the tokenizer adds it); encode the result with parse_special = true.
///  - Gemma: "<start_of_turn>user\n{content}<end_of_turn>\n" per turn, role "assistant" written as
///    "model"; a leading system message's content + "\n\n" is prepended to the first user turn;
///    contents are trimmed of surrounding whitespace; generation prompt "<start_of_turn>model\n".
///    As Gemma's template, throws Error unless the turns after an optional leading system message
///    alternate user/assistant starting with user.
///  - ChatML: "<|im_start|>{role}\n{content}<|im_end|>\n"; generation prompt "<|im_start|>assistant\n".
///  - Llama3: "<|start_header_id|>{role}<|end_header_id|>\n\n{trimmed content}<|eot_id|>";
///    generation prompt "<|start_header_id|>assistant<|end_header_id|>\n\n".
/// Throws Error for a role other than system/user/assistant.
std::string format_chat(ChatFormat fmt, std::span<const ChatMessage> messages, bool add_generation_prompt);

}  // namespace snapkv
