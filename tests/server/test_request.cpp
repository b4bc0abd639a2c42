// Request parsing and validation of the server (src/server/request.h).
#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"
#include "server/request.h"
#include "server/server.h"
#include "snapkv/error.h"

namespace snapkv::server {
namespace {

RequestDefaults defaults() {
  RequestDefaults d;
  d.max_tokens = 77;
  d.sampling = {.temp = 0.5f, .top_k = 12, .top_p = 0.9f, .seed = 0};
  return d;
}

CompletionRequest parse(const std::string& body, Endpoint ep = Endpoint::Completions,
                        const RequestDefaults& d = defaults()) {
  return parse_completion_request(body, ep, d);
}

/// The ApiError of `body`: status and code.
std::pair<int, std::string> error_of(const std::string& body, Endpoint ep = Endpoint::Completions) {
  try {
    parse(body, ep);
  } catch (const ApiError& e) {
    return {e.status(), e.code()};
  }
  return {0, ""};
}

TEST(Request, CompletionFieldsAndDefaults) {
  const CompletionRequest r = parse(R"({"model":"m","prompt":"Hello","max_tokens":5,"temperature":0,"top_p":0.5,
                                        "top_k":3,"seed":42,"stop":["\n","END"],"stream":true,
                                        "stream_options":{"include_usage":true},"user":"ignored"})");
  EXPECT_EQ(r.prompt, "Hello");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_EQ(r.sampling.temp, 0.0f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 3);
  EXPECT_TRUE(r.seed_set);
  EXPECT_EQ(r.sampling.seed, 42u);
  ASSERT_EQ(r.stop.size(), 2u);
  EXPECT_EQ(r.stop[1], "END");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.press.name, "none");

  const CompletionRequest d = parse(R"({"prompt":"x","stop":"Q:","n":1,"max_tokens":null})");
  EXPECT_EQ(d.max_tokens, -1);  // the default applies later
  EXPECT_EQ(d.sampling.temp, 0.5f);
  EXPECT_EQ(d.sampling.top_k, 12);
  EXPECT_FALSE(d.seed_set);
  ASSERT_EQ(d.stop.size(), 1u);
  EXPECT_EQ(d.stop[0], "Q:");
  EXPECT_FALSE(d.stream);
}

TEST(Request, ChatMessages) {
  const CompletionRequest r = parse(
      R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi "},{"type":"text","text":"there"}]}],
          "max_completion_tokens":9})",
      Endpoint::ChatCompletions);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "Hi there");
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_EQ(error_of(R"({"messages":[{"role":"wizard","content":"x"}]})", Endpoint::ChatCompletions).first, 400);
  try {
    parse(R"({"messages":[{"role":"wizard","content":"x"}]})", Endpoint::ChatCompletions);
    ADD_FAILURE() << "role 'wizard' accepted";
  } catch (const ApiError& e) {  // names every role accepted, developer included
    EXPECT_NE(std::string(e.what()).find("system, developer, user or assistant"), std::string::npos) << e.what();
  }
  EXPECT_EQ(error_of(R"({"messages":[]})", Endpoint::ChatCompletions).first, 400);
  EXPECT_EQ(error_of(R"({"messages":"hi"})", Endpoint::ChatCompletions).second, "invalid_type");
  EXPECT_EQ(error_of(R"({"prompt":"hi"})", Endpoint::ChatCompletions).second, "missing_field");
  EXPECT_EQ(
      error_of(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", Endpoint::ChatCompletions).second,
      "invalid_value");
}

