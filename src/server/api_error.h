// snapkv server: ApiError — a request the server refuses, in OpenAI's error shape
// {"error": {"code", "type", "message"}} plus optional extra fields (llama.cpp adds
// n_prompt_tokens and n_ctx to a context overflow).
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace snapkv::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, std::string code, const std::string& message,
           nlohmann::json extra = nlohmann::json::object())
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        code_(std::move(code)),
        extra_(std::move(extra)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& code() const { return code_; }
  const nlohmann::json& extra() const { return extra_; }

  /// {"error": {"code", "type", "message", ...extra}}
  nlohmann::json to_json() const {
    nlohmann::json e = extra_;
    e["code"] = code_;
    e["type"] = type_;
    e["message"] = what();
    return nlohmann::json{{"error", e}};
  }

 private:
  int status_;
  std::string type_, code_;
  nlohmann::json extra_;
};

/// 400 invalid_request_error with `code` (e.g. "invalid_value", "invalid_type").
inline ApiError bad_request(const std::string& code, const std::string& message,
                            nlohmann::json extra = nlohmann::json::object()) {
  return ApiError(400, "invalid_request_error", code, message, std::move(extra));
}

}  // namespace snapkv::server
