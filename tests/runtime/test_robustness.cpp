// Misuse and failure paths of the runtime: a rejected or failed step leaves no trace in the
// sequences it did not run, objects outlive what they were made from safely, and hostile values
// are refused with snapkv::Error instead of undefined behaviour.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

#include "runtime/runtime_util.h"

namespace snapkv {
namespace {

using rtest::prompt;

// Engine::prefill whose step is rejected (here: the sequence belongs to another engine) drops
// the prefill; the sequence must then be exactly as before: no press in its statistics and no
// claim to retained window queries that were never computed (compress() used to read them).
TEST(Robustness, RejectedPrefillLeavesTheSequenceAsItWas) {
  auto e = rtest::stories(), other = rtest::stories();
  const int V = e->info().n_vocab;
  const auto p = prompt(120, V, 31);
  Workspace ws(*e);
  auto seq = e->new_sequence({});
  PrefillOptions po;
  po.press = PressSpec::parse("snapkv:budget=64,window=16");
  po.retain_window = 16;
  EXPECT_THROW(other->prefill(*seq, p, po, ws), Error);  // the workspace and sequence are e's
  EXPECT_FALSE(seq->prefilling());
  EXPECT_EQ(seq->n_past(), 0);
  EXPECT_EQ(seq->stats().press, "none");
  EXPECT_FALSE(seq->stats().compressed);
  EXPECT_EQ(seq->stats().budget, 0);
  EXPECT_EQ(seq->stats().n_prompt_tokens, 0);
  EXPECT_EQ(seq->stats().compression_note, "");

  // The same prompt again, without retained queries: compress() has nothing to work from.
  e->prefill(*seq, p, {}, ws);
  EXPECT_EQ(seq->n_past(), 120);
  EXPECT_THROW(seq->compress(PressSpec::parse("snapkv:budget=64,window=16"), ws), Error);
  EXPECT_EQ(seq->n_past(), 120);

  // And with them the sequence compresses as a fresh one does.
  auto fresh = e->new_sequence({});
  PrefillOptions keep;
  keep.retain_window = 16;
  e->prefill(*fresh, p, keep, ws);
  fresh->compress(PressSpec::parse("snapkv:budget=64,window=16"), ws);
  EXPECT_TRUE(fresh->stats().compressed);
}

// compress() with a press that keeps the whole prompt (it fits the budget) compresses nothing,
// as a prefill with that press does: the sequence may still be compressed afterwards (a prefill
// with that press leaves the same freedom), and its statistics never claim a compression.
TEST(Robustness, CompressThatKeepsEverythingIsNotOneShot) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  Workspace ws(*e);
  auto seq = e->new_sequence({});
  PrefillOptions po;
  po.retain_window = 16;
  e->prefill(*seq, prompt(150, V, 4), po, ws);
  const size_t full = seq->stats().kv_cache_bytes;
  seq->compress(PressSpec::parse("snapkv:budget=4096,window=16"), ws);
  EXPECT_FALSE(seq->stats().compressed);
  EXPECT_FALSE(seq->stats().compression_note.empty());
  EXPECT_EQ(seq->stats().kv_cache_bytes, full);
  seq->compress(PressSpec::parse("snapkv:budget=64,window=16"), ws);
  EXPECT_TRUE(seq->stats().compressed);
  EXPECT_LT(seq->stats().kv_cache_bytes, full);
  EXPECT_THROW(seq->compress(PressSpec::parse("snapkv:budget=32,window=16"), ws), Error);
}

// An error in the middle of a step that is not one item's own snapkv::Error (here the progress
// callback of a prefill item throws a std::runtime_error at its third layer) resets the prefill
// item's sequence, takes the decode row's back to where it stood before the step, leaves the
// others alone, and leaves the workspace usable: the same sequences served again give the results
// they give alone.
TEST(Robustness, FailureInTheMiddleOfAStepResetsTheBatchOnly) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const auto pa = prompt(30, V, 1), pb = prompt(100, V, 2), pc = prompt(40, V, 3);
  const auto alone_a = rtest::run_alone(*e, pa, "none", 4, KVType::F16);
  Workspace ws(*e);
  auto a = e->new_sequence({}), b = e->new_sequence({}), c = e->new_sequence({});
  const int32_t ta = argmax(e->prefill(*a, pa, {}, ws));
  e->prefill(*c, pc, {}, ws);
  const size_t c_bytes = c->stats().kv_cache_bytes;
  for (const int64_t budget : {int64_t{0}, int64_t{150}}) {
    PrefillOptions po;
    po.press = PressSpec::parse("snapkv:budget=40,window=8");
    po.retain_window = 8;
    po.progress = [](int done, int) {
      if (done == 3) throw std::runtime_error("progress callback failed");
    };
    b->begin_prefill(pb, po);
    Batch batch;
    bool thrown = false;
    std::unique_ptr<Sequence> a_before;  // a as it stood before the step
    for (int s = 0; s < 10 && !thrown; ++s) {
      batch.clear();
      a_before = a->fork();
      batch.add(*a, ta);
      batch.add_prefill(*b, budget);
      try {
        e->step(batch, ws);
      } catch (const std::runtime_error& err) {
        EXPECT_STREQ(err.what(), "progress callback failed");
        thrown = true;
      }
    }
    ASSERT_TRUE(thrown) << budget;
    // The decode row's sequence is taken back to where it stood (its entries of the failed step
    // dropped), not emptied; the prefill item's is reset.
    EXPECT_EQ(a->n_past(), a_before->n_past()) << budget;
    EXPECT_FALSE(a->prefilling()) << budget;
    rtest::expect_same_cache(a->kv_cache(), a_before->kv_cache(), "a failed step taken back");
    EXPECT_EQ(a->stats().kv_cache_bytes, a_before->stats().kv_cache_bytes) << budget;
    EXPECT_THROW((void)batch.logits(0), Error) << "a row of the failed step claims logits";
    {  // and it decodes on exactly as the copy taken before the step
      Batch x, y;
      x.add(*a, ta);
      y.add(*a_before, ta);
      e->step(x, ws);
      e->step(y, ws);
      EXPECT_TRUE(std::equal(x.logits(0).begin(), x.logits(0).end(), y.logits(0).begin())) << budget;
    }
    for (const Sequence* s : {b.get()}) {
      EXPECT_EQ(s->n_past(), 0) << budget;
      EXPECT_FALSE(s->prefilling()) << budget;
      EXPECT_EQ(s->stats().kv_cache_bytes, 0u) << budget;
      EXPECT_EQ(s->stats().press, "none") << budget;
      EXPECT_TRUE(s->prefill_logits().empty()) << budget;
      EXPECT_THROW(const_cast<Sequence*>(s)->compress(PressSpec::parse("snapkv:budget=40,window=8"), ws), Error);
    }
    EXPECT_EQ(c->n_past(), 40);
    EXPECT_EQ(c->stats().kv_cache_bytes, c_bytes);
    // Served again on the same workspace: as alone.
    a = e->new_sequence({});
    const auto l = e->prefill(*a, pa, {}, ws);
    EXPECT_TRUE(std::equal(l.begin(), l.end(), alone_a.logits[0].begin()));
    Batch one;
    one.add(*a, alone_a.tokens[0]);
    e->step(one, ws);
    EXPECT_TRUE(std::equal(one.logits(0).begin(), one.logits(0).end(), alone_a.logits[1].begin()));
  }
}