TEST(Request, MalformedAndWrongTypes) {
  for (const char* body : {"", "{", "not json", "[1,2]", "\"str\"", "{\"prompt\":\"a\",}", "{\"prompt\":\"\xff\"}"}) {
    const auto [status, code] = error_of(body);
    EXPECT_EQ(status, 400) << body;
  }
  EXPECT_EQ(error_of("{").second, "invalid_json");
  EXPECT_EQ(error_of("{\"prompt\":\"\xc3\x28\"}").second, "invalid_json");  // invalid UTF-8
  EXPECT_EQ(error_of(R"({"prompt":5})").second, "invalid_type");
  EXPECT_EQ(error_of(R"({"prompt":""})").second, "invalid_value");
  EXPECT_EQ(error_of(R"({"prompt":"a","max_tokens":"5"})").second, "invalid_type");
  EXPECT_EQ(error_of(R"({"prompt":"a","max_tokens":-1})").second, "invalid_value");
  EXPECT_EQ(error_of(R"({"prompt":"a","max_tokens":0})").second, "invalid_value");
  // Integral but beyond 64 bits (JSON parsers hand such integers over as floats): out of range.
  EXPECT_EQ(error_of(R"({"prompt":"a","max_tokens":1e300})").second, "invalid_value");
  EXPECT_EQ(error_of(R"({"prompt":"a","max_tokens":99999999999999999999999})").second, "invalid_value");
  EXPECT_EQ(error_of(R"({"prompt":"a","seed":18446744073709551616})").second, "invalid_value");
  EXPECT_EQ(error_of(R"({"prompt":"a","max_tokens":2.5})").second, "invalid_type");
  EXPECT_EQ(error_of(R"({"prompt":"a","temperature":-0.1})").second, "invalid_value");
  EXPECT_EQ(error_of(R"({"prompt":"a","temperature":"hot"})").second, "invalid_type");
  EXPECT_EQ(error_of(R"({"prompt":"a","top_p":0})").second, "invalid_value");
  EXPECT_EQ(error_of(R"({"prompt":"a","top_p":1.5})").second, "invalid_value");
  EXPECT_EQ(error_of(R"({"prompt":"a","top_k":-2})").second, "invalid_value");
  EXPECT_EQ(error_of(R"({"prompt":"a","stream":"yes"})").second, "invalid_type");
  EXPECT_EQ(error_of(R"({"prompt":"a","stop":[1]})").second, "invalid_type");
  EXPECT_EQ(error_of(R"({"prompt":"a","stop":[""]})").second, "invalid_value");
  EXPECT_EQ(
      error_of(R"({"prompt":"a","stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})").second,
      "invalid_value");
  EXPECT_EQ(error_of(R"({"prompt":"a","n":2})").second, "invalid_value");
  EXPECT_EQ(error_of(R"({"prompt":"a","n":1})").first, 0);
  EXPECT_EQ(error_of(R"({"prompt":["a","b"]})").second, "invalid_type");
  // 16.0 is an integer as JSON numbers go.
  EXPECT_EQ(parse(R"({"prompt":"a","max_tokens":16.0})").max_tokens, 16);
  EXPECT_EQ(parse(R"({"prompt":"a","seed":-1})").sampling.seed, ~uint64_t{0});
}

