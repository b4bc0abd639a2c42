// C API error paths: every bad argument is a status with a message naming the function, never a
// crash or an exception; outputs stay untouched and sequences unchanged on failure.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "capi/capi_test_util.h"

namespace snapkv::capitest {
namespace {

TEST(CApi, VersionAndNames) {
  EXPECT_STREQ(snapkv_version(), SNAPKV_EXPECTED_VERSION);
  EXPECT_STREQ(snapkv_status_name(SNAPKV_OK), "ok");
  EXPECT_STREQ(snapkv_status_name(SNAPKV_ERR_INVALID_ARGUMENT), "invalid_argument");
  EXPECT_STREQ(snapkv_status_name(SNAPKV_ERR_IO), "io");
  EXPECT_STREQ(snapkv_status_name(SNAPKV_ERR_OUT_OF_MEMORY), "out_of_memory");
  EXPECT_STREQ(snapkv_status_name(SNAPKV_ERR_CONTEXT_FULL), "context_full");
  EXPECT_STREQ(snapkv_status_name(SNAPKV_ERR_BUFFER_TOO_SMALL), "buffer_too_small");
  EXPECT_STREQ(snapkv_status_name(SNAPKV_ERR_INTERNAL), "internal");
  EXPECT_STREQ(snapkv_status_name(c_enum<snapkv_status>(99)), "unknown");
  EXPECT_STREQ(snapkv_stop_reason_name(SNAPKV_STOP_EOS), "eos");
  EXPECT_STREQ(snapkv_stop_reason_name(SNAPKV_STOP_N_PREDICT), "n_predict");
  EXPECT_STREQ(snapkv_stop_reason_name(SNAPKV_STOP_CONTEXT_FULL), "context_full");
  EXPECT_STREQ(snapkv_stop_reason_name(SNAPKV_STOP_STRING), "stop");
  EXPECT_STREQ(snapkv_stop_reason_name(SNAPKV_STOP_CANCELLED), "cancelled");
  EXPECT_STREQ(snapkv_stop_reason_name(c_enum<snapkv_stop_reason>(-1)), "unknown");
  EXPECT_NE(snapkv_last_error(), nullptr);
}

TEST(CApi, PrefillAttentionChoice) {
  snapkv_engine* e = nullptr;
  const snapkv_status bad = SNAPKV_ERR_INVALID_ARGUMENT;
  EXPECT_EQ(snapkv_prefill_attention_supported(SNAPKV_PREFILL_EXACT), 1);
  EXPECT_EQ(snapkv_prefill_attention_supported(c_enum<snapkv_prefill_attention>(7)), 0);
  expect_error(snapkv_engine_load_ex(nullptr, 0, SNAPKV_PREFILL_EXACT, &e), bad, "snapkv_engine_load_ex",
               "path is NULL");
  expect_error(snapkv_engine_load_ex(stories_path().c_str(), 0, c_enum<snapkv_prefill_attention>(7), &e), bad,
               "snapkv_engine_load_ex", "is unknown");
  expect_error(snapkv_engine_load_ex(stories_path().c_str(), -1, SNAPKV_PREFILL_EXACT, &e), bad,
               "snapkv_engine_load_ex", "n_threads");
  EXPECT_EQ(e, nullptr);
  // INT8 prefill: any AVX2 build (this test's, where the library has it) loads it.
  if (snapkv_prefill_attention_supported(SNAPKV_PREFILL_INT8) == 1) {
    ASSERT_EQ(snapkv_engine_load_ex(stories_path().c_str(), 1, SNAPKV_PREFILL_INT8, &e), SNAPKV_OK)
        << snapkv_last_error();
    snapkv_engine_free(e);
    e = nullptr;
  }
  const int32_t bf16 = snapkv_prefill_attention_supported(SNAPKV_PREFILL_BF16);
  ASSERT_TRUE(bf16 == 0 || bf16 == 1);
  if (bf16 == 0) {
    expect_error(snapkv_engine_load_ex(stories_path().c_str(), 1, SNAPKV_PREFILL_BF16, &e), bad,
                 "snapkv_engine_load_ex", "AVX512-BF16");
    return;
  }
  // Loads; stories260K's head_dim (8) runs the exact kernel, so generation works as with exact.
  ASSERT_EQ(snapkv_engine_load_ex(stories_path().c_str(), 1, SNAPKV_PREFILL_BF16, &e), SNAPKV_OK)
      << snapkv_last_error();
  snapkv_model_info info;
  EXPECT_EQ(snapkv_engine_info(e, &info), SNAPKV_OK);
  EXPECT_EQ(info.n_threads, 1);
  snapkv_engine_free(e);
}

TEST(CApi, NullHandlesAndPointers) {
  const snapkv_status bad = SNAPKV_ERR_INVALID_ARGUMENT;
  snapkv_engine* e = nullptr;
  expect_error(snapkv_engine_load(nullptr, 0, &e), bad, "snapkv_engine_load", "path is NULL");
  expect_error(snapkv_engine_load(stories_path().c_str(), 0, nullptr), bad, "snapkv_engine_load", "out is NULL");
  snapkv_model_info info;
  expect_error(snapkv_engine_info(nullptr, &info), bad, "snapkv_engine_info");
  size_t n = 0;
  int32_t ids[4];
  char buf[8];
  int flag = 0;
  expect_error(snapkv_tokenize(nullptr, "a", 1, 1, 0, ids, 4, &n), bad, "snapkv_tokenize", "engine is NULL");
  expect_error(snapkv_token_to_piece(nullptr, 0, 0, buf, 8, &n), bad, "snapkv_token_to_piece");
  expect_error(snapkv_detokenize(nullptr, ids, 0, 0, buf, 8, &n), bad, "snapkv_detokenize");
  expect_error(snapkv_token_is_eog(nullptr, 0, &flag), bad, "snapkv_token_is_eog");
  snapkv_sequence* s = nullptr;
  expect_error(snapkv_sequence_new(nullptr, 0, SNAPKV_KV_F16, &s), bad, "snapkv_sequence_new");
  expect_error(snapkv_sequence_fork(nullptr, &s), bad, "snapkv_sequence_fork");
  expect_error(snapkv_sequence_reset(nullptr), bad, "snapkv_sequence_reset");
  EXPECT_EQ(snapkv_sequence_n_past(nullptr), -1);
  EXPECT_EQ(snapkv_sequence_n_ctx(nullptr), -1);
  const float* logits = nullptr;
  expect_error(snapkv_prefill(nullptr, ids, 1, nullptr, &logits), bad, "snapkv_prefill", "seq is NULL");
  expect_error(snapkv_decode(nullptr, 1, &logits), bad, "snapkv_decode");
  expect_error(snapkv_decode_batch(nullptr, ids, 1, nullptr, 0), bad, "snapkv_decode_batch");
  snapkv_stats stats;
  expect_error(snapkv_sequence_stats(nullptr, &stats), bad, "snapkv_sequence_stats");
  snapkv_generate_result r;
  expect_error(snapkv_generate(nullptr, ids, 1, nullptr, nullptr, nullptr, &r), bad, "snapkv_generate");
  snapkv_sampler* smp = nullptr;
  expect_error(snapkv_sampler_new(0.8f, 40, 0.95f, 1, nullptr), bad, "snapkv_sampler_new");
  int32_t tok = 0;
  float l[2] = {0, 1};
  expect_error(snapkv_sampler_sample(nullptr, l, 2, &tok), bad, "snapkv_sampler_sample");
  EXPECT_EQ(e, nullptr);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(smp, nullptr);
  // Freeing NULL is a no-op.
  snapkv_engine_free(nullptr);
  snapkv_sequence_free(nullptr);
  snapkv_sampler_free(nullptr);

  // NULL pointers next to a valid handle.
  EnginePtr eng = load_stories();
  ASSERT_TRUE(eng);
  expect_error(snapkv_engine_info(eng.get(), nullptr), bad, "snapkv_engine_info", "out is NULL");
  expect_error(snapkv_tokenize(eng.get(), nullptr, 3, 1, 0, ids, 4, &n), bad, "snapkv_tokenize", "text is NULL");
  expect_error(snapkv_tokenize(eng.get(), "a", 1, 1, 0, nullptr, 4, &n), bad, "snapkv_tokenize", "tokens is NULL");
  expect_error(snapkv_tokenize(eng.get(), "a", 1, 1, 0, ids, 4, nullptr), bad, "snapkv_tokenize", "n_tokens is NULL");
  expect_error(snapkv_token_to_piece(eng.get(), 5, 0, nullptr, 8, &n), bad, "snapkv_token_to_piece", "buf is NULL");
  expect_error(snapkv_token_to_piece(eng.get(), 5, 0, buf, 8, nullptr), bad, "snapkv_token_to_piece", "len is NULL");
  expect_error(snapkv_detokenize(eng.get(), nullptr, 2, 0, buf, 8, &n), bad, "snapkv_detokenize", "tokens is NULL");
  expect_error(snapkv_token_is_eog(eng.get(), 2, nullptr), bad, "snapkv_token_is_eog");
  expect_error(snapkv_sequence_new(eng.get(), 0, SNAPKV_KV_F16, nullptr), bad, "snapkv_sequence_new", "out is NULL");
  SequencePtr seq = new_sequence(eng.get());
  expect_error(snapkv_sequence_fork(seq.get(), nullptr), bad, "snapkv_sequence_fork", "out is NULL");
  expect_error(snapkv_sequence_stats(seq.get(), nullptr), bad, "snapkv_sequence_stats");
  expect_error(snapkv_prefill(seq.get(), nullptr, 3, nullptr, &logits), bad, "snapkv_prefill", "tokens is NULL");
  expect_error(snapkv_generate(seq.get(), nullptr, 3, nullptr, nullptr, nullptr, &r), bad, "snapkv_generate");
  snapkv_sequence* rows[2] = {seq.get(), nullptr};
  const int32_t two[2] = {5, 6};
  expect_error(snapkv_decode_batch(rows, nullptr, 2, nullptr, 0), bad, "snapkv_decode_batch", "tokens is NULL");
  expect_error(snapkv_decode_batch(rows, two, 2, nullptr, 0), bad, "snapkv_decode_batch", "seqs[1] is NULL");
  SamplerPtr sampler;
  ASSERT_EQ(snapkv_sampler_new(0, 0, 1, 0, &smp), SNAPKV_OK);
  sampler.reset(smp);
  expect_error(snapkv_sampler_sample(smp, nullptr, 2, &tok), bad, "snapkv_sampler_sample", "logits is NULL");
  expect_error(snapkv_sampler_sample(smp, l, 2, nullptr), bad, "snapkv_sampler_sample", "token is NULL");

  // A handle of the wrong kind (as a binding passing void* handles might) is refused, not used.
  auto* not_seq = reinterpret_cast<snapkv_sequence*>(smp);
  auto* not_engine = reinterpret_cast<snapkv_engine*>(seq.get());
  auto* not_sampler = reinterpret_cast<snapkv_sampler*>(eng.get());
  expect_error(snapkv_prefill(not_seq, ids, 1, nullptr, &logits), bad, "snapkv_prefill", "not a snapkv_sequence");
  expect_error(snapkv_decode(not_seq, 1, &logits), bad, "snapkv_decode", "not a snapkv_sequence");
  EXPECT_EQ(snapkv_sequence_n_past(not_seq), -1);
  expect_error(snapkv_engine_info(not_engine, &info), bad, "snapkv_engine_info", "not a snapkv_engine");
  expect_error(snapkv_sequence_new(not_engine, 0, SNAPKV_KV_F16, &s), bad, "snapkv_sequence_new");
  expect_error(snapkv_sampler_sample(not_sampler, l, 2, &tok), bad, "snapkv_sampler_sample", "not a snapkv_sampler");
  rows[1] = not_seq;
  expect_error(snapkv_decode_batch(rows, two, 2, nullptr, 0), bad, "snapkv_decode_batch", "seqs[1] is NULL or not");
  snapkv_sequence_free(not_seq);  // ignored: the sampler, the engine and the sequence stay usable
  snapkv_engine_free(not_engine);
  snapkv_sampler_free(not_sampler);
  ASSERT_EQ(snapkv_sampler_sample(smp, l, 2, &tok), SNAPKV_OK);
  EXPECT_EQ(tok, 1);
  ASSERT_EQ(snapkv_engine_info(eng.get(), &info), SNAPKV_OK);
  EXPECT_EQ(snapkv_sequence_n_past(seq.get()), 0);
}

TEST(CApi, BadModelFiles) {
  snapkv_engine* e = reinterpret_cast<snapkv_engine*>(0x1);  // must stay untouched
  expect_error(snapkv_engine_load("/no/such/dir/model.gguf", 0, &e), SNAPKV_ERR_IO, "snapkv_engine_load",
               "/no/such/dir/model.gguf");
  EXPECT_EQ(e, reinterpret_cast<snapkv_engine*>(0x1));
  const auto dir = std::filesystem::temp_directory_path() / ("snapkv_capi_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto junk = dir / "junk.gguf";
  std::ofstream(junk) << "this is not a GGUF file, just some text of a reasonable length\n";
  expect_error(snapkv_engine_load(junk.c_str(), 0, &e), SNAPKV_ERR_IO, "snapkv_engine_load", junk.string());
  const auto empty = dir / "empty.gguf";
  std::ofstream{empty};
  expect_error(snapkv_engine_load(empty.c_str(), 0, &e), SNAPKV_ERR_IO, "snapkv_engine_load");
  expect_error(snapkv_engine_load(dir.c_str(), 0, &e), SNAPKV_ERR_IO, "snapkv_engine_load");  // a directory
  std::filesystem::remove_all(dir);
  expect_error(snapkv_engine_load(stories_path().c_str(), -1, &e), SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_engine_load",
               "n_threads");
  expect_error(snapkv_engine_load(stories_path().c_str(), 5000, &e), SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_engine_load",
               "n_threads");
  EXPECT_EQ(e, reinterpret_cast<snapkv_engine*>(0x1));
}

TEST(CApi, TokenizerBuffersAndIds) {
  EnginePtr e = load_stories();
  ASSERT_TRUE(e);
  snapkv_model_info info;
  ASSERT_EQ(snapkv_engine_info(e.get(), &info), SNAPKV_OK);
  EXPECT_STREQ(info.arch, "llama");
  EXPECT_EQ(info.n_vocab, 512);
  EXPECT_EQ(info.has_tokenizer, 1);
  EXPECT_EQ(info.bos, 1);
  EXPECT_EQ(info.n_threads, 2);
  EXPECT_GT(info.n_ctx_train, 0);
  EXPECT_GT(info.weight_bytes, 0u);
  EXPECT_EQ(std::string(info.path), stories_path());

  // The size query, then a buffer one too small, then the right size.
  const std::string text = "Once upon a time";
  size_t n = 0;
  expect_error(snapkv_tokenize(e.get(), text.data(), text.size(), 1, 0, nullptr, 0, &n), SNAPKV_ERR_BUFFER_TOO_SMALL,
               "snapkv_tokenize", "5 needed");
  EXPECT_EQ(n, 5u);
  std::vector<int32_t> ids(4, -7);
  expect_error(snapkv_tokenize(e.get(), text.data(), text.size(), 1, 0, ids.data(), ids.size(), &n),
               SNAPKV_ERR_BUFFER_TOO_SMALL, "snapkv_tokenize");
  EXPECT_EQ(ids, std::vector<int32_t>(4, -7));  // nothing written
  ids.resize(5);
  ASSERT_EQ(snapkv_tokenize(e.get(), text.data(), text.size(), 1, 0, ids.data(), ids.size(), &n), SNAPKV_OK);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 403, 407, 261, 378}));  // llama.cpp's ids (../shared golden)
  ASSERT_EQ(snapkv_tokenize(e.get(), nullptr, 0, 0, 0, nullptr, 0, &n), SNAPKV_OK);
  EXPECT_EQ(n, 0u);