// One prefill item whose cold tier cannot write its file (a full disk) fails alone: its sequence
// is reset and Batch::prefill_error says why, while a decode row and another prefill item of the
// same step finish exactly as alone (the server answered every request of the step 500 before).
// Engine::prefill, one item, throws it (ColdTierIOError).
TEST(Robustness, AColdTierDiskFullFailsOnlyItsOwnPrefillItem) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  const auto pa = prompt(30, V, 1), pb = prompt(100, V, 2), pc = prompt(60, V, 3);
  const std::string press = "snapkv:budget=24,window=8";
  const auto alone_a = rtest::run_alone(*e, pa, "none", 1, KVType::F16);
  const auto alone_c = rtest::run_alone(*e, pc, press, 0, KVType::F16);
  const auto dir = std::filesystem::temp_directory_path() / ("snapkv_full_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Workspace ws(*e);
  SequenceOptions so;
  so.kv_type = KVType::F16;
  so.n_ctx = 2048;
  SequenceOptions cold = so;
  cold.cold_tier = parse_cold_tier("disk:" + dir.string());
  auto a = e->new_sequence(so), b = e->new_sequence(cold), c = e->new_sequence(so);
  e->prefill(*a, pa, {}, ws);
  PrefillOptions po;
  po.press = PressSpec::parse(press);
  b->begin_prefill(pb, po);
  c->begin_prefill(pc, po);
  Batch batch;
  batch.add(*a, alone_a.tokens[0]);
  const int ib = batch.add_prefill(*b);
  const int ic = batch.add_prefill(*c);
  {
    rtest::NoFileWrites full;
    ASSERT_NO_THROW(e->step(batch, ws));
  }
  EXPECT_NE(batch.prefill_error(ib).find("cold tier file in " + dir.string()), std::string::npos)
      << batch.prefill_error(ib);
  EXPECT_FALSE(batch.prefill_done(ib));
  EXPECT_EQ(b->n_past(), 0);
  EXPECT_FALSE(b->prefilling());
  EXPECT_EQ(b->stats().kv_cache_bytes, 0u);
  EXPECT_TRUE(batch.prefill_error(ic).empty());
  ASSERT_TRUE(batch.prefill_done(ic));
  const auto lc = c->prefill_logits();
  EXPECT_TRUE(std::equal(lc.begin(), lc.end(), alone_c.logits[0].begin(), alone_c.logits[0].end()));
  EXPECT_TRUE(std::equal(batch.logits(0).begin(), batch.logits(0).end(), alone_a.logits[1].begin()));
  {
    rtest::NoFileWrites full;
    EXPECT_THROW(e->prefill(*b, pb, po, ws), ColdTierIOError);
  }
  EXPECT_EQ(b->n_past(), 0);
  EXPECT_FALSE(b->prefilling());
  std::filesystem::remove_all(dir);
}

