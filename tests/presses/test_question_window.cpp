// The question-aligned observation window (window=question, issue 11): the spec keys and their
// checks, the window a plan gives for a question span, and the selection, which is exactly that
// of a fixed window of the same size.
#include <gtest/gtest.h>

#include "press_test_util.h"

namespace snapkv::test {
namespace {

std::string canon(const std::string& s) { return make_press(PressSpec::parse(s))->spec().to_string(); }

TEST(QuestionWindow, SpecKeysAndChecks) {
  EXPECT_EQ(canon("snapkv:window=question"),
            "snapkv:budget=1024,window=question,window_min=8,window_max=64,sinks=0,alloc=uniform,span_gap=0,kernel=7,"
            "pool=max,gqa_agg=mean");
  EXPECT_EQ(canon("tova:ratio=0.5,window=question,window_max=40"),
            "tova:ratio=0.5,window=question,window_min=8,window_max=40,sinks=0,alloc=uniform,span_gap=0,gqa_agg=mean");
  const auto err = [](const std::string& s) {
    try {
      validate_press_spec(PressSpec::parse(s));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err("snapkv:window_min=4").find("window_min applies only to window=question"), std::string::npos);
  EXPECT_NE(err("snapkv:window=16,window_max=40").find("window=question"), std::string::npos);
  EXPECT_NE(err("snapkv:window=question,window_min=50,window_max=40").find("window_min=50 is larger"),
            std::string::npos);
  EXPECT_NE(err("snapkv:window=question,budget=60").find("window_max=64"), std::string::npos);
  EXPECT_NE(err("snapkv:window=questions").find("or question"), std::string::npos);
  EXPECT_EQ(err("snapkv:window=question,budget=64"), "");
  const auto p = make_press(PressSpec::parse("snapkv:window=question,window_max=48"));
  EXPECT_TRUE(p->question_window());
  EXPECT_EQ(p->window(), 48);  // what the engine must be able to collect
  EXPECT_FALSE(make_press(PressSpec::parse("snapkv"))->question_window());
}

TEST(QuestionWindow, PlanClampsTheQuestionSpan) {
  const auto q = make_press(PressSpec::parse("snapkv:budget=256,window=question,window_min=8,window_max=64"));
  EXPECT_EQ(q->plan(1000, 20).window, 20);
  EXPECT_EQ(q->plan(1000, 3).window, 8);
  EXPECT_EQ(q->plan(1000, 500).window, 64);
  EXPECT_EQ(q->plan(1000, 0).window, Press::kDefaultQuestionWindow);  // span unknown
  EXPECT_TRUE(q->plan(1000, 20).compress);
  EXPECT_THROW(q->plan(1000, 1001), Error);
  EXPECT_THROW(q->plan(1000, -1), Error);
  // A fixed window ignores the span.
  const auto f = make_press(PressSpec::parse("snapkv:budget=256,window=16"));
  EXPECT_EQ(f->plan(1000, 40).window, 16);
  // Too short to compress with this prompt's window: kept whole, with the window in the note.
  const auto r = make_press(PressSpec::parse("snapkv:ratio=0.5,window=question"));
  const Press::Plan short_plan = r->plan(30, 30);
  EXPECT_FALSE(short_plan.compress);
  EXPECT_NE(short_plan.reason.find("window=30"), std::string::npos) << short_plan.reason;
}

TEST(QuestionWindow, SelectionEqualsAFixedWindowOfTheSameSize) {
  const int64_t L = 300;
  for (int W : {8, 20, 64}) {
    const Layer l = Layer::random(L, 4, 2, 16, W, true, 5 + W, 2.0f);
    const PressInput in = l.input();  // the engine passes the plan's window in in.window
    for (const std::string name : {"snapkv", "adakv", "tova", "h2o"}) {
      const auto q = make_press(PressSpec::parse(name + ":budget=120,window=question"));
      const auto f = make_press(PressSpec::parse(name + ":budget=120,window=" + std::to_string(W)));
      EXPECT_EQ(q->compress(in, 120).kept, f->compress(in, 120).kept) << name << " W=" << W;
    }
  }
}

}  // namespace
}  // namespace snapkv::test