  // Pieces: " Once" is 5 bytes + NUL.
  char buf[16];
  size_t len = 0;
  expect_error(snapkv_token_to_piece(e.get(), 403, 0, buf, 5, &len), SNAPKV_ERR_BUFFER_TOO_SMALL,
               "snapkv_token_to_piece", "6 needed");
  EXPECT_EQ(len, 5u);
  ASSERT_EQ(snapkv_token_to_piece(e.get(), 403, 0, buf, 6, &len), SNAPKV_OK);
  EXPECT_STREQ(buf, " Once");
  for (const int32_t bad : {-1, 512, std::numeric_limits<int32_t>::min()}) {
    expect_error(snapkv_token_to_piece(e.get(), bad, 0, buf, sizeof buf, &len), SNAPKV_ERR_INVALID_ARGUMENT,
                 "snapkv_token_to_piece");
    int eog = 0;
    expect_error(snapkv_token_is_eog(e.get(), bad, &eog), SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_token_is_eog",
                 "outside the vocabulary");
  }
  int eog = -1;
  ASSERT_EQ(snapkv_token_is_eog(e.get(), info.eos, &eog), SNAPKV_OK);
  EXPECT_EQ(eog, 1);
  ASSERT_EQ(snapkv_token_is_eog(e.get(), 403, &eog), SNAPKV_OK);
  EXPECT_EQ(eog, 0);