// A batch stepped again without clear(): a step that fails leaves no row claiming the previous
// step's logits (they belong to tokens that were not run this time).
TEST(Robustness, FailedStepLeavesNoStaleLogits) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  Workspace ws(*e);
  SequenceOptions so;
  so.n_ctx = 12;
  auto a = e->new_sequence(so);
  e->prefill(*a, prompt(11, V, 5), {}, ws);
  Batch b;
  b.add(*a, 7);
  e->step(b, ws);
  EXPECT_EQ(b.logits(0).size(), static_cast<size_t>(V));
  EXPECT_THROW(e->step(b, ws), Error);  // the context is full now
  EXPECT_THROW(b.logits(0), Error);
  EXPECT_EQ(a->n_past(), 12);
}

// A workspace keeps its engine's model alive: with a raw pointer, a model loaded later at the
// freed one's address would pass step()'s "made for this engine" check with buffers sized for
// another model.
TEST(Robustness, WorkspaceKeepsItsModelAlive) {
  auto e = rtest::stories();
  std::weak_ptr<const Model> model = e->model_ptr();
  auto ws = std::make_unique<Workspace>(*e);
  e.reset();
  EXPECT_FALSE(model.expired());
  auto e2 = rtest::stories();
  auto seq = e2->new_sequence({});
  Batch b;
  b.add(*seq, 1);
  EXPECT_THROW(e2->step(b, *ws), Error);
  EXPECT_EQ(seq->n_past(), 0);
  ws.reset();
  EXPECT_TRUE(model.expired());
}

GenerateOptions greedy(int64_t n) {
  GenerateOptions o;
  o.n_predict = n;
  o.sampling.temp = 0;
  o.ignore_eos = true;
  return o;
}

struct GenRun {
  GenerateResult r;
  std::string streamed;
  int final_calls = 0;
};

GenRun run(const Engine& e, Workspace& ws, const std::vector<int32_t>& ids, GenerateOptions o) {
  GenRun out;
  o.on_token = [&out](int32_t id, std::string_view t) {
    out.streamed += t;
    out.final_calls += id < 0 ? 1 : 0;
    return true;
  };
  auto seq = e.new_sequence({});
  out.r = generate(e, *seq, ids, {}, o, ws);
  return out;
}

