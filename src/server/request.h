// snapkv server: the body of POST /v1/completions and /v1/chat/completions, parsed and checked
// field by field. Unknown fields are ignored (clients send many: user, logprobs, ...); every known
// field of a wrong type or out of range is an ApiError (400) naming the field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "snapkv/chat.h"
#include "snapkv/press_spec.h"
#include "snapkv/sampling.h"

namespace snapkv::server {

enum class Endpoint { Completions, ChatCompletions };

/// Server-wide defaults (from the flags) for the fields a request may omit.
struct RequestDefaults {
  PressSpec press;           ///< --press ... (a request's kv_compression replaces it)
  int64_t max_tokens = 512;  ///< -n: generated tokens when the request gives no max_tokens
  SamplerOptions sampling;   ///< temperature, top_k, top_p (the seed is random unless given)
};

struct CompletionRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::string model;                  ///< echoed back ("" -> the served model's name)
  std::string prompt;                 ///< completions
  std::vector<ChatMessage> messages;  ///< chat completions
  int64_t max_tokens = -1;            ///< -1: not given (the default applies, capped by the context)
  SamplerOptions sampling;
  bool seed_set = false;
  std::vector<std::string> stop;
  bool stream = false;
  bool ignore_eos = false;     ///< extension (as llama.cpp): do not stop at end-of-generation tokens
  bool include_usage = false;  ///< stream_options.include_usage: a last chunk with usage
  PressSpec press;             ///< validated (validate_press_spec)
  /// Extension (issue 10): the id of a stored compressed context ("" = none). Chat completions
  /// only: the last message (a user message) is the question, the conversation before it (ending
  /// with the user message that holds the document) the context, compressed once and re-used by
  /// every request naming the same id and context. 1..kMaxSessionIdBytes of [A-Za-z0-9._:-].
  std::string session;
};

/// Limits on what one request may ask for.
inline constexpr int64_t kMaxTokensLimit = int64_t{1} << 30;
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopBytes = 1024;
inline constexpr size_t kMaxMessages = 4096;
inline constexpr size_t kMaxSessionIdBytes = 128;

/// Parses `body` (JSON). Throws ApiError(400) for malformed JSON (invalid UTF-8 included), a body
/// that is not an object, a missing prompt/messages, a field of the wrong type or out of range,
/// n != 1, a stop string that is empty or too long, an unknown press or bad press parameters.
CompletionRequest parse_completion_request(std::string_view body, Endpoint endpoint, const RequestDefaults& defaults);

/// The press of a request: `kv_compression` (a press spec string, or an object {"press": name,
/// key: value, ...}) and `compression_ratio` (sets ratio= on that press; on `none` it means
/// snapkv), else the default. Exposed for tests; throws ApiError(400) (code "invalid_press").
PressSpec parse_press_field(const nlohmann::json& body, const PressSpec& default_press);

}  // namespace snapkv::server
