#include "eval/prompt.h"

#include <fmt/format.h>

#include "snapkv/engine.h"
#include "snapkv/error.h"

namespace snapkv::eval {

namespace {
// Placed between context and question in the last user message, then cut out of the render.
constexpr std::string_view kSplit = "\x1f<snapkv-eval-split>\x1f";
}  // namespace

const char* chat_mode_name(ChatMode m) { return m == ChatMode::Auto ? "auto" : m == ChatMode::On ? "on" : "off"; }

ChatMode parse_chat_mode(const std::string& s) {
  if (s == "auto") return ChatMode::Auto;
  if (s == "on") return ChatMode::On;
  if (s == "off") return ChatMode::Off;
  throw Error(fmt::format("--chat must be auto, on or off, got '{}'", s));
}

PromptFormat::PromptFormat(const Engine& engine, ChatMode mode, bool answer_prefix)
    : tok_(&engine.tokenizer()), answer_prefix_(answer_prefix) {
  if (mode == ChatMode::Off) return;
  try {
    ChatTemplate t = engine.chat_template();
    if (mode == ChatMode::On || t.warning().empty()) tmpl_ = std::move(t);
  } catch (const Error&) {
    if (mode == ChatMode::On) throw;
  }
}

std::string PromptFormat::name() const {
  return std::string(tmpl_ ? tmpl_->name() : "base") + (answer_prefix_ ? "" : ", no answer prefix");
}

const std::string& PromptFormat::prefix(const TaskText& t) const {
  static const std::string none;
  return answer_prefix_ ? t.answer_prefix : none;
}

std::pair<RenderedChat, RenderedChat> PromptFormat::render_chat(const TaskText& t) const {
  std::vector<ChatMessage> msgs;
  for (const Shot& s : t.shots) {
    msgs.push_back({"user", s.user});
    msgs.push_back({"assistant", s.assistant});
  }
  msgs.push_back({"user", t.context + std::string(kSplit) + t.question});
  const RenderedChat full = tmpl_->render(msgs);
  const size_t at = full.text.find(kSplit);
  if (at == std::string::npos || full.text.find(kSplit, at + 1) != std::string::npos)
    throw Error("the chat template does not keep the user's text as given; use --chat off");
  return {full.slice(0, at), full.slice(at + kSplit.size(), full.text.size())};
}

PromptIds PromptFormat::tokenize(const TaskText& t) const {
  PromptIds p;
  if (tmpl_) {
    const auto [ctx, q] = render_chat(t);
    p.context = tokenize_chat(*tok_, ctx, true);
    p.question = tokenize_chat(*tok_, q, false);
    const auto a = tok_->encode(prefix(t), false, false);
    p.question.insert(p.question.end(), a.begin(), a.end());
    return p;
  }
  std::string shots;
  for (const Shot& s : t.shots) shots += s.user + s.assistant + "\n\n";
  p.context = tok_->encode(shots + t.context, true, false);
  p.question = tok_->encode(t.question + prefix(t), false, false);
  return p;
}

std::vector<int32_t> PromptFormat::follow_up(const TaskText& first, const std::string& first_answer,
                                             const TaskText& next) const {
  std::vector<int32_t> ids;
  if (!tmpl_) {
    ids = tok_->encode(" " + first_answer + "\n\n" + next.question + prefix(next), false, false);
    return ids;
  }
  // The first turn as tokenize() renders it (generation prompt included), then the whole
  // conversation: the difference is the answer, the end of its turn and the next user turn.
  std::vector<ChatMessage> msgs;
  for (const Shot& s : first.shots) {
    msgs.push_back({"user", s.user});
    msgs.push_back({"assistant", s.assistant});
  }
  msgs.push_back({"user", first.context + first.question});
  const RenderedChat one = tmpl_->render(msgs);
  msgs.push_back({"assistant", prefix(first) + " " + first_answer});
  msgs.push_back({"user", next.question});
  const RenderedChat two = tmpl_->render(msgs);
  // The answer's own ids follow the answer prefix the first prompt ends with; the template may
  // trim the message, so the text after the answer is found by the answer itself.
  const size_t at = two.text.compare(0, one.text.size(), one.text) == 0 ? two.text.find(first_answer, one.text.size())
                                                                        : std::string::npos;
  if (at == std::string::npos)
    throw Error("the chat template does not render the first turn as the start of a follow-up; use --chat off");
  ids = tok_->encode(" " + first_answer, false, false);
  const auto rest = tokenize_chat(*tok_, two.slice(at + first_answer.size(), two.text.size()), false);
  ids.insert(ids.end(), rest.begin(), rest.end());
  const auto a = tok_->encode(prefix(next), false, false);
  ids.insert(ids.end(), a.begin(), a.end());
  return ids;
}

std::pair<std::string, std::string> PromptFormat::render(const TaskText& t) const {
  if (tmpl_) {
    const auto [ctx, q] = render_chat(t);
    return {ctx.text, q.text + prefix(t)};
  }
  std::string shots;
  for (const Shot& s : t.shots) shots += s.user + s.assistant + "\n\n";
  return {shots + t.context, t.question + prefix(t)};
}

}  // namespace snapkv::eval