// Stop strings at the edges: matching the first token, empty ones (ignored), one that is a
// prefix of another, one that the whole text is a prefix of (held back to the end, then
// streamed), overlapping candidates, invalid UTF-8 (refused: it could
// cut the text inside a character, and the stream promises valid UTF-8).
TEST(Robustness, StopStringEdges) {
  auto e = rtest::stories();
  const auto ids = e->tokenizer().encode("Once upon a time", true, false);
  Workspace ws(*e);
  const GenRun full = run(*e, ws, ids, greedy(16));
  ASSERT_GT(full.r.text.size(), 12u);
  const std::string first = e->tokenizer().token_to_piece(full.r.tokens[0]);
  ASSERT_FALSE(first.empty());

  GenerateOptions o = greedy(16);
  o.stop = {first};
  GenRun r = run(*e, ws, ids, o);
  EXPECT_EQ(r.r.stop_reason, StopReason::StopString);
  EXPECT_EQ(r.r.text, "");
  EXPECT_EQ(r.streamed, "");
  EXPECT_EQ(r.r.tokens.size(), 1u);
  EXPECT_EQ(r.final_calls, 1);

  o.stop = {"", ""};
  r = run(*e, ws, ids, o);
  EXPECT_EQ(r.r.stop_reason, StopReason::NPredict);
  EXPECT_EQ(r.r.text, full.r.text);
  EXPECT_EQ(r.streamed, full.r.text);

  o.stop = {full.r.text + "zzz"};
  r = run(*e, ws, ids, o);
  EXPECT_EQ(r.r.stop_reason, StopReason::NPredict);
  EXPECT_EQ(r.r.text, full.r.text);
  EXPECT_EQ(r.streamed, full.r.text);
  EXPECT_EQ(r.final_calls, 1);

  // Completed by the same token: the earliest match wins. A longer candidate that began earlier
  // but is not complete yet does not delay the stop.
  o.stop = {full.r.text.substr(4, 3), full.r.text.substr(3, 4)};
  r = run(*e, ws, ids, o);
  EXPECT_EQ(r.r.stop_reason, StopReason::StopString);
  EXPECT_EQ(r.r.text, full.r.text.substr(0, 3));
  EXPECT_EQ(r.streamed, r.r.text);
  o.stop = {full.r.text.substr(3, 12), full.r.text.substr(5, 2)};
  r = run(*e, ws, ids, o);
  EXPECT_EQ(r.r.text, full.r.text.substr(0, 5));
  EXPECT_EQ(r.streamed, r.r.text);

  for (const std::string& bad : {std::string("\xa9"), std::string("ab\xc3"), std::string("\xff\xfe")}) {
    o.stop = {"fine", bad};
    auto seq = e->new_sequence({});
    EXPECT_THROW(generate(*e, *seq, ids, {}, o, ws), Error);
    EXPECT_EQ(seq->n_past(), 0);
  }
}

bool valid_utf8(const std::string& s) {
  std::string v;
  append_valid_utf8(v, s, false);
  return v == s;
}

// Multi-byte text (Gemma 3 writing Japanese): every streamed piece is valid UTF-8, the stream
// equals the text, and a stop string made of multi-byte characters (spanning tokens or not)
// cuts the text exactly before it.
TEST(Robustness, GemmaMultiByteStreamingAndStops) {
  auto e = rtest::gemma();
  if (!e) GTEST_SKIP() << "Gemma 3 270M not in the model cache (scripts/get-model.sh)";
  Workspace ws(*e);
  const auto ids = e->tokenizer().encode(
      "<start_of_turn>user\n日本の首都について日本語で三文で説明してください。<end_of_turn>\n<start_of_turn>model\n",
      true, true);
  std::vector<std::string> pieces;
  GenerateOptions o = greedy(24);
  o.ignore_eos = false;
  o.on_token = [&](int32_t, std::string_view t) {
    pieces.emplace_back(t);
    return true;
  };
  auto seq = e->new_sequence({});
  const GenerateResult full = generate(*e, *seq, ids, {}, o, ws);
  std::string streamed;
  for (const auto& p : pieces) {
    EXPECT_TRUE(valid_utf8(p)) << p;
    streamed += p;
  }
  EXPECT_EQ(streamed, full.text);
  ASSERT_TRUE(valid_utf8(full.text));
  // The first multi-byte character past the first byte, and the two characters from there.
  size_t at = 1;
  while (at < full.text.size() && static_cast<unsigned char>(full.text[at]) < 0xC0) ++at;  // a lead byte
  if (at >= full.text.size()) GTEST_SKIP() << "no multi-byte output: " << full.text;
  const auto char_len = [](unsigned char lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; };
  size_t end = at;
  for (int chars = 0; chars < 2 && end < full.text.size(); ++chars)
    end += static_cast<size_t>(char_len(static_cast<unsigned char>(full.text[end])));
  const std::string stop = full.text.substr(at, end - at);
  ASSERT_TRUE(valid_utf8(stop)) << stop;
  pieces.clear();
  o.stop = {stop};
  auto seq2 = e->new_sequence({});
  const GenerateResult cut = generate(*e, *seq2, ids, {}, o, ws);
  EXPECT_EQ(cut.stop_reason, StopReason::StopString);
  EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(stop)));
  streamed.clear();
  for (const auto& p : pieces) {
    EXPECT_TRUE(valid_utf8(p)) << p;
    streamed += p;
  }
  EXPECT_EQ(streamed, cut.text);
}