// OpenAI fields that would change the answer and are not implemented are refused, not ignored
// (they were ignored: a client asking for JSON or log-probabilities got plain text); their
// neutral values pass.
TEST(Request, UnsupportedParametersAreRefused) {
  for (const char* extra : {
           R"("logprobs":true)",
           R"("logprobs":5)",
           R"("top_logprobs":2)",
           R"("response_format":{"type":"json_object"})",
           R"("response_format":{"type":"json_schema","json_schema":{}})",
           R"("response_format":{"type":"bogus"})",
           R"("tools":[{"type":"function","function":{"name":"f"}}])",
           R"("functions":[{"name":"f"}])",
           R"("tool_choice":"required")",
           R"("tool_choice":{"type":"function","function":{"name":"f"}})",
           R"("presence_penalty":0.5)",
           R"("frequency_penalty":-1)",
           R"("logit_bias":{"50256":-100})",
           R"("echo":true)",
           R"("best_of":3)",
           R"("logprobs":0)",  // on completions, 0 asks for the chosen token's log-probability
           R"("suffix":" end")",
       }) {
    const std::string body = std::string(R"({"prompt":"a",)") + extra + "}";
    EXPECT_EQ(error_of(body), std::make_pair(400, std::string("unsupported_parameter"))) << body;
  }
  for (const char* extra : {R"("logprobs":false)", R"("suffix":"")", R"("top_logprobs":0)",
                            R"("response_format":{"type":"text"})", R"("tools":[])", R"("tool_choice":"auto")",
                            R"("tool_choice":"none")", R"("presence_penalty":0)", R"("frequency_penalty":0.0)",
                            R"("logit_bias":{})", R"("echo":false)", R"("best_of":1)", R"("logprobs":null)"}) {
    const std::string body = std::string(R"({"prompt":"a",)") + extra + "}";
    EXPECT_EQ(error_of(body).first, 0) << body;
  }
  EXPECT_EQ(error_of(R"({"prompt":"a","presence_penalty":5})").second, "invalid_value");  // OpenAI's [-2, 2]
  EXPECT_EQ(error_of(R"({"prompt":"a","top_logprobs":21})").second, "invalid_value");     // OpenAI's [0, 20]
  EXPECT_EQ(error_of(R"({"prompt":"a","top_logprobs":-1})").second, "invalid_value");
  EXPECT_EQ(error_of(R"({"prompt":"a","best_of":0})").second, "invalid_value");
  EXPECT_EQ(error_of(R"({"prompt":"a","best_of":1e300})").second, "invalid_value");
  EXPECT_EQ(error_of(R"({"prompt":"a","frequency_penalty":"x"})").second, "invalid_type");
  EXPECT_EQ(error_of(R"({"prompt":"a","response_format":"json"})").second, "invalid_type");
  for (const char* extra : {R"("logprobs":"true")", R"("echo":1)", R"("top_logprobs":"3")", R"("best_of":"1")",
                            R"("tools":{})", R"("logit_bias":[1])", R"("suffix":5)"}) {
    const std::string body = std::string(R"({"prompt":"a",)") + extra + "}";
    EXPECT_EQ(error_of(body), std::make_pair(400, std::string("invalid_type"))) << body;
  }
}

TEST(Request, PressExtension) {
  CompletionRequest r = parse(R"({"prompt":"a","kv_compression":{"press":"snapkv","budget":256,"window":16}})");
  EXPECT_EQ(r.press.name, "snapkv");
  EXPECT_EQ(r.press.get("budget"), "256");
  EXPECT_EQ(r.press.get("window"), "16");
  // A value may be a string, read as in a spec string (docs/server.md); a bad one is still a 400.
  r = parse(R"({"prompt":"a","kv_compression":{"press":"snapkv","budget":"64","pool":"max"}})");
  EXPECT_EQ(r.press.get("budget"), "64");
  EXPECT_EQ(r.press.get("pool"), "max");
  EXPECT_EQ(error_of(R"({"prompt":"a","kv_compression":{"press":"snapkv","budget":"64x"}})").first, 400);
  r = parse(R"({"prompt":"a","kv_compression":"pyramidkv:budget=128"})");
  EXPECT_EQ(r.press.name, "pyramidkv");
  EXPECT_EQ(r.press.get("budget"), "128");
  r = parse(R"({"prompt":"a","compression_ratio":0.5})");
  EXPECT_EQ(r.press.name, "snapkv");
  EXPECT_EQ(r.press.get("ratio"), "0.5");
  r = parse(R"({"prompt":"a","kv_compression":{"press":"knorm"},"compression_ratio":0.25})");
  EXPECT_EQ(r.press.to_string(), "knorm:ratio=0.25");

  RequestDefaults d = defaults();
  d.press = PressSpec::parse("snapkv:budget=64,window=8");
  EXPECT_EQ(parse(R"({"prompt":"a"})", Endpoint::Completions, d).press, d.press);
  EXPECT_EQ(parse(R"({"prompt":"a","kv_compression":"none"})", Endpoint::Completions, d).press.name, "none");

  for (const char* bad :
       {R"({"prompt":"a","kv_compression":"nosuchpress"})",
        R"({"prompt":"a","kv_compression":{"press":"snapkv","bogus":1}})",
        R"({"prompt":"a","kv_compression":{"press":"snapkv","budget":-5}})",
        R"({"prompt":"a","kv_compression":{"press":"snapkv","window":true}})",
        R"({"prompt":"a","kv_compression":{"budget":5}})",
        R"({"prompt":"a","kv_compression":{"press":"none","budget":5}})", R"({"prompt":"a","kv_compression":7})",
        R"({"prompt":"a","kv_compression":"snapkv:budget="})", R"({"prompt":"a","compression_ratio":1})",
        R"({"prompt":"a","compression_ratio":"half"})",
        R"({"prompt":"a","kv_compression":{"press":"snapkv","budget":64},"compression_ratio":0.5})"}) {
    const auto [status, code] = error_of(bad);
    EXPECT_EQ(status, 400) << bad;
    EXPECT_TRUE(code == "invalid_press" || code == "invalid_type" || code == "invalid_value") << bad << " " << code;
  }
}

