// snapkv chat templates: the built-in Jinja templates (chatml, gemma, llama3).
#pragma once

#include <span>

namespace snapkv::chat {

struct BuiltinTemplate {
  const char* name;
  const char* source;
};

/// The built-in templates, by name.
std::span<const BuiltinTemplate> builtin_templates();

}  // namespace snapkv::chat
