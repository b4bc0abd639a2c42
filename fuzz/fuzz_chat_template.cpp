// libFuzzer target for the chat-template renderer: any input is parsed as a Jinja template and,
// if it parses, rendered for a small conversation with tools. Errors (snapkv::Error) are the
// expected outcome for most inputs; a crash, a sanitizer report, a hang or running out of memory
// is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "snapkv/chat_template.h"
#include "snapkv/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view src(reinterpret_cast<const char*>(data), size);
  static const std::vector<snapkv::ChatMessage> conv{
      {"system", "Be brief."}, {"user", "Hi <|im_start|>"}, {"assistant", "Hello!"}, {"user", "X"}};
  snapkv::ChatTemplateOptions opt;
  opt.tools_json = R"([{"type": "function", "function": {"name": "f", "parameters": {"a": [1, 2.5, null]}}}])";
  opt.max_output_bytes = 1 << 20;
  opt.max_loop_iterations = 20'000;
  opt.max_work_bytes = 16 << 20;
  opt.max_live_bytes = 16 << 20;
  try {
    snapkv::ChatTemplate t = snapkv::ChatTemplate::parse(src, "fuzz");
    t.set_special_tokens("<s>", "</s>");
    t.render(conv, opt);
  } catch (const snapkv::Error&) {
  }
  return 0;
}