// generate() checks the question's ids before it prefills the context: a bad id must not leave
// the sequence holding the context (it would refuse the retry: "must be empty").
TEST(Robustness, GenerateChecksEveryIdBeforeAnyWork) {
  auto e = rtest::stories();
  const int V = e->info().n_vocab;
  Workspace ws(*e);
  auto seq = e->new_sequence({});
  const auto ctx = prompt(50, V, 8);
  for (const std::vector<int32_t>& q : {std::vector<int32_t>{5, V}, std::vector<int32_t>{-1}}) {
    EXPECT_THROW(generate(*e, *seq, ctx, q, greedy(4), ws), Error);
    EXPECT_EQ(seq->n_past(), 0);
    EXPECT_FALSE(seq->prefilling());
  }
  std::vector<int32_t> bad_ctx = ctx;
  bad_ctx.back() = V + 7;
  EXPECT_THROW(generate(*e, *seq, bad_ctx, {}, greedy(4), ws), Error);
  EXPECT_EQ(seq->n_past(), 0);
  const GenerateResult r = generate(*e, *seq, ctx, std::vector<int32_t>{5, 6}, greedy(4), ws);
  EXPECT_EQ(r.tokens.size(), 4u);
}

// Hostile press specs: every error is one printable line of bounded length (the C API hands
// it out as a C string: snapkv_last_error() promises one line), and random byte strings either
// parse into a spec that round-trips or throw snapkv::Error.
TEST(Robustness, HostilePressSpecs) {
  auto one_line = [](const std::string& spec) {
    try {
      validate_press_spec(PressSpec::parse(spec));
      return std::string("accepted");
    } catch (const Error& err) {
      const std::string m = err.what();
      for (const char ch : m) {
        const auto u = static_cast<unsigned char>(ch);
        EXPECT_TRUE(u >= 0x20 && u != 0x7f) << "control byte " << int{u} << " in: " << m;
      }
      EXPECT_LT(m.size(), 600u) << m.substr(0, 200);
      return m;
    }
  };
  for (const std::string& spec :
       {std::string("snap\nkv"), std::string("snapkv:budget=1\n2"), std::string("snapkv:budget=12\0", 17),
        std::string("snapkv:window=\x1b[31m"), std::string("snapkv:") + std::string(1 << 20, 'x'),
        std::string("snapkv:budget=") + std::string(1 << 20, '9'), std::string(1 << 20, ','),
        std::string("snapkv:budget=64,window=16,") + std::string("\xff\xfe")})
    EXPECT_NE(one_line(spec), "accepted") << spec.substr(0, 40);

  std::mt19937_64 rng(9);
  const std::string alphabet =
      "snapkvbudgetwindowratio:=,._-0123456789 \t\x01\xc3\xa9"
      "e+";
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 40, ' ');
    for (auto& ch : s) ch = alphabet[rng() % alphabet.size()];
    if (rng() % 3 == 0) s = "snapkv:" + s;
    try {
      const PressSpec spec = PressSpec::parse(s);
      EXPECT_EQ(PressSpec::parse(spec.to_string()), spec) << s;
      try {
        validate_press_spec(spec);
      } catch (const Error&) {
      }
    } catch (const Error& err) {
      EXPECT_EQ(std::string(err.what()).find('\n'), std::string::npos) << s;
    }
  }
}

}  // namespace
}  // namespace snapkv
