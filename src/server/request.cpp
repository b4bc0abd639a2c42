// snapkv server: request parsing and validation (see request.h).
#include "server/request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "server/api_error.h"
#include "snapkv/error.h"

namespace snapkv::server {

namespace {

using nlohmann::json;

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::number_float:
      return "a float";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    default:
      return "an unsupported value";
  }
}

ApiError wrong_type(const std::string& field, const char* expected, const json& v) {
  return bad_request("invalid_type", fmt::format("'{}' must be {}, got {}", field, expected, type_name(v)));
}

ApiError out_of_range(const std::string& field, const std::string& range, const std::string& got) {
  return bad_request("invalid_value", fmt::format("'{}' must be {}, got {}", field, range, got));
}

/// A present, non-null field, else nullptr (null means "not given", as the OpenAI SDK sends it).
const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

/// An integer field (a float with an integral value, e.g. 16.0, is accepted as JSON allows).
int64_t get_int(const json& v, const std::string& name, int64_t lo, int64_t hi) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi) || (lo > 0 && u < static_cast<uint64_t>(lo)))
      throw out_of_range(name, fmt::format("in [{}, {}]", lo, hi), std::to_string(u));
    return static_cast<int64_t>(u);
  }
  int64_t x = 0;
  if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) throw wrong_type(name, "an integer", v);
    // An integer too large for 64 bits arrives as a float: out of range, not of the wrong type.
    if (d < -9.0e18 || d > 9.0e18) throw out_of_range(name, fmt::format("in [{}, {}]", lo, hi), fmt::format("{}", d));
    x = static_cast<int64_t>(d);
  } else {
    throw wrong_type(name, "an integer", v);
  }
  if (x < lo || x > hi) throw out_of_range(name, fmt::format("in [{}, {}]", lo, hi), std::to_string(x));
  return x;
}

double get_number(const json& v, const std::string& name) {
  if (!v.is_number()) throw wrong_type(name, "a number", v);
  const double d = v.get<double>();
  if (!std::isfinite(d)) throw out_of_range(name, "finite", "a non-finite number");
  return d;
}

bool get_bool(const json& v, const std::string& name) {
  if (!v.is_boolean()) throw wrong_type(name, "a boolean", v);
  return v.get<bool>();
}

/// OpenAI fields that would change what the answer is, which this server does not implement:
/// refused with 400 `unsupported_parameter` rather than ignored (a client that asks for JSON, a
/// tool call or log-probabilities would otherwise get plain text and no sign of it). Their
/// neutral values (false, 0, "text", "none" / "auto", empty lists and objects) are accepted.
void refuse_unsupported(const json& body) {
  auto refuse = [](const std::string& what) {
    return bad_request("unsupported_parameter", fmt::format("{} is not supported by this server", what));
  };
  // logprobs: a boolean on chat, an integer on completions, where even 0 asks for the chosen
  // token's log-probability.
  if (const json* v = field(body, "logprobs")) {
    if (!v->is_boolean() && !(v->is_number() && v->get<double>() == std::floor(v->get<double>())))
      throw wrong_type("logprobs", "a boolean or an integer", *v);
    if (!v->is_boolean() || v->get<bool>()) throw refuse("'logprobs'");
  }
  if (const json* v = field(body, "top_logprobs")) {
    // OpenAI's range is [0, 20]; only 0 asks for nothing.
    if (get_int(*v, "top_logprobs", 0, 20) != 0) throw refuse("'top_logprobs'");
  }
  if (const json* v = field(body, "response_format")) {
    const json* type = v->is_object() ? field(*v, "type") : nullptr;
    if (type == nullptr || !type->is_string()) throw wrong_type("response_format", "an object with a 'type'", *v);
    if (type->get<std::string>() != "text")
      throw refuse(fmt::format("'response_format' of type '{}' (only 'text')", type->get<std::string>()));
  }
  for (const char* key : {"tools", "functions"})
    if (const json* v = field(body, key)) {
      if (!v->is_array()) throw wrong_type(key, "an array", *v);
      if (!v->empty()) throw refuse(fmt::format("'{}'", key));
    }
  if (const json* v = field(body, "tool_choice");
      v != nullptr && !(v->is_string() && (v->get<std::string>() == "none" || v->get<std::string>() == "auto")))
    throw refuse("'tool_choice' other than \"none\" or \"auto\"");
  for (const char* key : {"presence_penalty", "frequency_penalty"})
    if (const json* v = field(body, key)) {
      const double x = get_number(*v, key);
      if (!(x >= -2.0 && x <= 2.0)) throw out_of_range(key, "in [-2, 2]", fmt::format("{}", x));
      if (x != 0.0) throw refuse(fmt::format("a non-zero '{}'", key));
    }
  if (const json* v = field(body, "logit_bias")) {
    if (!v->is_object()) throw wrong_type("logit_bias", "an object", *v);
    if (!v->empty()) throw refuse("'logit_bias'");
  }
  if (const json* v = field(body, "echo")) {
    if (get_bool(*v, "echo")) throw refuse("'echo'");
  }
  if (const json* v = field(body, "best_of")) {
    if (get_int(*v, "best_of", 1, std::numeric_limits<int64_t>::max()) != 1) throw refuse("'best_of' other than 1");
  }
  if (const json* v = field(body, "suffix")) {
    if (!v->is_string()) throw wrong_type("suffix", "a string", *v);
    if (!v->get<std::string>().empty()) throw refuse("'suffix'");
  }
}

