// Chat prompt formats and template detection.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "snapkv/chat.h"
#include "snapkv/error.h"
#include "support/gguf_writer.h"

namespace snapkv {
namespace {

GGUFFile file_with(const std::string& arch, const std::string* tmpl) {
  GGUFWriter w;
  w.add_string("general.architecture", arch);
  if (tmpl != nullptr) w.add_string("tokenizer.chat_template", *tmpl);
  const std::vector<uint8_t> bytes = w.to_bytes();
  return GGUFFile::from_memory(bytes, "chat-test.gguf");
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ChatFormat, GemmaTurns) {
  const std::vector<ChatMessage> msgs = {
      {"system", "Be brief."}, {"user", "  Hi!\n"}, {"assistant", "Hello."}, {"user", "Why?"}};
  EXPECT_EQ(format_chat(ChatFormat::Gemma, msgs, true),
            "<start_of_turn>user\nBe brief.\n\nHi!<end_of_turn>\n"
            "<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nWhy?<end_of_turn>\n"
            "<start_of_turn>model\n");
  EXPECT_EQ(format_chat(ChatFormat::Gemma, std::vector<ChatMessage>{{"user", "Q"}}, false),
            "<start_of_turn>user\nQ<end_of_turn>\n");
}

TEST(ChatFormat, GemmaRejectsBadOrder) {
  EXPECT_THROW(format_chat(ChatFormat::Gemma, std::vector<ChatMessage>{{"assistant", "A"}}, true), Error);
  EXPECT_THROW(format_chat(ChatFormat::Gemma, std::vector<ChatMessage>{{"user", "A"}, {"user", "B"}}, true), Error);
  EXPECT_THROW(format_chat(ChatFormat::Gemma, std::vector<ChatMessage>{{"user", "A"}, {"system", "B"}}, true), Error);
  const std::string msg = error_of([] {
    format_chat(ChatFormat::ChatML, std::vector<ChatMessage>{{"tool", "x"}}, true);
  });
  EXPECT_NE(msg.find("'tool'"), std::string::npos) << msg;
}

TEST(ChatFormat, ChatMLTurns) {
  const std::vector<ChatMessage> msgs = {{"system", "S"}, {"user", "U "}, {"assistant", "A"}};
  EXPECT_EQ(format_chat(ChatFormat::ChatML, msgs, true),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU <|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatFormat, Llama3Turns) {
  const std::vector<ChatMessage> msgs = {{"system", "S"}, {"user", " U\n"}};
  EXPECT_EQ(format_chat(ChatFormat::Llama3, msgs, true),
            "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatFormat, DetectsByTemplateMarkers) {
  const std::string gemma = "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m.role }}{% endfor %}";
  const std::string chatml = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}";
  const std::string llama3 = "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>{% endfor %}";
  EXPECT_EQ(detect_chat_format(file_with("llama", &gemma)), ChatFormat::Gemma);
  EXPECT_EQ(detect_chat_format(file_with("qwen2", &chatml)), ChatFormat::ChatML);
  EXPECT_EQ(detect_chat_format(file_with("llama", &llama3)), ChatFormat::Llama3);
  EXPECT_EQ(detect_chat_format(file_with("gemma3", nullptr)), ChatFormat::Gemma);
  EXPECT_STREQ(chat_format_name(ChatFormat::ChatML), "chatml");
}

TEST(ChatFormat, NoTemplateIsAnError) {
  const std::string msg = error_of([] { detect_chat_format(file_with("llama", nullptr)); });
  EXPECT_EQ(msg.rfind("chat-test.gguf: model has no chat template (base model?)", 0), 0u) << msg;
  const std::string phi = "{% for m in messages %}{{'<|user|>' + '\n' + m['content']}}{% endfor %}";
  const std::string msg2 = error_of([&] { detect_chat_format(file_with("phi3", &phi)); });
  EXPECT_NE(msg2.find("unsupported chat template"), std::string::npos) << msg2;
  EXPECT_EQ(msg2.find('\n'), std::string::npos) << "error must be one line";
}

}  // namespace
}  // namespace snapkv
