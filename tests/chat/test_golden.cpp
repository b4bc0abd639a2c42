// The chat templates of tests/data/chat_templates/ rendered for every recorded conversation give
// byte-identical text to Python's jinja2 as Hugging Face runs it (golden.json, recorded by
// tools/make_chat_golden.py), and the same errors where jinja2 raised one.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "chat_test_util.h"
#include "snapkv/chat_template.h"

namespace snapkv::test {
namespace {

using nlohmann::ordered_json;

const ordered_json& golden() {
  static const ordered_json g = ordered_json::parse(file_bytes(chat_templates_dir() / "golden.json"));
  return g;
}

TEST(ChatGolden, CoversTheTemplatesAndConversations) {
  const ordered_json& g = golden();
  std::map<std::string, int> per_template;
  for (const auto& c : g["cases"]) ++per_template[c["template"].get<std::string>()];
  // Both real models (SmolLM2's own template, the built-in Gemma 3 one), the other built-ins,
  // and eleven further templates.
  for (const char* t :
       {"smollm2", "builtin_gemma", "builtin_chatml", "builtin_llama3", "chatml", "chatml_default_system", "llama3",
        "gemma2", "mistral_inst", "llama2_inst", "phi3", "qwen25_tools", "deepseek", "strict_roles", "features"}) {
    EXPECT_GE(per_template[t], 24) << t;
  }
  EXPECT_GE(g["cases"].size(), 360u);
}

TEST(ChatGolden, ByteIdenticalToJinja2) {
  const ordered_json& g = golden();
  std::map<std::string, ChatTemplate> templates;
  int rendered = 0;
  int errors = 0;
  for (const auto& c : g["cases"]) {
    const std::string name = c["template"];
    if (!templates.count(name)) templates.emplace(name, ChatTemplate::parse(chat_template_file(name), name));
    ChatTemplate t = templates.at(name);
    t.set_special_tokens(c["bos_token"], c["eos_token"]);
    ChatTemplateOptions opt;
    opt.add_generation_prompt = c["add_generation_prompt"];
    if (c["tools"].get<bool>()) opt.tools_json = g["tools"].dump();
    const std::string msgs = g["conversations"][c["conversation"].get<std::string>()].dump();
    const std::string label = name + " / " + c["conversation"].get<std::string>() +
                              (opt.add_generation_prompt ? " / gen" : " / no-gen") + (c["tools"] ? " / tools" : "");
    if (c.contains("text")) {
      std::string got;
      const std::string err = error_of([&] { got = t.render_json(msgs, opt).text; });
      EXPECT_EQ(err, "") << label;
      EXPECT_EQ(got, c["text"].get<std::string>()) << label;
      ++rendered;
    } else {
      const std::string err = error_of([&] { t.render_json(msgs, opt); });
      ASSERT_NE(err, "") << label << ": jinja2 raised " << c["error"];
      if (c["raised"].get<bool>()) {  // raise_exception(msg): the same message
        EXPECT_NE(err.find(c["error"].get<std::string>()), std::string::npos) << label << ": " << err;
      }
      ++errors;
    }
  }
  EXPECT_GT(rendered, 300);
  EXPECT_GT(errors, 20);
}

TEST(ChatGolden, SnippetsByteIdenticalToJinja2) {
  const ordered_json& g = golden();
  const std::string msgs = g["conversations"]["single_user"].dump();
  ASSERT_GE(g["snippets"].size(), 80u);
  for (const auto& sn : g["snippets"]) {
    const std::string src = sn["source"];
    std::string got;
    const std::string err = error_of([&] {
      ChatTemplate t = ChatTemplate::parse(src, "snippet");
      t.set_special_tokens("<s>", "</s>");
      got = t.render_json(msgs).text;
    });
    if (sn.contains("text")) {
      EXPECT_EQ(err, "") << src;
      EXPECT_EQ(got, sn["text"].get<std::string>()) << src;
    } else {
      EXPECT_NE(err, "") << src << ": jinja2 raised " << sn["error"];
    }
  }
}

TEST(ChatGolden, IntAndFloatFiltersReadNoHexLikePython) {
  // jinja2 3.1.6: int("0x1A") and float("0x1A") fail in Python, so the filters give their
  // default; strtod reads C99 hex floats.
  const std::string src =
      "{{ '0x1A' | int }}|{{ '0x1A' | float }}|{{ '0x1p3' | int(7) }}|{{ ' 12 ' | int }}|{{ '2.5e1' | int }}|"
      "{{ '1.5' | float }}|{{ 'abc' | float }}";
  EXPECT_EQ(ChatTemplate::parse(src, "t").render_json(R"([{"role": "user", "content": "X"}])").text,
            "0|0.0|7|12|25|1.5|0.0");
}

TEST(ChatGolden, TuplesAreNotEqualToListsLikePython) {
  // jinja2 3.1.6: (1, 2) == [1, 2] is False; tuples equal tuples, lists lists.
  const std::string src =
      "{{ (1, 2) == [1, 2] }}|{{ (1, 2) == (1, 2) }}|{{ [1, 2] == [1, 2] }}|{{ [1, 2] in [(1, 2)] }}|"
      "{{ ('a', 1) in {'a': 1}.items() }}";
  EXPECT_EQ(ChatTemplate::parse(src, "t").render_json(R"([{"role": "user", "content": "X"}])").text,
            "False|True|True|False|True");
}

TEST(ChatGolden, BuiltinsAreTheRecordedFiles) {
  for (const std::string& n : ChatTemplate::builtin_names()) {
    EXPECT_EQ(ChatTemplate::builtin(n).source(), chat_template_file("builtin_" + n)) << n;
  }
  EXPECT_EQ(ChatTemplate::builtin_names(), (std::vector<std::string>{"chatml", "gemma", "llama3"}));
}

}  // namespace
}  // namespace snapkv::test
