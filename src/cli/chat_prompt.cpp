// snapkv CLI: chat prompts from the flags (see chat_prompt.h).
#include "cli/chat_prompt.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "chat/bounded_json.h"
#include "cli/cli_common.h"
#include "cli/flag_checks.h"
#include "snapkv/error.h"
#include "snapkv/tokenizer.h"

namespace snapkv::cli {

namespace {

std::string read_flag_file(const std::string& path, const char* flag) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(fmt::format("{} file '{}' does not exist or is not a file", flag, path));
  }
  try {
    return read_text_file(path);
  } catch (const Error&) {
    throw Error(fmt::format("cannot read {} file '{}'", flag, path));
  }
}

constexpr int kMaxMessagesDepth = 128;     // as the renderer's limit on JSON values
constexpr size_t kMaxMessagesKeys = 1000;  // as the renderer's limit on keys per JSON object

}  // namespace

ChatTemplate load_chat_template(const ChatFlags& flags, const std::function<ChatTemplate()>& model_template,
                                const Tokenizer& tok) {
  const std::string bos = tok.bos() >= 0 ? std::string(tok.token_text(tok.bos())) : std::string();
  const std::string eos = tok.eos() >= 0 ? std::string(tok.token_text(tok.eos())) : std::string();
  if (!flags.template_flag.empty()) {
    std::error_code ec;
    ChatTemplate t = [&] {
      if (std::filesystem::is_regular_file(flags.template_flag, ec)) {
        return ChatTemplate::parse(read_flag_file(flags.template_flag, "--chat-template"), flags.template_flag);
      }
      for (const std::string& n : ChatTemplate::builtin_names()) {
        if (n == flags.template_flag) return ChatTemplate::builtin(n);
      }
      std::string names;
      for (const std::string& n : ChatTemplate::builtin_names()) names += (names.empty() ? "" : ", ") + n;
      throw Error(fmt::format("--chat-template '{}' is neither a file nor a built-in template ({})",
                              flags.template_flag, names));
    }();
    t.set_special_tokens(bos, eos);
    return t;
  }
  ChatTemplate t = model_template();
  if (!t.warning().empty()) fmt::print(stderr, "snapkv: warning: {}\n", printable(t.warning()));
  return t;
}

std::string build_messages(const ChatFlags& flags, const std::string* user_text) {
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  if (!flags.messages_file.empty()) {
    const std::string text = read_flag_file(flags.messages_file, "--messages");
    // Bounded nesting: dump() below and the renderer recurse on it (a deep file was a stack
    // overflow). And bounded keys per object: ordered_json's key lookup is a scan, quadratic in
    // the keys.
    msgs = chat::parse_bounded_json(text, kMaxMessagesDepth, kMaxMessagesKeys,
                                    fmt::format("--messages file '{}'", flags.messages_file));
    if (!msgs.is_array()) {
      throw Error(fmt::format("--messages file '{}' must hold a JSON array of messages", flags.messages_file));
    }
    for (size_t k = 0; k < msgs.size(); ++k) {
      if (!msgs[k].is_object() || !msgs[k].contains("role") || !msgs[k]["role"].is_string()) {
        throw Error(fmt::format("--messages file '{}': message {} is not an object with a string \"role\"",
                                flags.messages_file, k));
      }
    }
  }
  if (!flags.system.empty()) {
    if (!msgs.empty() && msgs[0]["role"] == "system") {
      throw Error("--system was given but the --messages conversation already starts with a system message");
    }
    msgs.insert(msgs.begin(), nlohmann::ordered_json{{"role", "system"}, {"content", flags.system}});
  }
  if (user_text != nullptr) msgs.push_back({{"role", "user"}, {"content", *user_text}});
  if (msgs.empty()) throw Error("no messages: give -p TEXT, -f FILE or --messages FILE");
  try {
    return msgs.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("the chat messages must be UTF-8 text (--system, -p or -f): {}", e.what()));
  }
}

ChatPrompt render_chat_prompt(const ChatTemplate& tmpl, const ChatFlags& flags, const std::string& messages_json,
                              const std::string& question) {
  ChatTemplateOptions opt;
  opt.add_generation_prompt = flags.add_generation_prompt;
  if (!flags.tools_file.empty()) opt.tools_json = read_flag_file(flags.tools_file, "--tools");
  if (question.empty()) return {tmpl.render_json(messages_json, opt), {}};
  // Context and question share the last user turn; the prompt is split right after the
  // context so the turn markers stay where the template puts them.
  try {
    ChatSplit sp = render_follow_up(tmpl, messages_json, question, opt);
    return {std::move(sp.context), std::move(sp.question)};
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind("a follow-up question needs", 0) == 0)
      throw Error("--question needs the conversation to end with a user message with text content");
    throw;
  }
}

ChatTokens tokenize_chat_prompt_question(const ChatTemplate& tmpl, const Tokenizer& tok, const ChatFlags& flags,
                                         const std::string& messages_json, size_t question_at) {
  ChatTemplateOptions opt;
  opt.add_generation_prompt = flags.add_generation_prompt;
  if (!flags.tools_file.empty()) opt.tools_json = read_flag_file(flags.tools_file, "--tools");
  return tokenize_chat_question(tok, tmpl, messages_json, opt, question_at);
}

}  // namespace snapkv::cli