TEST(Request, SessionExtension) {
  const std::string msgs = R"("messages":[{"role":"user","content":"doc"},{"role":"user","content":"Q?"}])";
  const CompletionRequest r = parse("{" + msgs + R"(,"session":"doc-1.a:b_c"})", Endpoint::ChatCompletions);
  EXPECT_EQ(r.session, "doc-1.a:b_c");
  EXPECT_TRUE(parse("{" + msgs + "}", Endpoint::ChatCompletions).session.empty());
  const std::pair<int, std::string> bad{400, "invalid_value"};
  EXPECT_EQ(error_of("{" + msgs + R"(,"session":""})", Endpoint::ChatCompletions), bad);
  EXPECT_EQ(error_of("{" + msgs + R"(,"session":"a b"})", Endpoint::ChatCompletions), bad);
  EXPECT_EQ(error_of("{" + msgs + R"(,"session":")" + std::string(129, 'x') + R"("})", Endpoint::ChatCompletions), bad);
  EXPECT_EQ(error_of("{" + msgs + R"(,"session":7})", Endpoint::ChatCompletions).first, 400);
  // Completions have no question to split off; a session needs the document's and the question's
  // user messages last.
  EXPECT_EQ(error_of(R"({"prompt":"x","session":"s"})"), bad);
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"Q?"}],"session":"s"})", Endpoint::ChatCompletions), bad);
  EXPECT_EQ(
      error_of(R"({"messages":[{"role":"assistant","content":"d"},{"role":"user","content":"Q?"}],"session":"s"})",
               Endpoint::ChatCompletions),
      bad);
}

TEST(Request, ErrorShape) {
  try {
    parse(R"({"prompt":"a","n":3})");
    FAIL();
  } catch (const ApiError& e) {
    const nlohmann::json j = e.to_json();
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    EXPECT_EQ(j["error"]["code"], "invalid_value");
    EXPECT_NE(j["error"]["message"].get<std::string>().find("'n' must be 1"), std::string::npos);
  }
}

TEST(ByteSize, Units) {
  EXPECT_EQ(parse_byte_size("0"), 0u);
  EXPECT_EQ(parse_byte_size("1048576"), 1048576u);
  EXPECT_EQ(parse_byte_size("512MiB"), size_t{512} << 20);
  EXPECT_EQ(parse_byte_size("2GiB"), size_t{2} << 30);
  EXPECT_EQ(parse_byte_size("1.5 GiB"), size_t{3} << 29);
  EXPECT_EQ(parse_byte_size("64KiB"), size_t{64} << 10);
  EXPECT_EQ(parse_byte_size("100MB"), size_t{100000000});
  for (const char* bad : {"", "MiB", "-1", "12XB", "1.5", "1..5MiB", "99999999999999GiB", "0x10"})
    EXPECT_THROW(parse_byte_size(bad), snapkv::Error) << bad;
}

}  // namespace
}  // namespace snapkv::server