/// A chat message's content: a string, or a list of parts of which the "text" ones are joined.
std::string message_content(const json& c, size_t i) {
  const std::string name = fmt::format("messages[{}].content", i);
  if (c.is_string()) return c.get<std::string>();
  if (c.is_array()) {
    std::string out;
    for (size_t k = 0; k < c.size(); ++k) {
      const json& part = c[k];
      if (!part.is_object()) throw wrong_type(fmt::format("{}[{}]", name, k), "an object", part);
      const json* type = field(part, "type");
      if (type == nullptr || !type->is_string() || type->get<std::string>() != "text")
        throw bad_request("invalid_value",
                          fmt::format("'{}[{}].type' must be \"text\" (only text is supported)", name, k));
      const json* text = field(part, "text");
      if (text == nullptr || !text->is_string())
        throw bad_request("invalid_value", fmt::format("'{}[{}].text' must be a string", name, k));
      out += text->get<std::string>();
    }
    return out;
  }
  throw wrong_type(name, "a string or a list of text parts", c);
}

std::string press_value(const json& v, const std::string& key) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) throw wrong_type("kv_compression." + key, "a number or a string", v);
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d)) throw out_of_range("kv_compression." + key, "finite", "a non-finite number");
    if (d == std::floor(d) && std::fabs(d) < 1e15) return std::to_string(static_cast<int64_t>(d));
    return fmt::format("{}", d);
  }
  throw wrong_type("kv_compression." + key, "a number or a string", v);
}

}  // namespace

PressSpec parse_press_field(const json& body, const PressSpec& default_press) {
  PressSpec spec = default_press;
  try {
    if (const json* kc = field(body, "kv_compression")) {
      if (kc->is_string()) {
        spec = PressSpec::parse(kc->get<std::string>());
      } else if (kc->is_object()) {
        const json* name = field(*kc, "press");
        if (name == nullptr || !name->is_string())
          throw bad_request("invalid_press", "'kv_compression.press' must be a press name (a string)");
        spec = PressSpec::parse(name->get<std::string>());
        if (!spec.params.empty())
          throw bad_request("invalid_press", "'kv_compression.press' must be a press name; give its settings as keys");
        for (const auto& [key, value] : kc->items()) {
          if (key == "press" || value.is_null()) continue;
          spec.set(key, press_value(value, key));
        }
      } else {
        throw wrong_type("kv_compression", "a press spec string or an object", *kc);
      }
    }
    if (const json* r = field(body, "compression_ratio")) {
      const double x = get_number(*r, "compression_ratio");
      if (!(x >= 0.0 && x < 1.0)) throw out_of_range("compression_ratio", "in [0, 1)", fmt::format("{}", x));
      if (spec.name == "none") spec = PressSpec{.name = "snapkv", .params = {}};
      if (spec.get("budget").has_value())
        throw bad_request("invalid_press", "give either compression_ratio or a budget, not both");
      spec.set("ratio", fmt::format("{}", x));
    }
    validate_press_spec(spec);
  } catch (const snapkv::Error& e) {
    throw bad_request("invalid_press", e.what());
  }
  return spec;
}

