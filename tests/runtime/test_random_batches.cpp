// Random batches over a pool of sequences: decode rows (one to three per sequence), prefills
// advancing by random row budgets, begin_prefill / fork / compress / reset between steps, and
// bad rows slipped in. Invariants: a rejected step changes no sequence at all; an accepted one
// advances exactly the decode rows and prefills it names; every cache stays well-formed
// (ascending positions below n_past, no head longer than n_past, sliding-window layers trimmed).
#include <gtest/gtest.h>

#include <random>

#include "runtime/runtime_util.h"

namespace snapkv {
namespace {

/// Everything observable about a sequence (for "nothing changed").
struct Snapshot {
  int64_t n_past;
  bool prefilling;
  size_t bytes;
  std::string press;
  std::vector<int32_t> positions;  // of every (layer, head), concatenated with separators
  bool operator==(const Snapshot&) const = default;
};

Snapshot snap(const Sequence& s) {
  Snapshot r{s.n_past(), s.prefilling(), s.stats().kv_cache_bytes, s.stats().press, {}};
  const KVCache& c = s.kv_cache();
  for (int il = 0; il < c.n_layer(); ++il)
    for (const auto& h : c.layer(il).heads) {
      r.positions.insert(r.positions.end(), h.positions().begin(), h.positions().end());
      r.positions.push_back(-1);
    }
  return r;
}

void expect_well_formed(const Sequence& s, const std::string& what) {
  const KVCache& c = s.kv_cache();
  for (int il = 0; il < c.n_layer(); ++il)
    for (const auto& h : c.layer(il).heads) {
      ASSERT_LE(h.size(), s.n_past() + (s.prefilling() ? s.n_ctx() : 0)) << what;
      const auto p = h.positions();
      for (size_t i = 0; i < p.size(); ++i) {
        ASSERT_GE(p[i], 0) << what;
        if (i > 0) {
          ASSERT_LT(p[i - 1], p[i]) << what;
        }
        if (!s.prefilling()) {
          ASSERT_LT(p[i], s.n_past()) << what;
        }
      }
    }
}

TEST(RandomBatches, InvariantsHoldAndRejectedStepsChangeNothing) {
  auto e = rtest::stories(), other = rtest::stories();
  const int V = e->info().n_vocab;
  std::mt19937_64 rng(2024);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  WorkspaceOptions wo;
  wo.max_rows = 24;
  Workspace ws(*e, wo);
  SequenceOptions so;
  so.n_ctx = 160;
  std::vector<std::unique_ptr<Sequence>> pool;
  for (int i = 0; i < 6; ++i) pool.push_back(e->new_sequence(so));
  auto stranger = other->new_sequence(so);
  Workspace ws_other(*other);
  other->prefill(*stranger, rtest::prompt(5, V, 1), {}, ws_other);
  const char* presses[] = {"none", "snapkv:budget=24,window=4", "streamingllm:budget=20,window=4,sinks=2",
                           "adakv:budget=30,window=8", "knorm:budget=16,window=4"};
  int accepted = 0, rejected = 0, prefills_done = 0;
  for (int it = 0; it < 400; ++it) {
    const std::string at = "iteration " + std::to_string(it);
    // Between steps: start prefills, fork, compress, reset.
    for (auto& s : pool) {
      const int r = pick(20);
      if (!s->prefilling() && r < 4) {
        PrefillOptions po;
        const bool empty = s->n_past() == 0;
        po.press = PressSpec::parse(empty ? presses[pick(5)] : "none");
        if (empty && pick(3) == 0) po.retain_window = 8;
        const auto len = static_cast<size_t>(1 + pick(70));
        try {
          s->begin_prefill(rtest::prompt(len, V, rng()), po);
        } catch (const Error&) {  // does not fit, or too short for retain_window
          EXPECT_FALSE(s->prefilling()) << at;
        }
      } else if (r == 4 && !s->prefilling()) {
        s = s->fork();
      } else if (r == 5 && !s->prefilling()) {
        try {
          s->compress(PressSpec::parse("snapkv:budget=16,window=4"), ws);
        } catch (const Error&) {  // nothing retained, or already compressed
        }
      } else if (r == 6) {
        s->reset();
      }
    }
    // A random batch.
    Batch b;
    std::vector<int64_t> rows_of(pool.size(), 0);
    for (size_t i = 0; i < pool.size(); ++i) {
      Sequence& s = *pool[i];
      if (s.prefilling()) {
        if (pick(4) != 0) b.add_prefill(s, pick(3) == 0 ? 0 : 1 + pick(120));
      } else if (pick(3) != 0) {
        const int n = 1 + pick(3);
        for (int k = 0; k < n; ++k) b.add(s, static_cast<int32_t>(3 + pick(V - 3)), pick(2) == 0);
        rows_of[i] = n;
      }
    }
    const int bad = pick(12);
    if (bad == 0 && b.n_rows() > 0) b.add(*b.rows()[0].seq, V);  // id out of range
    if (bad == 1 && b.n_rows() > 1 && b.rows()[0].seq != b.rows().back().seq) b.add(*b.rows()[0].seq, 5);
    if (bad == 2) b.add(*stranger, 5);                                           // another model
    if (bad == 3 && b.n_prefills() > 0) b.add_prefill(*b.prefills()[0].seq, 4);  // twice
    std::vector<Snapshot> before;
    for (const auto& s : pool) before.push_back(snap(*s));
    try {
      e->step(b, ws);
      ++accepted;
      for (size_t i = 0; i < pool.size(); ++i) {
        const Sequence& s = *pool[i];
        if (rows_of[i] > 0) {
          EXPECT_EQ(s.n_past(), before[i].n_past + rows_of[i]) << at << " seq " << i;
        }
        expect_well_formed(s, at + " seq " + std::to_string(i));
      }
      for (int k = 0; k < b.n_prefills(); ++k) {
        EXPECT_EQ(b.prefill_done(k), !b.prefills()[static_cast<size_t>(k)].seq->prefilling()) << at;
        prefills_done += b.prefill_done(k) ? 1 : 0;
      }
      for (int r = 0; r < b.n_rows(); ++r) {
        if (b.rows()[static_cast<size_t>(r)].want_logits) {
          EXPECT_EQ(b.logits(r).size(), static_cast<size_t>(V)) << at;
        }
      }
    } catch (const Error& err) {
      ++rejected;
      for (size_t i = 0; i < pool.size(); ++i) EXPECT_EQ(snap(*pool[i]), before[i]) << at << ": " << err.what();
    }
  }
  RecordProperty("accepted", accepted);
  RecordProperty("rejected", rejected);
  EXPECT_GT(accepted, 150);
  EXPECT_GT(rejected, 20);
  EXPECT_GT(prefills_done, 30);
}

}  // namespace
}  // namespace snapkv
