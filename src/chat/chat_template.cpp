// snapkv chat templates: the public ChatTemplate (snapkv/chat_template.h) on top of the Jinja
// renderer: template inputs as transformers passes them, errors with positions, the fallback to
// the built-in templates, and tokenisation with special tokens only where the template wrote them.
#include "snapkv/chat_template.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "chat/bounded_json.h"
#include "chat/builtin_templates.h"
#include "chat/jinja_ast.h"
#include "chat/jinja_eval.h"
#include "gguf/gguf.h"
#include "snapkv/error.h"

namespace snapkv {

struct ChatTemplate::Impl {
  std::string name;
  std::string source;
  std::string warning;
  std::string bos_token;
  std::string eos_token;
  std::shared_ptr<const jinja::Program> program;
};

namespace {

[[noreturn]] void rethrow(const std::string& name, const jinja::TemplateError& e) {
  throw Error(fmt::format("{}:{}:{}: {}", name, e.pos.line, e.pos.col, e.message));
}

constexpr int kMaxJsonDepth = 128;

jinja::Value from_json(const nlohmann::ordered_json& j, int depth) {
  using jinja::Value;
  if (depth > kMaxJsonDepth) throw Error(fmt::format("chat: JSON nests deeper than {} levels", kMaxJsonDepth));
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::real(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::real(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::data(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      jinja::Array a;
      for (const auto& x : j) a.push_back(from_json(x, depth + 1));
      return Value::array(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      jinja::Object o;
      for (const auto& [k, v] : j.items()) o.set(k, from_json(v, depth + 1));
      return Value::object(std::move(o));
    }
    default:
      throw Error("chat: unsupported JSON value (binary)");
  }
}

// Keys of one JSON object: nlohmann's ordered_json finds each key by a scan of the object's keys
// so far, quadratic in the keys (200,000 keys in one message took minutes).
constexpr size_t kMaxJsonKeys = 1000;

nlohmann::ordered_json parse_json(std::string_view text, const char* what) {
  // Deeper than from_json takes is refused there, with its message; this bound only keeps the
  // check pass's stack of open objects small.
  return chat::parse_bounded_json(text, 1 << 20, kMaxJsonKeys, fmt::format("chat: {}", what));
}

}  // namespace

RenderedChat RenderedChat::slice(size_t begin, size_t end) const {
  if (begin > end || end > text.size()) {
    throw Error(fmt::format("chat: slice [{}, {}) outside a prompt of {} bytes", begin, end, text.size()));
  }
  RenderedChat r;
  r.text = text.substr(begin, end - begin);
  for (const TextSpan& s : template_spans) {
    const size_t b = std::max(s.begin, begin);
    const size_t e = std::min(s.end, end);
    if (b < e) r.template_spans.push_back({b - begin, e - begin});
  }
  return r;
}

ChatTemplate ChatTemplate::parse(std::string_view source, std::string name) {
  if (source.size() > kMaxSourceBytes) {
    throw Error(
        fmt::format("{}: the template's {} bytes exceed the limit of {} bytes", name, source.size(), kMaxSourceBytes));
  }
  auto impl = std::make_shared<Impl>();
  try {
    impl->program = std::make_shared<const jinja::Program>(jinja::parse_template(source));
  } catch (const jinja::TemplateError& e) {
    rethrow(name, e);
  }
  impl->name = std::move(name);
  impl->source = std::string(source);
  return ChatTemplate(std::move(impl));
}

std::vector<std::string> ChatTemplate::builtin_names() {
  std::vector<std::string> out;
  for (const auto& b : chat::builtin_templates()) out.emplace_back(b.name);
  return out;
}

ChatTemplate ChatTemplate::builtin(std::string_view name) {
  for (const auto& b : chat::builtin_templates()) {
    if (name == b.name) return parse(b.source, fmt::format("builtin:{}", b.name));
  }
  std::string names;
  for (const std::string& n : builtin_names()) names += (names.empty() ? "" : ", ") + n;
  throw Error(fmt::format("chat: no built-in chat template '{}' (built-in: {})", name, names));
}

ChatTemplate ChatTemplate::from_gguf(const GGUFFile& f, const Tokenizer* tok) {
  std::string warning;
  std::optional<ChatTemplate> t;
  if (const auto src = f.get_string_opt("tokenizer.chat_template")) {
    try {
      t = parse(*src, f.path() + ": tokenizer.chat_template");
    } catch (const Error& e) {
      ChatFormat fmt_guess;
      try {
        fmt_guess = detect_chat_format(f);
      } catch (const Error&) {
        throw Error(fmt::format("{} (and no built-in chat template matches it)", e.what()));
      }
      t = builtin(chat_format_name(fmt_guess));
      warning = fmt::format("the model's chat template cannot be used ({}); using the built-in '{}' template instead",
                            e.what(), chat_format_name(fmt_guess));
    }
  } else {
    const ChatFormat fmt_guess = detect_chat_format(f);  // throws for a base model: "... no chat template ..."
    t = builtin(chat_format_name(fmt_guess));
    warning =
        fmt::format("{}: the model has no chat template (tokenizer.chat_template); using the built-in '{}' template",
                    f.path(), chat_format_name(fmt_guess));
  }
  t->impl_->warning = std::move(warning);
  if (tok != nullptr) {
    t->set_special_tokens(tok->bos() >= 0 ? std::string(tok->token_text(tok->bos())) : std::string(),
                          tok->eos() >= 0 ? std::string(tok->token_text(tok->eos())) : std::string());
  }
  return *t;
}

const std::string& ChatTemplate::name() const { return impl_->name; }
const std::string& ChatTemplate::source() const { return impl_->source; }
const std::string& ChatTemplate::warning() const { return impl_->warning; }
const std::string& ChatTemplate::bos_token() const { return impl_->bos_token; }
const std::string& ChatTemplate::eos_token() const { return impl_->eos_token; }

void ChatTemplate::set_special_tokens(std::string bos_token, std::string eos_token) {
  auto copy = std::make_shared<Impl>(*impl_);  // copies share the parsed program, not the settings
  copy->bos_token = std::move(bos_token);
  copy->eos_token = std::move(eos_token);
  impl_ = std::move(copy);
}

namespace {

RenderedChat render_values(const ChatTemplate::Impl& im, jinja::Value messages, const ChatTemplateOptions& opt) {
  using jinja::Value;
  jinja::Object g;
  jinja::add_global_functions(g);
  g.set("messages", std::move(messages));
  g.set("add_generation_prompt", Value::boolean(opt.add_generation_prompt));
  g.set("bos_token", Value::text(im.bos_token));
  g.set("eos_token", Value::text(im.eos_token));
  g.set("tools", opt.tools_json.empty() ? Value::none() : from_json(parse_json(opt.tools_json, "the tools list"), 0));
  g.set("documents", Value::none());
  jinja::Limits lim;
  lim.max_output_bytes = opt.max_output_bytes;
  lim.max_iterations = opt.max_loop_iterations;
  lim.max_work_bytes = opt.max_work_bytes;
  lim.max_live_bytes = opt.max_live_bytes;
  jinja::Evaluator ev(lim);
  jinja::Str out;
  try {
    out = ev.render(*im.program, g);
  } catch (const jinja::TemplateError& e) {
    rethrow(im.name, e);
  }
  RenderedChat r;
  r.text = out.text();
  size_t at = 0;
  for (const jinja::Range& d : out.data_ranges()) {
    if (d.begin > at) r.template_spans.push_back({at, d.begin});
    at = d.end;
  }
  if (at < r.text.size()) r.template_spans.push_back({at, r.text.size()});
  return r;
}

}  // namespace

RenderedChat ChatTemplate::render(std::span<const ChatMessage> messages, const ChatTemplateOptions& opt) const {
  jinja::Array msgs;
  for (const ChatMessage& m : messages) {
    jinja::Object o;
    o.set("role", jinja::Value::data(m.role));
    o.set("content", jinja::Value::data(m.content));
    msgs.push_back(jinja::Value::object(std::move(o)));
  }
  return render_values(*impl_, jinja::Value::array(std::move(msgs)), opt);
}

RenderedChat ChatTemplate::render_json(std::string_view messages_json, const ChatTemplateOptions& opt) const {
  const nlohmann::ordered_json j = parse_json(messages_json, "the messages");
  if (!j.is_array()) throw Error("chat: the messages must be a JSON array of objects");
  for (size_t k = 0; k < j.size(); ++k) {
    if (!j[k].is_object()) throw Error(fmt::format("chat: message {} is not a JSON object", k));
    if (!j[k].contains("role") || !j[k]["role"].is_string()) {
      throw Error(fmt::format("chat: message {} has no string \"role\"", k));
    }
  }
  return render_values(*impl_, from_json(j, 0), opt);
}

std::vector<int32_t> tokenize_chat(const Tokenizer& tok, const RenderedChat& r, bool add_special) {
  std::vector<int32_t> ids = tok.encode(r.text, false, std::span<const TextSpan>(r.template_spans));
  if (add_special) {
    if (tok.add_bos() && tok.bos() >= 0 && (ids.empty() || ids.front() != tok.bos()))
      ids.insert(ids.begin(), tok.bos());
    if (tok.add_eos() && tok.eos() >= 0) ids.push_back(tok.eos());
  }
  return ids;
}

}  // namespace snapkv