CompletionRequest parse_completion_request(std::string_view text, Endpoint endpoint, const RequestDefaults& defaults) {
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) throw bad_request("invalid_json", "the request body is not valid JSON (UTF-8)");
  if (!body.is_object()) throw wrong_type("body", "a JSON object", body);

  CompletionRequest r;
  r.endpoint = endpoint;
  r.sampling = defaults.sampling;
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) throw wrong_type("model", "a string", *m);
    r.model = m->get<std::string>();
  }

  if (endpoint == Endpoint::Completions) {
    const json* p = field(body, "prompt");
    if (p == nullptr) throw bad_request("missing_field", "'prompt' is required");
    if (p->is_string()) {
      r.prompt = p->get<std::string>();
    } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
      r.prompt = (*p)[0].get<std::string>();
    } else {
      throw bad_request("invalid_type", "'prompt' must be a string (or a list of one string)");
    }
    if (r.prompt.empty()) throw bad_request("invalid_value", "'prompt' must not be empty");
  } else {
    const json* ms = field(body, "messages");
    if (ms == nullptr) throw bad_request("missing_field", "'messages' is required");
    if (!ms->is_array()) throw wrong_type("messages", "an array", *ms);
    if (ms->empty()) throw bad_request("invalid_value", "'messages' must not be empty");
    if (ms->size() > kMaxMessages)
      throw out_of_range("messages", fmt::format("at most {} messages", kMaxMessages), std::to_string(ms->size()));
    for (size_t i = 0; i < ms->size(); ++i) {
      const json& m = (*ms)[i];
      if (!m.is_object()) throw wrong_type(fmt::format("messages[{}]", i), "an object", m);
      const json* role = field(m, "role");
      if (role == nullptr || !role->is_string())
        throw bad_request("invalid_value", fmt::format("'messages[{}].role' must be a string", i));
      const std::string rs = role->get<std::string>();
      if (rs != "system" && rs != "user" && rs != "assistant" && rs != "developer")
        throw bad_request(
            "invalid_value",
            fmt::format("'messages[{}].role' must be system, developer, user or assistant, got '{}'", i, rs));
      const json* content = field(m, "content");
      if (content == nullptr) throw bad_request("invalid_value", fmt::format("'messages[{}].content' is required", i));
      r.messages.push_back({rs == "developer" ? "system" : rs, message_content(*content, i)});
    }
  }

  if (const json* n = field(body, "n");
      n != nullptr && get_int(*n, "n", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()) != 1)
    throw bad_request("invalid_value", "'n' must be 1: one choice per request is supported");
  refuse_unsupported(body);
  for (const char* key : {"max_tokens", "max_completion_tokens"})
    if (const json* v = field(body, key)) r.max_tokens = get_int(*v, key, 1, kMaxTokensLimit);
  if (const json* v = field(body, "temperature")) {
    const double t = get_number(*v, "temperature");
    if (t < 0 || t > 100) throw out_of_range("temperature", "in [0, 100]", fmt::format("{}", t));
    r.sampling.temp = static_cast<float>(t);
  }
  if (const json* v = field(body, "top_p")) {
    const double p = get_number(*v, "top_p");
    if (!(p > 0 && p <= 1)) throw out_of_range("top_p", "in (0, 1]", fmt::format("{}", p));
    r.sampling.top_p = static_cast<float>(p);
  }
  if (const json* v = field(body, "top_k")) r.sampling.top_k = static_cast<int>(get_int(*v, "top_k", 0, 1 << 30));
  if (const json* v = field(body, "seed")) {
    r.seed_set = true;
    if (v->is_number_unsigned()) {
      r.sampling.seed = v->get<uint64_t>();
    } else {
      r.sampling.seed = static_cast<uint64_t>(
          get_int(*v, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
    }
  }
  if (const json* v = field(body, "stop")) {
    std::vector<const json*> items;
    if (v->is_string()) {
      items.push_back(v);
    } else if (v->is_array()) {
      if (v->size() > kMaxStopStrings)
        throw out_of_range("stop", fmt::format("at most {} strings", kMaxStopStrings), std::to_string(v->size()));
      for (const json& s : *v) items.push_back(&s);
    } else {
      throw wrong_type("stop", "a string or a list of strings", *v);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i]->is_string()) throw wrong_type(fmt::format("stop[{}]", i), "a string", *items[i]);
      std::string s = items[i]->get<std::string>();
      if (s.empty()) throw bad_request("invalid_value", fmt::format("'stop[{}]' must not be empty", i));
      if (s.size() > kMaxStopBytes)
        throw out_of_range(fmt::format("stop[{}]", i), fmt::format("at most {} bytes", kMaxStopBytes),
                           std::to_string(s.size()));
      r.stop.push_back(std::move(s));
    }
  }
  if (const json* v = field(body, "stream")) r.stream = get_bool(*v, "stream");
  if (const json* v = field(body, "ignore_eos")) r.ignore_eos = get_bool(*v, "ignore_eos");
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw wrong_type("stream_options", "an object", *so);
    if (const json* iu = field(*so, "include_usage")) r.include_usage = get_bool(*iu, "stream_options.include_usage");
  }
  r.press = parse_press_field(body, defaults.press);
  if (const json* v = field(body, "session")) {
    if (!v->is_string()) throw wrong_type("session", "a string", *v);
    r.session = v->get<std::string>();
    const bool ok_chars = std::all_of(r.session.begin(), r.session.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
             c == ':' || c == '-';
    });
    if (r.session.empty() || r.session.size() > kMaxSessionIdBytes || !ok_chars)
      throw bad_request("invalid_value",
                        fmt::format("'session' must be 1 to {} characters of A-Z a-z 0-9 . _ : -", kMaxSessionIdBytes));
    if (endpoint != Endpoint::ChatCompletions)
      throw bad_request("invalid_value", "'session' is served on /v1/chat/completions only");
    if (r.messages.size() < 2 || r.messages.back().role != "user" || r.messages[r.messages.size() - 2].role != "user")
      throw bad_request("invalid_value",
                        "with 'session', the last message is the question and the one before it the user message "
                        "holding the document: both must be user messages");
  }
  return r;
}

}  // namespace snapkv::server