  // Detokenize: the size query, then the text (leading space of the first piece dropped).
  ASSERT_EQ(snapkv_detokenize(e.get(), ids.data() + 1, 4, 0, nullptr, 0, &len), SNAPKV_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(len, text.size());
  std::string out(len + 1, '\0');
  ASSERT_EQ(snapkv_detokenize(e.get(), ids.data() + 1, 4, 0, out.data(), out.size(), &len), SNAPKV_OK);
  EXPECT_EQ(out.substr(0, len), text);
  const int32_t bad_ids[2] = {403, 9999};
  expect_error(snapkv_detokenize(e.get(), bad_ids, 2, 0, out.data(), out.size(), &len), SNAPKV_ERR_INVALID_ARGUMENT,
               "snapkv_detokenize", "9999 at index 1");
}

TEST(CApi, SequenceArgumentsAndContext) {
  EnginePtr e = load_stories();
  ASSERT_TRUE(e);
  snapkv_sequence* s = nullptr;
  expect_error(snapkv_sequence_new(e.get(), 0, c_enum<snapkv_kv_type>(7), &s), SNAPKV_ERR_INVALID_ARGUMENT,
               "snapkv_sequence_new", "kv_type 7");
  expect_error(snapkv_sequence_new(e.get(), -1, SNAPKV_KV_F16, &s), SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_sequence_new");
  // stories260K's head_dim 8 cannot be stored as Q8_0 or Q4_0 (blocks of 32).
  expect_error(snapkv_sequence_new(e.get(), 0, SNAPKV_KV_Q8_0, &s), SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_sequence_new",
               "q8_0");
  expect_error(snapkv_sequence_new(e.get(), 0, SNAPKV_KV_Q4_0, &s), SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_sequence_new",
               "q4_0");
  expect_error(snapkv_sequence_new(e.get(), int64_t{1} << 40, SNAPKV_KV_F16, &s), SNAPKV_ERR_INVALID_ARGUMENT,
               "snapkv_sequence_new");
  // Keys and values of two types: both must be valid, both quantized, and fit head_dim.
  expect_error(snapkv_sequence_new_kv(e.get(), 0, SNAPKV_KV_Q8_0, c_enum<snapkv_kv_type>(9), nullptr, &s),
               SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_sequence_new_kv", "v_type 9");
  expect_error(snapkv_sequence_new_kv(e.get(), 0, c_enum<snapkv_kv_type>(-1), SNAPKV_KV_Q4_0, nullptr, &s),
               SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_sequence_new_kv", "k_type -1");
  expect_error(snapkv_sequence_new_kv(e.get(), 0, c_enum<snapkv_kv_type>(9), c_enum<snapkv_kv_type>(9), nullptr, &s),
               SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_sequence_new_kv", "k_type 9");
  expect_error(snapkv_sequence_new_kv(e.get(), 0, SNAPKV_KV_F16, SNAPKV_KV_Q4_0, nullptr, &s),
               SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_sequence_new_kv", "both be quantized");
  expect_error(snapkv_sequence_new_kv(e.get(), 0, SNAPKV_KV_Q8_0, SNAPKV_KV_Q4_0, nullptr, &s),
               SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_sequence_new_kv", "q8_0");
  EXPECT_EQ(s, nullptr);
  expect_error(snapkv_sequence_new_kv(e.get(), 0, SNAPKV_KV_F32, SNAPKV_KV_F32, "bogus", &s),
               SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_sequence_new_kv", "bogus");
  EXPECT_EQ(s, nullptr);
  for (const char* cold : {static_cast<const char*>(nullptr), "int8"}) {
    ASSERT_EQ(snapkv_sequence_new_kv(e.get(), 0, SNAPKV_KV_F32, SNAPKV_KV_F32, cold, &s), SNAPKV_OK);
    snapkv_sequence_free(s);
    s = nullptr;
  }

  SequencePtr seq = new_sequence(e.get(), 8);
  EXPECT_EQ(snapkv_sequence_n_ctx(seq.get()), 8);
  const std::vector<int32_t> ids = tokenize(e.get(), "Once upon a time");
  const float* logits = nullptr;
  // Bad press specs, bad ids, no tokens: refused, the sequence stays empty.
  for (const char* spec : {"nosuchpress", "snapkv:budget", "snapkv:budget=abc", ":budget=3", "snapkv:budget=0"}) {
    expect_error(snapkv_prefill(seq.get(), ids.data(), ids.size(), spec, &logits), SNAPKV_ERR_INVALID_ARGUMENT,
                 "snapkv_prefill");
    EXPECT_EQ(snapkv_sequence_n_past(seq.get()), 0) << spec;
  }
  const int32_t bad[3] = {1, 512, 4};
  expect_error(snapkv_prefill(seq.get(), bad, 3, nullptr, &logits), SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_prefill",
               "512");
  const int32_t neg[2] = {1, -3};
  expect_error(snapkv_prefill(seq.get(), neg, 2, nullptr, &logits), SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_prefill");
  expect_error(snapkv_prefill(seq.get(), ids.data(), 0, nullptr, &logits), SNAPKV_ERR_INVALID_ARGUMENT,
               "snapkv_prefill", "no tokens");
  EXPECT_EQ(logits, nullptr);
  EXPECT_EQ(snapkv_sequence_n_past(seq.get()), 0);
  const std::vector<int32_t> nine(9, 5);
  expect_error(snapkv_prefill(seq.get(), nine.data(), nine.size(), nullptr, &logits), SNAPKV_ERR_CONTEXT_FULL,
               "snapkv_prefill", "context of 8");

  // Fill the context: 5 prompt + 3 decoded; then decode is refused and nothing changes.
  ASSERT_EQ(snapkv_prefill(seq.get(), ids.data(), ids.size(), "none", &logits), SNAPKV_OK) << snapkv_last_error();
  ASSERT_NE(logits, nullptr);
  expect_error(snapkv_decode(seq.get(), 512, &logits), SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_decode", "512");
  expect_error(snapkv_decode(seq.get(), -1, &logits), SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_decode");
  EXPECT_EQ(snapkv_sequence_n_past(seq.get()), 5);
  expect_error(snapkv_prefill(seq.get(), ids.data(), 4, nullptr, &logits), SNAPKV_ERR_CONTEXT_FULL, "snapkv_prefill");
  for (int i = 0; i < 3; ++i) ASSERT_EQ(snapkv_decode(seq.get(), 42, &logits), SNAPKV_OK) << snapkv_last_error();
  expect_error(snapkv_decode(seq.get(), 42, &logits), SNAPKV_ERR_CONTEXT_FULL, "snapkv_decode", "context of 8");
  snapkv_sequence* row[1] = {seq.get()};
  const int32_t tok[1] = {42};
  expect_error(snapkv_decode_batch(row, tok, 1, nullptr, 0), SNAPKV_ERR_CONTEXT_FULL, "snapkv_decode_batch");
  EXPECT_EQ(snapkv_sequence_n_past(seq.get()), 8);
  // A compressing prefill needs an empty sequence; generate too.
  ASSERT_EQ(snapkv_sequence_reset(seq.get()), SNAPKV_OK);
  ASSERT_EQ(snapkv_prefill(seq.get(), ids.data(), 2, nullptr, nullptr), SNAPKV_OK);
  expect_error(snapkv_prefill(seq.get(), ids.data(), 2, "snapkv:budget=2", nullptr), SNAPKV_ERR_INVALID_ARGUMENT,
               "snapkv_prefill");
  snapkv_generate_params p = greedy(2);
  expect_error(snapkv_generate(seq.get(), ids.data(), 2, &p, nullptr, nullptr, nullptr), SNAPKV_ERR_INVALID_ARGUMENT,
               "snapkv_generate", "empty");
  EXPECT_EQ(snapkv_sequence_n_past(seq.get()), 2);
}

TEST(CApi, GenerateAndBatchArguments) {
  EnginePtr e = load_stories();
  EnginePtr other = load_stories();
  ASSERT_TRUE(e && other);
  const std::vector<int32_t> ids = tokenize(e.get(), "Once upon a time");
  SequencePtr seq = new_sequence(e.get(), 16);
  snapkv_generate_result r;
  snapkv_generate_params p = greedy(4);
  p.n_stop = 1;
  expect_error(snapkv_generate(seq.get(), ids.data(), ids.size(), &p, nullptr, nullptr, &r),
               SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_generate", "stop is NULL");
  const char* stops[2] = {"x", nullptr};
  p.stop = stops;
  p.n_stop = 2;
  expect_error(snapkv_generate(seq.get(), ids.data(), ids.size(), &p, nullptr, nullptr, &r),
               SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_generate", "stop[1] is NULL");
  p = greedy(4);
  p.n_question = 3;
  expect_error(snapkv_generate(seq.get(), ids.data(), ids.size(), &p, nullptr, nullptr, &r),
               SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_generate", "question is NULL");
  p = greedy(-1);
  expect_error(snapkv_generate(seq.get(), ids.data(), ids.size(), &p, nullptr, nullptr, &r),
               SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_generate");
  p = greedy(4);
  p.top_p = std::nanf("");
  p.temp = 0.5f;
  expect_error(snapkv_generate(seq.get(), ids.data(), ids.size(), &p, nullptr, nullptr, &r),
               SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_generate", "top-p");
  p = greedy(4);
  p.press = "snapkv:window=abc";
  expect_error(snapkv_generate(seq.get(), ids.data(), ids.size(), &p, nullptr, nullptr, &r),
               SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_generate");
  const std::vector<int32_t> long_prompt(17, 5);
  p = greedy(4);
  expect_error(snapkv_generate(seq.get(), long_prompt.data(), long_prompt.size(), &p, nullptr, nullptr, &r),
               SNAPKV_ERR_CONTEXT_FULL, "snapkv_generate", "17 tokens");
  const int32_t q[12] = {5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5};
  p.question = q;
  p.n_question = 12;
  expect_error(snapkv_generate(seq.get(), ids.data(), ids.size(), &p, nullptr, nullptr, &r), SNAPKV_ERR_CONTEXT_FULL,
               "snapkv_generate");
  EXPECT_EQ(snapkv_sequence_n_past(seq.get()), 0);
  // A question span longer than the prompt is named as snapkv_prefill_question's error.
  expect_error(snapkv_prefill_question(seq.get(), ids.data(), ids.size(), nullptr, ids.size() + 1, nullptr),
               SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_prefill_question", "exceeds the");
  // A question too long for the context is counted as given, not wrapped around.
  p = greedy(4);
  p.question = q;
  p.n_question = SIZE_MAX;
  expect_error(snapkv_generate(seq.get(), ids.data(), ids.size(), &p, nullptr, nullptr, &r), SNAPKV_ERR_CONTEXT_FULL,
               "snapkv_generate", std::to_string(SIZE_MAX));
  EXPECT_EQ(snapkv_sequence_n_past(seq.get()), 0);

  // Batched decode: empty, other engine, too small a buffer, rows of one sequence apart.
  SequencePtr a = new_sequence(e.get()), b = new_sequence(e.get()), c = new_sequence(other.get());
  for (auto* s : {a.get(), b.get(), c.get()}) ASSERT_EQ(snapkv_prefill(s, ids.data(), ids.size(), nullptr, nullptr), 0);
  snapkv_sequence* rows[3] = {a.get(), c.get(), a.get()};
  const int32_t toks[3] = {42, 42, 42};
  std::vector<float> out(3 * 512);
  expect_error(snapkv_decode_batch(rows, toks, 0, out.data(), out.size()), SNAPKV_ERR_INVALID_ARGUMENT,
               "snapkv_decode_batch", "no rows");
  expect_error(snapkv_decode_batch(rows, toks, 2, out.data(), out.size()), SNAPKV_ERR_INVALID_ARGUMENT,
               "snapkv_decode_batch", "another engine");
  rows[1] = b.get();
  expect_error(snapkv_decode_batch(rows, toks, 3, out.data(), out.size() - 1), SNAPKV_ERR_BUFFER_TOO_SMALL,
               "snapkv_decode_batch", "3 rows x 512");
  expect_error(snapkv_decode_batch(rows, toks, 3, out.data(), out.size()), SNAPKV_ERR_INVALID_ARGUMENT,
               "snapkv_decode_batch", "consecutive");
  const int32_t bad_toks[3] = {42, 9999, 42};
  expect_error(snapkv_decode_batch(rows, bad_toks, 2, out.data(), out.size()), SNAPKV_ERR_INVALID_ARGUMENT,
               "snapkv_decode_batch", "9999");
  for (auto* s : {a.get(), b.get(), c.get()}) EXPECT_EQ(snapkv_sequence_n_past(s), 5);

  // Sampler settings.
  snapkv_sampler* smp = nullptr;
  expect_error(snapkv_sampler_new(std::nanf(""), 40, 0.9f, 0, &smp), SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_sampler_new",
               "NaN");
  expect_error(snapkv_sampler_new(0.8f, 40, 0.0f, 0, &smp), SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_sampler_new", "top-p");
  EXPECT_EQ(smp, nullptr);
  ASSERT_EQ(snapkv_sampler_new(0.0f, 40, 1.0f, 0, &smp), SNAPKV_OK);
  SamplerPtr sampler(smp);
  const float l[4] = {0.5f, 3.0f, 3.0f, -1.0f};
  int32_t t = -1;
  expect_error(snapkv_sampler_sample(smp, l, 0, &t), SNAPKV_ERR_INVALID_ARGUMENT, "snapkv_sampler_sample", "n_logits");
  EXPECT_EQ(t, -1);
  ASSERT_EQ(snapkv_sampler_sample(smp, l, 4, &t), SNAPKV_OK);
  EXPECT_EQ(t, 1);  // greedy: the lowest id of the tied maxima
}

// Errors are per thread: a failure in one thread does not change another's message.
TEST(CApi, LastErrorIsPerThread) {
  snapkv_engine* e = nullptr;
  ASSERT_EQ(snapkv_engine_load(nullptr, 0, &e), SNAPKV_ERR_INVALID_ARGUMENT);
  const std::string mine = snapkv_last_error();
  std::string theirs;
  std::thread t([&] {
    theirs = snapkv_last_error();  // nothing failed in this thread yet
    snapkv_sequence_reset(nullptr);
  });
  t.join();
  EXPECT_EQ(theirs, "");
  EXPECT_EQ(std::string(snapkv_last_error()), mine);
}

}  // namespace
}  // namespace snapkv::capitest
