// Helpers of the chat-template tests.
#pragma once

#include <functional>
#include <string>

#include "snapkv/error.h"
#include "test_util.h"

namespace snapkv::test {

inline std::filesystem::path chat_templates_dir() { return source_dir() / "tests" / "data" / "chat_templates"; }

inline std::string chat_template_file(const std::string& name) {
  return file_bytes(chat_templates_dir() / (name + ".jinja"));
}

/// The Error message `f` throws, or "" if it throws nothing.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace snapkv::test
