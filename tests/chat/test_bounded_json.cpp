// chat/bounded_json.h: user JSON parsed within depth and key bounds, with errors that name the
// input, and in time linear in its size (nlohmann's callback parser, used before, rescanned the
// enclosing array at the end of every object: 600,000 messages took over 70 s).
#include <gtest/gtest.h>

#include <string>

#include "chat/bounded_json.h"
#include "snapkv/error.h"

namespace snapkv::chat {
namespace {

std::string error_of(const std::string& text, int depth = 8, size_t keys = 4) {
  try {
    parse_bounded_json(text, depth, keys, "the input");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(BoundedJson, ParsesWithinTheBoundsInOrder) {
  const nlohmann::ordered_json j = parse_bounded_json(R"({"b":[1,{"c":null}],"a":"x"})", 3, 2, "t");
  EXPECT_EQ(j.dump(), R"({"b":[1,{"c":null}],"a":"x"})");  // keys in the text's order
}

TEST(BoundedJson, DepthKeysAndSyntaxErrorsNameTheInput) {
  EXPECT_EQ(error_of("[[[[[[[[[1]]]]]]]]]"), "the input nests deeper than 8 levels");
  EXPECT_EQ(error_of("[[[[[[[[1]]]]]]]]"), "");
  EXPECT_EQ(error_of(R"([{"a":1,"b":2,"c":3,"d":4,"e":5}])"), "the input has a JSON object with more than 4 keys");
  EXPECT_EQ(error_of(R"([{"a":1,"b":2,"c":3,"d":4},{"a":1,"b":2,"c":3,"d":4}])"), "");  // per object
  EXPECT_EQ(error_of(R"({"a":{"x":1,"y":2,"z":3},"b":1,"c":2,"d":3})"), "");  // an inner object's keys are its own
  for (const std::string bad : {"", "[1,", "{\"a\" 1}", "[1] x", "\"\xff\""})
    EXPECT_EQ(error_of(bad).rfind("the input is not valid JSON: ", 0), 0u) << bad;
}

TEST(BoundedJson, ALongArrayOfObjectsIsParsedWhole) {
  // 200,000 messages: ~100 ms here; the callback parser needed ~25 s for this many.
  std::string text = "[";
  for (int i = 0; i < 200000; ++i) text += std::string(i ? "," : "") + R"({"role":"user","content":"x"})";
  text += "]";
  const nlohmann::ordered_json j = parse_bounded_json(text, 4, 4, "t");
  ASSERT_EQ(j.size(), 200000u);
  EXPECT_EQ(j.back()["content"], "x");
}

}  // namespace
}  // namespace snapkv::chat
