// The sample generators: deterministic for a seed, sized to exactly length - gen_tokens ids,
// the grid's needle at the requested depth on a sentence boundary, answers present exactly once
// (or as each task defines them).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "eval/haystack.h"
#include "eval/prompt.h"
#include "eval/score.h"
#include "eval/tasks.h"
#include "eval_test_util.h"

namespace snapkv::eval {
namespace {

struct Fmt {
  std::string name;
  std::shared_ptr<const Engine> engine;
  ChatMode mode;
};

std::vector<Fmt> formats() {
  std::vector<Fmt> f = {{"llama-tiny/base", etest::llama_tiny(), ChatMode::Off}};
  if (auto s = etest::smollm2()) {
    f.push_back({"smollm2/chat", s, ChatMode::Auto});
    f.push_back({"smollm2/base", s, ChatMode::Off});
  }
  return f;
}

std::string full_text(const Sample& s) { return s.context_text + s.question_text; }

TEST(Generators, SameSeedSameSampleOtherSeedOther) {
  for (const Fmt& f : formats()) {
    PromptFormat pf(*f.engine, f.mode);
    Generator g(pf);
    for (const auto& t : all_tasks()) {
      SampleRequest r{t.name, 1024, 7, 2, t.kind == TaskKind::NiahGrid ? 0.5 : -1};
      const Sample a = g.make(r), b = g.make(r);
      EXPECT_EQ(a.ids.context, b.ids.context) << f.name << " " << t.name;
      EXPECT_EQ(a.ids.question, b.ids.question) << f.name << " " << t.name;
      EXPECT_EQ(a.expected, b.expected) << t.name;
      EXPECT_EQ(a.continuation, b.continuation) << t.name;
      r.seed = 8;
      const Sample c = g.make(r);
      if (t.kind == TaskKind::Fidelity) {
        EXPECT_EQ(c.id, a.id);  // 14 file starts: another seed may pick the same; compare the seeds instead
        EXPECT_NE(c.seed, a.seed);
      } else {
        EXPECT_NE(c.ids.context, a.ids.context) << f.name << " " << t.name;
        EXPECT_NE(c.expected, a.expected) << f.name << " " << t.name;
      }
      // A generator made afresh gives the same sample (no hidden state between samples).
      Generator g2(pf);
      EXPECT_EQ(g2.make({t.name, 1024, 7, 2, r.depth}).ids.context, a.ids.context) << t.name;
    }
  }
}

TEST(Generators, ExactTokenLengths) {
  for (const Fmt& f : formats()) {
    PromptFormat pf(*f.engine, f.mode);
    Generator g(pf);
    const int n = f.name == "smollm2/base" ? 1 : 2;
    for (const auto& t : all_tasks()) {
      for (int64_t len : {1024, 3000}) {
        for (int i = 0; i < n; ++i) {
          const Sample s = g.make({t.name, len, 11, i, t.kind == TaskKind::NiahGrid ? 0.3 : -1});
          EXPECT_EQ(static_cast<int64_t>(s.ids.size()), len - t.gen_tokens) << f.name << " " << s.id;
          EXPECT_EQ(s.gen_tokens, t.gen_tokens);
          EXPECT_FALSE(s.ids.context.empty());
          if (t.kind == TaskKind::Fidelity) {
            EXPECT_EQ(s.continuation.size(), static_cast<size_t>(t.gen_tokens) + 1) << s.id;
          } else {
            EXPECT_FALSE(s.ids.question.empty()) << s.id;
            EXPECT_FALSE(s.expected.empty()) << s.id;
            EXPECT_FALSE(s.questions.empty()) << s.id;
          }
        }
      }
    }
  }
}

// --answer-prefix off: the question ends without RULER's answer prefix (as users ask), the
// context is the same text, and the length is still exact.
TEST(Generators, WithoutTheAnswerPrefix) {
  for (const Fmt& f : formats()) {
    PromptFormat with(*f.engine, f.mode), without(*f.engine, f.mode, false);
    EXPECT_EQ(without.name(), with.name() + ", no answer prefix");
    Generator gw(with), go(without);
    const Sample a = gw.make({"niah_single_1", 1024, 5, 0, -1}), b = go.make({"niah_single_1", 1024, 5, 0, -1});
    EXPECT_EQ(static_cast<int64_t>(b.ids.size()), 1024 - b.gen_tokens) << f.name;
    EXPECT_EQ(a.expected, b.expected) << f.name;
    const std::string qa = with.tokenizer().decode(a.ids.question), qb = without.tokenizer().decode(b.ids.question);
    EXPECT_NE(qa.find("mentioned in the provided text is"), std::string::npos) << f.name << ": " << qa;
    EXPECT_EQ(qb.find("mentioned in the provided text is"), std::string::npos) << f.name << ": " << qb;
    EXPECT_LT(b.ids.question.size(), a.ids.question.size()) << f.name;
  }
}

TEST(Generators, LongerLengthsOnTheRealTokenizer) {
  auto e = etest::smollm2();
  if (!e) GTEST_SKIP() << "SmolLM2 not in the model cache (scripts/get-model.sh smollm2)";
  PromptFormat pf(*e, ChatMode::Auto);
  Generator g(pf);
  for (const auto& t : all_tasks()) {
    const Sample s = g.make({t.name, 8192, 3, 0, t.kind == TaskKind::NiahGrid ? 0.9 : -1});
    EXPECT_EQ(static_cast<int64_t>(s.ids.size()), 8192 - t.gen_tokens) << s.id;
  }
}

TEST(Generators, TooShortLengthIsAnError) {
  PromptFormat pf(*etest::llama_tiny(), ChatMode::Off);
  Generator g(pf);
  EXPECT_THROW(g.make({"niah_single_2", 150, 1, 0, -1}), Error);  // the template alone is longer
  EXPECT_THROW(g.make({"niah_single_2", 100, 1, 0, -1}), Error);  // not longer than gen_tokens
  EXPECT_THROW(g.make({"nosuch", 1024, 1, 0, -1}), Error);
  EXPECT_THROW(g.make({"niah_grid", 1024, 1, 0, -1}), Error);  // needs a depth
  EXPECT_THROW(g.make({"niah_grid", 1024, 1, 0, 1.5}), Error);
  EXPECT_THROW(g.make({"niah_single_1", 1024, 1, 0, 0.5}), Error);  // depth only for the grid
}

TEST(Generators, GridNeedleAtTheRequestedDepthOnASentenceBoundary) {
  for (const Fmt& f : formats()) {
    PromptFormat pf(*f.engine, f.mode);
    Generator g(pf);
    for (int64_t len : {1024, 4096}) {
      for (double d : {0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0}) {
        const Sample s = g.make({"niah_grid", len, 5, 0, d});
        EXPECT_NEAR(s.depth_actual, d, 0.05) << f.name << " " << s.id;
        const std::string text = s.context_text;
        const size_t at = text.find("One of the special magic numbers for ");
        ASSERT_NE(at, std::string::npos) << s.id;
        // Preceded by the end of a sentence (". ") or by the instruction line.
        const std::string before = text.substr(at >= 2 ? at - 2 : 0, 2);
        EXPECT_TRUE(before == ". " || before == "\"." || before == ".\n" || text[at - 1] == ' ' || text[at - 1] == '\n')
            << s.id << ": '" << before << "'";
        if (d > 0.05 && d < 0.95) {
          EXPECT_TRUE(before == ". " || before.back() == ' ') << s.id;
        }
        // Followed by a sentence start (or the end of the context).
        const size_t end = text.find('.', at + 40) + 1;
        if (end < text.size()) {
          EXPECT_EQ(text[end], ' ') << s.id;
        }
      }
    }
  }
}

TEST(Generators, NiahAnswersOccurExactlyOnce) {
  for (const Fmt& f : formats()) {
    PromptFormat pf(*f.engine, f.mode);
    Generator g(pf);
    for (const std::string& task : ruler_task_names()) {
      if (task.rfind("niah", 0) != 0) continue;
      for (int i = 0; i < 3; ++i) {
        const Sample s = g.make({task, 2048, 21, i, -1});
        const std::string text = full_text(s);
        const size_t want_values = task == "niah_multivalue" || task == "niah_multiquery" ? 4 : 1;
        EXPECT_EQ(s.expected.size(), want_values) << s.id;
        for (const auto& v : s.expected) EXPECT_EQ(count_occurrences(text, v), 1u) << s.id << " " << v;
        // Needles of the sample: one per key (x values); multi-question: one question per key.
        const size_t keys = task == "niah_multikey_1" || task == "niah_multiquery" ? 4 : 1;
        EXPECT_EQ(s.questions.size(), keys) << s.id;
        for (const Question& q : s.questions) {
          EXPECT_FALSE(q.ids.empty());
          for (const auto& v : q.expected) EXPECT_EQ(count_occurrences(text, v), 1u) << s.id << " " << v;
        }
        if (task == "niah_single_1") {
          EXPECT_NE(text.find("The grass is green. The sky is blue."), std::string::npos);
        }
        if (task == "niah_multikey_2" || task == "niah_multikey_3") {
          // The haystack is needles: many "One of the special magic", the asked key once among them.
          EXPECT_GT(count_occurrences(s.context_text, "One of the special magic"), 20u) << s.id;
        }
        // The question names the asked key(s); the singular template when one value is asked.
        if (want_values == 1)
          EXPECT_NE(s.question_text.find("What is the special magic"), std::string::npos) << s.question_text;
        else
          EXPECT_NE(s.question_text.find("What are all the special magic"), std::string::npos) << s.question_text;
      }
    }
  }
}

TEST(Generators, VariableTrackingChainAsDefined) {
  for (const Fmt& f : formats()) {
    PromptFormat pf(*f.engine, f.mode);
    Generator g(pf);
    const Sample s = g.make({"vt", 2048, 4, 0, -1});
    ASSERT_EQ(s.expected.size(), 5u);
    const std::string text = full_text(s);
    // "VAR <first> = <5 digits>" (parsed by hand: GCC 12's <regex> trips -Wmaybe-uninitialized
    // under ASan at -O2).
    const std::string head = "VAR " + s.expected[0] + " = ";
    size_t at = text.find(head);
    while (at != std::string::npos &&
           !(text.size() >= at + head.size() + 5 && std::all_of(text.begin() + static_cast<long>(at + head.size()),
                                                                text.begin() + static_cast<long>(at + head.size() + 5),
                                                                [](char c) { return c >= '0' && c <= '9'; })))
      at = text.find(head, at + 1);
    ASSERT_NE(at, std::string::npos) << text.substr(0, 400);
    const std::string value = text.substr(at + head.size(), 5);
    EXPECT_EQ(count_occurrences(text, "VAR " + s.expected[0] + " = " + value), 1u);
    for (size_t j = 1; j < 5; ++j)
      EXPECT_EQ(count_occurrences(text, "VAR " + s.expected[j] + " = VAR " + s.expected[j - 1]), 1u) << j;
    for (const auto& v : s.expected) EXPECT_EQ(v.size(), 5u);
    EXPECT_NE(s.question_text.find("assigned the value " + value), std::string::npos);
    // The in-context example (3-letter variables) comes first, with its answer.
    EXPECT_LT(text.find("VAR "), text.find("VAR " + s.expected[0]));
  }
}

// Counts the entries "N. word" of the last numbered list in `text`.
std::map<std::string, int> last_list_counts(const std::string& text) {
  const size_t at = text.rfind("Memorize the ones that appear most often.\n");
  std::map<std::string, int> c;
  const std::string list = text.substr(at, text.find("\nQuestion:", at) - at);
  // Entries "<digits>. <lowercase word>", parsed by hand (see above).
  for (size_t i = 0; i < list.size();) {
    size_t j = i;
    while (j < list.size() && list[j] >= '0' && list[j] <= '9') ++j;
    if (j > i && j + 1 < list.size() && list[j] == '.' && list[j + 1] == ' ') {
      size_t k = j + 2;
      while (k < list.size() && list[k] >= 'a' && list[k] <= 'z') ++k;
      if (k > j + 2) ++c[list.substr(j + 2, k - j - 2)];
      i = k;
    } else {
      i = j > i ? j : i + 1;
    }
  }
  return c;
}

TEST(Generators, CommonWordsCountsAsDefined) {
  for (const Fmt& f : formats()) {
    PromptFormat pf(*f.engine, f.mode);
    Generator g(pf);
    for (int64_t len : {2048, 4096}) {
      const Sample s = g.make({"cwe", len, 9, 1, -1});
      ASSERT_EQ(s.expected.size(), 10u);
      const int freq = len < 4096 ? 6 : 30, rare = len < 4096 ? 1 : 3;
      const auto counts = last_list_counts(s.context_text);
      for (const auto& w : s.expected) EXPECT_EQ(counts.at(w), freq) << s.id << " " << w;
      for (const auto& [w, n] : counts) {
        if (std::find(s.expected.begin(), s.expected.end(), w) != s.expected.end()) continue;
        EXPECT_LE(n, rare) << s.id << " " << w;  // a word of the pad at the end appears once
      }
      // The example's words are not in the list.
      const std::string ex = s.context_text.substr(0, s.context_text.rfind("Below is a numbered list"));
      EXPECT_NE(ex.find("1. "), std::string::npos);
    }
  }
}

TEST(Generators, FrequentWordsAnswerIsTheThreeMostFrequent) {
  for (const Fmt& f : formats()) {
    PromptFormat pf(*f.engine, f.mode);
    Generator g(pf);
    const Sample s = g.make({"fwe", 2048, 13, 0, -1});
    ASSERT_EQ(s.expected.size(), 3u);
    std::map<std::string, int> c;
    const size_t from = s.context_text.find("coded words. ") + 13;
    std::istringstream in(s.context_text.substr(from));
    for (std::string w; in >> w;) ++c[w];
    std::vector<std::pair<int, std::string>> byn;
    for (const auto& [w, n] : c)
      if (w != "...") byn.push_back({n, w});
    std::sort(byn.rbegin(), byn.rend());
    ASSERT_GE(byn.size(), 4u);
    EXPECT_GT(c.at("..."), byn[0].first);  // the top rank is the noise "..."
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(byn[i].second, s.expected[i]) << i;
    EXPECT_GT(byn[2].first, byn[3].first);  // strictly more frequent than the fourth
    for (const auto& w : s.expected) EXPECT_EQ(w.size(), 6u);
  }
}

TEST(Generators, FidelityIsContiguousRealText) {
  PromptFormat pf(*etest::llama_tiny(), ChatMode::Off);
  Generator g(pf);
  const Sample s = g.make({"fidelity", 2048, 1, 0, -1});
  ASSERT_EQ(s.ids.context.size(), 2048u - 256u);
  ASSERT_EQ(s.continuation.size(), 257u);
  EXPECT_EQ(s.ids.context[0], pf.tokenizer().bos());
  const std::string cont = pf.tokenizer().decode(s.continuation);
  EXPECT_GT(cont.size(), 400u);  // real words, not padding
  // No line of the continuation (longer than a few words) is already in the context: the
  // near-copies among the licences (GFDL-1.2 / 1.3, LGPL-2 / 2.1) are dropped line by line.
  const std::string ctx = pf.tokenizer().decode(s.ids.context);
  size_t a = cont.find('\n') == std::string::npos ? cont.size() : cont.find('\n') + 1;  // the first may be cut
  int checked = 0;
  while (a < cont.size()) {
    const size_t b = cont.find('\n', a);
    if (b == std::string::npos) break;  // the last may be cut too
    const std::string line = cont.substr(a, b - a);
    if (line.size() > 30) {
      EXPECT_EQ(ctx.find(line), std::string::npos) << "repeated: " << line;
      ++checked;
    }
    a = b + 1;
  }
  EXPECT_GT(checked, 3);
  // Deterministic for a seed; another seed starts elsewhere.
  EXPECT_EQ(g.make({"fidelity", 2048, 1, 0, -1}).ids.context, s.ids.context);
}

TEST(Generators, ChatFormatWrapsTheTaskInTheTemplate) {
  auto e = etest::smollm2();
  if (!e) GTEST_SKIP() << "SmolLM2 not in the model cache";
  PromptFormat pf(*e, ChatMode::Auto);
  EXPECT_TRUE(pf.chat());
  Generator g(pf);
  const Sample s = g.make({"niah_single_2", 1024, 1, 0, -1});
  EXPECT_EQ(s.context_text.rfind("<|im_start|>", 0), 0u) << s.context_text.substr(0, 80);
  EXPECT_NE(s.question_text.find("<|im_end|>\n<|im_start|>assistant\n The special magic number for "),
            std::string::npos)
      << s.question_text;
  EXPECT_EQ(s.question_text.substr(s.question_text.size() - 3), " is");
  PromptFormat base(*e, ChatMode::Off);
  EXPECT_FALSE(base.chat());
  EXPECT_EQ(base.name(), "base");
  // A base model (no chat template in the GGUF): auto falls back to the base format.
  PromptFormat tiny(*etest::llama_tiny(), ChatMode::Auto);
  EXPECT_FALSE(tiny.chat());
}

// The followup protocol's ids: question 0's expected answer, then the next key's question as a
// follow-up (a new user turn of the template in the chat format), ending in its answer prefix.
TEST(Generators, FollowUpIdsAnswerTheFirstQuestionThenAskTheNext) {
  for (const Fmt& f : formats()) {
    PromptFormat pf(*f.engine, f.mode);
    Generator g(pf);
    const Sample s = g.make({"niah_multikey_1", 2048, 5, 0, -1});
    ASSERT_EQ(s.questions.size(), 4u) << f.name;
    EXPECT_TRUE(s.questions[0].follow_up.empty()) << f.name;
    const Tokenizer& tok = f.engine->tokenizer();
    for (size_t i = 1; i < s.questions.size(); ++i) {
      const Question& q = s.questions[i];
      ASSERT_FALSE(q.follow_up.empty()) << f.name;
      std::string text;
      for (int32_t t : q.follow_up) text += tok.token_to_piece(t, true);
      // Starts with question 0's value, ends with this question's answer prefix, names its key.
      ASSERT_EQ(s.questions[0].expected.size(), 1u);
      EXPECT_LE(text.find(s.questions[0].expected[0] + "."), 2u) << f.name << ": " << text;
      EXPECT_NE(text.find("What is the special magic number for"), std::string::npos) << f.name << ": " << text;
      EXPECT_EQ(text.rfind(" mentioned in the provided text is"), text.size() - 34) << f.name << ": " << text;
      if (f.mode == ChatMode::Off) {
        EXPECT_EQ(text.find("<|im_start|>"), std::string::npos) << text;
      } else {
        EXPECT_NE(text.find("<|im_end|>\n<|im_start|>user\n"), std::string::npos) << text;
        EXPECT_NE(text.find("<|im_start|>assistant\n The special magic number for"), std::string::npos) << text;
      }
    }
  }
}

TEST(Haystack, NaturalTextIsLongAndDistinct) {
  const TextSource& t = natural_text();
  EXPECT_GE(t.files.size(), 10u);
  EXPECT_GT(t.collapsed.size(), 150000u);
  EXPECT_EQ(t.collapsed.find("  "), std::string::npos);
  EXPECT_EQ(t.sha256.size(), 64u);
  // >= 16K tokens of distinct text: count tokens over distinct sentences.
  std::set<std::string> sentences;
  const auto starts = sentence_starts(t.collapsed);
  for (size_t i = 0; i + 1 < starts.size(); ++i)
    sentences.insert(t.collapsed.substr(starts[i], starts[i + 1] - starts[i]));
  std::string distinct;
  for (const auto& s : sentences) distinct += s;
  const auto n = etest::llama_tiny()->tokenizer().encode(distinct, false, false).size();
  EXPECT_GT(n, 16384u) << "tokens of distinct sentences";
}

TEST(Haystack, SentenceStarts) {
  const std::string t = "First one. Second, e.g. this. Third? \"Fourth.\" Fifth (see No. 5). 6 is next. a lower.";
  const auto s = sentence_starts(t);
  std::vector<std::string> got;
  for (size_t i = 0; i < s.size(); ++i) got.push_back(t.substr(s[i], (i + 1 < s.size() ? s[i + 1] : t.size()) - s[i]));
  const std::vector<std::string> want = {"First one. ",  "Second, e.g. this. ", "Third? ",
                                         "\"Fourth.\" ", "Fifth (see No. 5). ", "6 is next. a lower."};
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace snapkv::eval
