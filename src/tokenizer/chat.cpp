// snapkv: chat prompt formats. The layouts follow the models' published chat templates
// (Gemma: google/gemma-3 tokenizer_config.json; ChatML: OpenAI ChatML / Qwen; Llama 3: Meta's
// tokenizer_config.json), written out directly instead of evaluating Jinja.
#include "snapkv/chat.h"

#include <fmt/format.h>

#include <string>
#include <string_view>

#include "gguf/gguf.h"
#include "snapkv/error.h"

namespace snapkv {

namespace {

/// Jinja's `trim` filter (Python str.strip()) for the whitespace that occurs in practice.
std::string_view trim(std::string_view s) {
  constexpr std::string_view kWs = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(kWs);
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(kWs);
  return s.substr(b, e - b + 1);
}

void check_role(const ChatMessage& m) {
  if (m.role != "system" && m.role != "user" && m.role != "assistant") {
    throw Error(fmt::format("chat: unsupported role '{}' (expected system, user or assistant)", m.role));
  }
}

std::string format_gemma(std::span<const ChatMessage> msgs, bool add_generation_prompt) {
  std::string out;
  std::string first_prefix;
  size_t start = 0;
  if (!msgs.empty() && msgs[0].role == "system") {
    first_prefix = msgs[0].content + "\n\n";
    start = 1;
  }
  for (size_t i = start; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    check_role(m);
    const bool expect_user = (i - start) % 2 == 0;
    if ((m.role == "user") != expect_user || m.role == "system") {
      throw Error(fmt::format("chat: Gemma turns must alternate user/assistant/user/... (message {} has role '{}')", i,
                              m.role));
    }
    out += "<start_of_turn>";
    out += m.role == "assistant" ? "model" : "user";
    out += '\n';
    if (i == start) out += first_prefix;
    out += trim(m.content);
    out += "<end_of_turn>\n";
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

std::string format_chatml(std::span<const ChatMessage> msgs, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : msgs) {
    check_role(m);
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string format_llama3(std::span<const ChatMessage> msgs, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : msgs) {
    check_role(m);
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
    out += trim(m.content);
    out += "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace

const char* chat_format_name(ChatFormat fmt) {
  switch (fmt) {
    case ChatFormat::Gemma:
      return "gemma";
    case ChatFormat::ChatML:
      return "chatml";
    case ChatFormat::Llama3:
      return "llama3";
  }
  return "unknown";
}

ChatFormat detect_chat_format(const GGUFFile& f) {
  if (auto tmpl = f.get_string_opt("tokenizer.chat_template")) {
    if (tmpl->find("<start_of_turn>") != std::string_view::npos) return ChatFormat::Gemma;
    if (tmpl->find("<|im_start|>") != std::string_view::npos) return ChatFormat::ChatML;
    if (tmpl->find("<|start_header_id|>") != std::string_view::npos) return ChatFormat::Llama3;
    std::string head(tmpl->substr(0, 60));
    for (char& c : head) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    throw Error(
        fmt::format("{}: unsupported chat template (tokenizer.chat_template starts '{}'); supported: Gemma, "
                    "ChatML, Llama 3",
                    f.path(), head));
  }
  const std::string_view arch = f.get_string_opt("general.architecture").value_or("");
  if (arch == "gemma" || arch == "gemma2" || arch == "gemma3") return ChatFormat::Gemma;
  throw Error(
      fmt::format("{}: model has no chat template (base model?): no tokenizer.chat_template key and "
                  "architecture '{}' has no known default; use a plain prompt instead",
                  f.path(), arch));
}

std::string format_chat(ChatFormat fmt, std::span<const ChatMessage> messages, bool add_generation_prompt) {
  switch (fmt) {
    case ChatFormat::Gemma:
      return format_gemma(messages, add_generation_prompt);
    case ChatFormat::ChatML:
      return format_chatml(messages, add_generation_prompt);
    case ChatFormat::Llama3:
      return format_llama3(messages, add_generation_prompt);
  }
  throw Error("chat: unknown format");
}

}  // namespace snapkv
