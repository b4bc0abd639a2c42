// The C API's follow-up questions (issue 10): a document compressed with a cold tier
// (snapkv_sequence_new_cold), saved (snapkv_session_save) and restored (snapkv_session_load),
// answers a question re-selecting from the cold tier (snapkv_prefill_reselect) exactly as the
// sequence that was saved; misuse, damaged and missing files are clear statuses.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "capi/capi_test_util.h"

namespace snapkv::capitest {
namespace {

namespace fs = std::filesystem;

const std::string kStory =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. One day, she saw a "
    "big red ball in the park. She ran to the ball and kicked it very hard. The ball flew over the fence and into "
    "the garden of an old man. The old man was grumpy and did not like children. Lily was scared, but she wanted her "
    "ball back. She knocked on the door and said sorry. The old man smiled and gave her the ball and a cookie.";

struct Sampled {
  std::vector<std::vector<float>> logits;  ///< the question's last logits, then each greedy step's
};

/// Prefills the question with re-selection on a fork of `doc`, then 4 greedy decode steps.
Sampled ask(const snapkv_sequence* doc, const std::vector<int32_t>& q, int n_vocab) {
  snapkv_sequence* f = nullptr;
  EXPECT_EQ(snapkv_sequence_fork(doc, &f), SNAPKV_OK) << snapkv_last_error();
  SequencePtr fork(f);
  Sampled out;
  const float* l = nullptr;
  EXPECT_EQ(snapkv_prefill_reselect(f, q.data(), q.size(), &l), SNAPKV_OK) << snapkv_last_error();
  if (l == nullptr) return out;
  out.logits.emplace_back(l, l + n_vocab);
  for (int i = 0; i < 4; ++i) {
    const auto& last = out.logits.back();
    const auto tok = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    EXPECT_EQ(snapkv_decode(f, tok, &l), SNAPKV_OK) << snapkv_last_error();
    out.logits.emplace_back(l, l + n_vocab);
  }
  snapkv_stats st{};
  EXPECT_EQ(snapkv_sequence_stats(f, &st), SNAPKV_OK);
  EXPECT_EQ(st.n_reselections, 1);
  EXPECT_GE(st.reselect_ms, 0.0);
  return out;
}

TEST(CApiFollowUp, SavedAndLoadedSessionReselectsAsTheOriginal) {
  EnginePtr e = load_stories();
  ASSERT_TRUE(e);
  snapkv_model_info info{};
  ASSERT_EQ(snapkv_engine_info(e.get(), &info), SNAPKV_OK);
  snapkv_sequence* s = nullptr;
  ASSERT_EQ(snapkv_sequence_new_cold(e.get(), 0, SNAPKV_KV_F16, "int8", &s), SNAPKV_OK) << snapkv_last_error();
  SequencePtr doc(s);
  const auto ids = tokenize(e.get(), kStory + " " + kStory);
  ASSERT_GT(ids.size(), 100u);
  ASSERT_EQ(snapkv_prefill(doc.get(), ids.data(), ids.size(), "snapkv:budget=24,window=4", nullptr), SNAPKV_OK)
      << snapkv_last_error();
  snapkv_stats st{};
  ASSERT_EQ(snapkv_sequence_stats(doc.get(), &st), SNAPKV_OK);
  EXPECT_EQ(st.compressed, 1);
  // The cold tier holds every prompt entry of every layer in int8: (head_dim + 4) bytes a row.
  EXPECT_EQ(st.kv_cold_bytes, static_cast<uint64_t>(info.n_layer) * info.n_head_kv * 2 * ids.size() *
                                  (static_cast<uint64_t>(info.head_dim) + 4));

  const fs::path file = fs::temp_directory_path() / ("snapkv_capi_session_" + std::to_string(::getpid()) + ".snkv");
  ASSERT_EQ(snapkv_session_save(doc.get(), file.c_str()), SNAPKV_OK) << snapkv_last_error();
  snapkv_sequence* l = nullptr;
  ASSERT_EQ(snapkv_session_load(e.get(), file.c_str(), nullptr, 0, &l), SNAPKV_OK) << snapkv_last_error();
  SequencePtr loaded(l);
  snapkv_stats ls{};
  ASSERT_EQ(snapkv_sequence_stats(loaded.get(), &ls), SNAPKV_OK);
  EXPECT_EQ(ls.n_past, st.n_past);
  EXPECT_EQ(ls.kv_cache_bytes, st.kv_cache_bytes);
  EXPECT_EQ(ls.kv_cold_bytes, st.kv_cold_bytes);
  EXPECT_STREQ(ls.press, st.press);

  const auto q = tokenize(e.get(), " Who gave Lily a cookie?", false);
  const Sampled a = ask(doc.get(), q, info.n_vocab);
  const Sampled b = ask(loaded.get(), q, info.n_vocab);
  ASSERT_EQ(a.logits.size(), 5u);
  EXPECT_EQ(a.logits, b.logits);

  // A larger context and a disk cold tier; a context too small for what it holds; a bad cold_dir.
  {
    snapkv_sequence* big = nullptr;
    ASSERT_EQ(snapkv_session_load(e.get(), file.c_str(), fs::temp_directory_path().c_str(), 4096, &big), SNAPKV_OK)
        << snapkv_last_error();
    EXPECT_EQ(snapkv_sequence_n_ctx(big), 4096);
    const Sampled c = ask(big, q, info.n_vocab);
    EXPECT_EQ(c.logits, a.logits);
    snapkv_sequence_free(big);
    snapkv_sequence* small = nullptr;
    EXPECT_EQ(snapkv_session_load(e.get(), file.c_str(), nullptr, 10, &small), SNAPKV_ERR_IO);
    EXPECT_EQ(snapkv_session_load(e.get(), file.c_str(), "/nonexistent/dir", 0, &small), SNAPKV_ERR_IO);
    EXPECT_EQ(small, nullptr);
  }
  // Damaged and missing files, misuse.
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }
  snapkv_sequence* bad = nullptr;
  EXPECT_EQ(snapkv_session_load(e.get(), file.c_str(), nullptr, 0, &bad), SNAPKV_ERR_IO);
  EXPECT_NE(std::string(snapkv_last_error()).find("damaged"), std::string::npos) << snapkv_last_error();
  EXPECT_EQ(bad, nullptr);
  fs::remove(file);
  EXPECT_EQ(snapkv_session_load(e.get(), file.c_str(), nullptr, 0, &bad), SNAPKV_ERR_IO);
  EXPECT_EQ(snapkv_session_load(e.get(), nullptr, nullptr, 0, &bad), SNAPKV_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(snapkv_session_load(e.get(), file.c_str(), nullptr, -1, &bad), SNAPKV_ERR_INVALID_ARGUMENT);
  // Above 2^30, as snapkv_sequence_new refuses it (was SNAPKV_ERR_IO).
  EXPECT_EQ(snapkv_session_load(e.get(), file.c_str(), nullptr, (int64_t{1} << 30) + 1, &bad),
            SNAPKV_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(snapkv_last_error()).find("2^30"), std::string::npos) << snapkv_last_error();
  EXPECT_EQ(snapkv_session_load(e.get(), file.c_str(), nullptr, INT64_MAX, &bad), SNAPKV_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(snapkv_session_save(doc.get(), nullptr), SNAPKV_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(snapkv_session_save(doc.get(), "/nonexistent/dir/s.snkv"), SNAPKV_ERR_IO);
  EXPECT_EQ(snapkv_sequence_new_cold(e.get(), 0, SNAPKV_KV_F16, "int4", &bad), SNAPKV_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(snapkv_last_error()).find("int4"), std::string::npos) << snapkv_last_error();
  EXPECT_EQ(snapkv_sequence_new_cold(e.get(), 0, SNAPKV_KV_F16, nullptr, &bad), SNAPKV_ERR_INVALID_ARGUMENT);
  SequencePtr plain = new_sequence(e.get());
  EXPECT_EQ(snapkv_prefill(plain.get(), ids.data(), ids.size(), "snapkv:budget=24,window=4", nullptr), SNAPKV_OK);
  EXPECT_EQ(snapkv_prefill_reselect(plain.get(), q.data(), q.size(), nullptr), SNAPKV_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(snapkv_prefill_reselect(plain.get(), nullptr, 3, nullptr), SNAPKV_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace snapkv::capitest
