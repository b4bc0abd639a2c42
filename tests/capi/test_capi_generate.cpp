// C API on a real model (stories260K): snapkv_generate gives the tokens and text of the C++
// generate() and llama.cpp's greedy golden; a hand-written prefill/decode/sample loop gives the
// same; batched decode equals decoding each sequence alone; press statistics; stop strings and
// cancellation; one engine used from several threads; a sequence outliving its engine handle.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "capi/capi_test_util.h"
#include "snapkv/snapkv.h"

namespace snapkv::capitest {
namespace {

std::vector<int32_t> random_prompt(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(3, 511);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = d(rng);
  t[0] = 1;
  return t;
}

TEST(CApiGenerate, GreedyEqualsCppGenerateAndLlamaCppGolden) {
  EnginePtr e = load_stories();
  ASSERT_TRUE(e);
  const std::vector<int32_t> ids = tokenize(e.get(), "Once upon a time");
  ASSERT_EQ(ids, (std::vector<int32_t>{1, 403, 407, 261, 378}));
  SequencePtr seq = new_sequence(e.get());
  Streamed got;
  snapkv_generate_result r;
  const snapkv_generate_params p = greedy(20);
  ASSERT_EQ(snapkv_generate(seq.get(), ids.data(), ids.size(), &p, record, &got, &r), SNAPKV_OK) << snapkv_last_error();
  // llama.cpp's greedy continuation (../shared/models/golden/stories260K, prompt once_upon).
  const std::vector<int32_t> golden = {432, 383, 286, 261, 376, 298, 315, 421, 395, 317,
                                       426, 338, 401, 396, 267, 337, 410, 408, 419, 292};
  EXPECT_EQ(got.tokens, golden);
  EXPECT_EQ(got.final_calls, 1);
  EXPECT_EQ(r.n_tokens, 20);
  EXPECT_EQ(r.stop_reason, SNAPKV_STOP_N_PREDICT);
  EXPECT_EQ(r.n_prompt_tokens, 5);
  EXPECT_EQ(r.n_decode_steps, 19);
  EXPECT_GT(r.ttft_ms, 0);
  EXPECT_GT(r.prefill_ms, 0);
  EXPECT_GT(r.decode_tokens_per_s, 0);
  EXPECT_EQ(snapkv_sequence_n_past(seq.get()), 5 + 19);

  // The C++ API of the same shared library.
  EngineOptions eo;
  eo.n_threads = 2;
  auto engine = Engine::load(stories_path(), eo);
  Workspace ws(*engine);
  auto cseq = engine->new_sequence({});
  GenerateOptions o;
  o.n_predict = 20;
  o.sampling.temp = 0;
  o.ignore_eos = true;
  const GenerateResult cr = generate(*engine, *cseq, ids, {}, o, ws);
  EXPECT_EQ(got.tokens, cr.tokens);
  EXPECT_EQ(got.text, cr.text);
  EXPECT_EQ(got.text.rfind(", there was a little girl named Lily.", 0), 0u) << got.text;

  // Sampled (temp 0.8, seed 7) equals the C++ generate() too.
  snapkv_generate_params ps = snapkv_generate_params_default();
  ps.n_predict = 24;
  ps.seed = 7;
  ps.ignore_eos = 1;
  ASSERT_EQ(snapkv_sequence_reset(seq.get()), SNAPKV_OK);
  Streamed sampled;
  ASSERT_EQ(snapkv_generate(seq.get(), ids.data(), ids.size(), &ps, record, &sampled, &r), SNAPKV_OK);
  cseq->reset();
  o = GenerateOptions{};
  o.n_predict = 24;
  o.sampling.seed = 7;
  o.ignore_eos = true;
  EXPECT_EQ(sampled.tokens, generate(*engine, *cseq, ids, {}, o, ws).tokens);
}

TEST(CApiGenerate, PrefillDecodeSampleLoopEqualsGenerate) {
  EnginePtr e = load_stories();
  ASSERT_TRUE(e);
  const std::vector<int32_t> ids = tokenize(e.get(), "Lily had a red ball.");
  SequencePtr a = new_sequence(e.get());
  Streamed ref;
  const snapkv_generate_params p = greedy(12);
  ASSERT_EQ(snapkv_generate(a.get(), ids.data(), ids.size(), &p, record, &ref, nullptr), SNAPKV_OK);

  snapkv_sampler* smp = nullptr;
  ASSERT_EQ(snapkv_sampler_new(0.0f, 0, 1.0f, 0, &smp), SNAPKV_OK);
  SamplerPtr sampler(smp);
  SequencePtr b = new_sequence(e.get());
  const float* logits = nullptr;
  ASSERT_EQ(snapkv_prefill(b.get(), ids.data(), ids.size(), nullptr, &logits), SNAPKV_OK);
  std::vector<int32_t> loop;
  std::string text;
  for (int i = 0; i < 12; ++i) {
    int32_t t = -1;
    ASSERT_EQ(snapkv_sampler_sample(smp, logits, 512, &t), SNAPKV_OK);
    loop.push_back(t);
    if (i + 1 < 12) {
      ASSERT_EQ(snapkv_decode(b.get(), t, &logits), SNAPKV_OK) << snapkv_last_error();
    }
  }
  EXPECT_EQ(loop, ref.tokens);
  size_t len = 0;
  ASSERT_EQ(snapkv_detokenize(e.get(), loop.data(), loop.size(), 0, nullptr, 0, &len), SNAPKV_ERR_BUFFER_TOO_SMALL);
  std::string detok(len + 1, '\0');
  ASSERT_EQ(snapkv_detokenize(e.get(), loop.data(), loop.size(), 0, detok.data(), detok.size(), &len), SNAPKV_OK);
  detok.resize(len);
  // generate() streams the first piece with its leading space; detokenize drops it.
  EXPECT_EQ(detok, ref.text.substr(ref.text.size() - detok.size()));
  EXPECT_EQ(snapkv_sequence_n_past(b.get()), snapkv_sequence_n_past(a.get()));

  // A fork continues exactly as the original.
  snapkv_sequence* f = nullptr;
  ASSERT_EQ(snapkv_sequence_fork(b.get(), &f), SNAPKV_OK);
  SequencePtr fork(f);
  EXPECT_EQ(snapkv_sequence_n_past(fork.get()), snapkv_sequence_n_past(b.get()));
  const float* lb = nullptr;
  const float* lf = nullptr;
  ASSERT_EQ(snapkv_decode(b.get(), 42, &lb), SNAPKV_OK);
  ASSERT_EQ(snapkv_decode(fork.get(), 42, &lf), SNAPKV_OK);
  EXPECT_EQ(0, std::memcmp(lb, lf, 512 * sizeof(float)));
}

// Rows of several sequences in one step give each sequence's logits alone, bit for bit
// (stories260K has F32 weights: every kernel is row-independent).
TEST(CApiGenerate, BatchedDecodeEqualsAlone) {
  EnginePtr e = load_stories();
  ASSERT_TRUE(e);
  const std::vector<std::vector<int32_t>> prompts = {random_prompt(7, 1), random_prompt(40, 2), random_prompt(19, 3)};
  std::vector<SequencePtr> together, alone;
  for (const auto& p : prompts) {
    together.push_back(new_sequence(e.get(), 256, SNAPKV_KV_F32));
    alone.push_back(new_sequence(e.get(), 256, SNAPKV_KV_F32));
    ASSERT_EQ(snapkv_prefill(together.back().get(), p.data(), p.size(), nullptr, nullptr), SNAPKV_OK);
    ASSERT_EQ(snapkv_prefill(alone.back().get(), p.data(), p.size(), nullptr, nullptr), SNAPKV_OK);
  }
  std::vector<float> out(3 * 512);
  for (int step = 0; step < 5; ++step) {
    snapkv_sequence* rows[3] = {together[0].get(), together[1].get(), together[2].get()};
    const int32_t toks[3] = {static_cast<int32_t>(10 + step), static_cast<int32_t>(200 + step), 77};
    ASSERT_EQ(snapkv_decode_batch(rows, toks, 3, out.data(), out.size()), SNAPKV_OK) << snapkv_last_error();
    for (int i = 0; i < 3; ++i) {
      const float* l = nullptr;
      ASSERT_EQ(snapkv_decode(alone[static_cast<size_t>(i)].get(), toks[i], &l), SNAPKV_OK);
      EXPECT_EQ(0, std::memcmp(l, out.data() + i * 512, 512 * sizeof(float))) << "step " << step << " row " << i;
    }
  }
  // Two rows of one sequence decode consecutive positions; logits may be skipped.
  snapkv_sequence* rows[2] = {together[0].get(), together[0].get()};
  const int32_t toks[2] = {5, 6};
  ASSERT_EQ(snapkv_decode_batch(rows, toks, 2, nullptr, 0), SNAPKV_OK) << snapkv_last_error();
  EXPECT_EQ(snapkv_sequence_n_past(together[0].get()), 7 + 5 + 2);
}

TEST(CApiGenerate, PressStatisticsStopStringsAndCancel) {
  EnginePtr e = load_stories();
  ASSERT_TRUE(e);
  const std::vector<int32_t> ctx = random_prompt(280, 11);
  SequencePtr seq = new_sequence(e.get());
  const float* logits = nullptr;
  ASSERT_EQ(snapkv_prefill(seq.get(), ctx.data(), ctx.size(), "snapkv:budget=64,window=16", &logits), SNAPKV_OK)
      << snapkv_last_error();
  snapkv_stats st;
  ASSERT_EQ(snapkv_sequence_stats(seq.get(), &st), SNAPKV_OK);
  EXPECT_EQ(st.n_past, 280);
  EXPECT_EQ(st.compressed, 1);
  EXPECT_EQ(st.budget, 64);
  EXPECT_EQ(st.n_prompt_tokens, 280);
  EXPECT_LT(st.kv_cache_bytes, st.kv_cache_bytes_full);
  EXPECT_GE(st.peak_kv_cache_bytes, st.kv_cache_bytes);
  // The canonical spec (its defaults spelled out): starts with the name and keeps the values given.
  const std::string press = st.press;
  EXPECT_EQ(press.rfind("snapkv:", 0), 0u) << press;
  EXPECT_NE(press.find("budget=64"), std::string::npos) << press;
  EXPECT_NE(press.find("window=16"), std::string::npos) << press;
  EXPECT_STREQ(st.compression_note, "");

  // A short prompt is kept whole and the note says why.
  const std::vector<int32_t> ids = tokenize(e.get(), "Once upon a time");
  SequencePtr small = new_sequence(e.get());
  ASSERT_EQ(snapkv_prefill(small.get(), ids.data(), ids.size(), "snapkv:budget=1024", nullptr), SNAPKV_OK);
  ASSERT_EQ(snapkv_sequence_stats(small.get(), &st), SNAPKV_OK);
  EXPECT_EQ(st.compressed, 0);
  EXPECT_STRNE(st.compression_note, "");
  EXPECT_EQ(st.kv_cache_bytes, st.kv_cache_bytes_full);

  // Stop string: the text is cut before it, the stream never shows it.
  SequencePtr g = new_sequence(e.get());
  snapkv_generate_params p = greedy(24);
  const char* stops[1] = {" Lily"};
  p.stop = stops;
  p.n_stop = 1;
  Streamed s;
  snapkv_generate_result r;
  ASSERT_EQ(snapkv_generate(g.get(), ids.data(), ids.size(), &p, record, &s, &r), SNAPKV_OK);
  EXPECT_EQ(r.stop_reason, SNAPKV_STOP_STRING);
  EXPECT_EQ(s.text, ", there was a little girl named");

  // Cancel after 5 tokens; the question is appended after the compressed context.
  ASSERT_EQ(snapkv_sequence_reset(g.get()), SNAPKV_OK);
  p = greedy(50);
  p.press = "snapkv:budget=64,window=16";
  const std::vector<int32_t> q = random_prompt(10, 12);
  p.question = q.data() + 1;
  p.n_question = q.size() - 1;
  Streamed c;
  c.stop_after = 5;
  ASSERT_EQ(snapkv_generate(g.get(), ctx.data(), ctx.size(), &p, record, &c, &r), SNAPKV_OK);
  EXPECT_EQ(r.stop_reason, SNAPKV_STOP_CANCELLED);
  EXPECT_EQ(r.n_tokens, 5);
  EXPECT_EQ(r.n_prompt_tokens, 280 + 9);
  EXPECT_EQ(c.tokens.size(), 5u);
  EXPECT_EQ(c.final_calls, 1);  // the final call comes after a cancel too
  ASSERT_EQ(snapkv_sequence_stats(g.get(), &st), SNAPKV_OK);
  EXPECT_EQ(st.compressed, 1);

  // A full context ends generation without an error.
  SequencePtr tight = new_sequence(e.get(), static_cast<int64_t>(ids.size()) + 3);
  p = greedy(50);
  ASSERT_EQ(snapkv_generate(tight.get(), ids.data(), ids.size(), &p, nullptr, nullptr, &r), SNAPKV_OK);
  EXPECT_EQ(r.stop_reason, SNAPKV_STOP_CONTEXT_FULL);
  EXPECT_EQ(r.n_tokens, 4);
}

// One engine, sequences generated from four threads at once (each call borrows its own
// workspace), equal the single-threaded result; a sequence outlives its engine handle.
TEST(CApiGenerate, ConcurrentSequencesOfOneEngineAndEngineFreedFirst) {
  EnginePtr e = load_stories(1);
  ASSERT_TRUE(e);
  const std::vector<int32_t> p = random_prompt(300, 77);
  snapkv_generate_params gp = greedy(16);
  gp.press = "snapkv:budget=96,window=16";
  auto run = [&] {
    snapkv_sequence* s = nullptr;
    if (snapkv_sequence_new(e.get(), 0, SNAPKV_KV_F16, &s) != SNAPKV_OK) return std::vector<int32_t>{};
    Streamed out;
    const snapkv_status st = snapkv_generate(s, p.data(), p.size(), &gp, record, &out, nullptr);
    snapkv_sequence_free(s);
    return st == SNAPKV_OK ? out.tokens : std::vector<int32_t>{};
  };
  const std::vector<int32_t> ref = run();
  ASSERT_EQ(ref.size(), 16u);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) threads.emplace_back([&, i] { got[i] = run(); });
  for (auto& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(g, ref);

  SequencePtr seq = new_sequence(e.get());
  e.reset();  // snapkv_engine_free: the sequence keeps the model
  Streamed out;
  ASSERT_EQ(snapkv_generate(seq.get(), p.data(), p.size(), &gp, record, &out, nullptr), SNAPKV_OK);
  EXPECT_EQ(out.tokens, ref);
}

// snapkv_sequence_new_kv on a model whose head_dim (64) takes Q8_0 / Q4_0 rows: q8_0 keys with q4_0
// values and a cold tier; the bytes held are the entries x (68 + 36) bytes per KV head and layer.
// SmolLM2 from the model cache (scripts/get-model.sh smollm2); skipped without it.
TEST(CApiGenerate, MixedKeyAndValueTypesOnSmolLM2) {
  const char* dir = std::getenv("SNAPKV_MODELS");
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  const std::string path =
      (dir ? std::string(dir) : home + "/.cache/snapkv/models") + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    std::fclose(f);
  } else {
    GTEST_SKIP() << path << " missing (scripts/get-model.sh smollm2)";
  }
  snapkv_engine* raw = nullptr;
  ASSERT_EQ(snapkv_engine_load(path.c_str(), 2, &raw), SNAPKV_OK) << snapkv_last_error();
  EnginePtr e(raw);
  snapkv_sequence* s = nullptr;
  ASSERT_EQ(snapkv_sequence_new_kv(e.get(), 0, SNAPKV_KV_Q8_0, SNAPKV_KV_Q4_0, "int8", &s), SNAPKV_OK)
      << snapkv_last_error();
  SequencePtr seq(s);
  std::string text;
  for (int i = 0; i < 40; ++i) text += "The grass is green. The sky is blue. The sun is yellow. Here we go. ";
  const std::vector<int32_t> ids = tokenize(e.get(), text);
  ASSERT_GT(ids.size(), 300u);
  const float* logits = nullptr;
  ASSERT_EQ(snapkv_prefill(seq.get(), ids.data(), ids.size(), "snapkv:budget=128,window=16", &logits), SNAPKV_OK)
      << snapkv_last_error();
  snapkv_stats st{};
  ASSERT_EQ(snapkv_sequence_stats(seq.get(), &st), SNAPKV_OK);
  const uint64_t per_entry = 3 * (68 + 36);  // 3 KV heads x (Q8_0 key row + Q4_0 value row), head_dim 64
  EXPECT_EQ(st.kv_cache_bytes, uint64_t{30} * 128 * per_entry);
  EXPECT_EQ(st.kv_cache_bytes_full, uint64_t{30} * ids.size() * per_entry);
  EXPECT_GT(st.kv_cold_bytes, 0u);
  const std::vector<int32_t> q = tokenize(e.get(), " What color is the sky?", false);
  ASSERT_EQ(snapkv_prefill_reselect(seq.get(), q.data(), q.size(), &logits), SNAPKV_OK) << snapkv_last_error();
  ASSERT_EQ(snapkv_sequence_stats(seq.get(), &st), SNAPKV_OK);
  EXPECT_EQ(st.kv_cache_bytes, uint64_t{30} * (128 + q.size()) * per_entry);
}

}  // namespace
}  // namespace snapkv::capitest
