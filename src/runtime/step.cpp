// snapkv runtime: Engine::step — one forward step over the decode rows and prefill items of a
// Batch (see snapkv/engine.h and docs/design.md, "Objects and who owns what").
//
// Layer loop: at layer l, one block call runs the decode rows (every row passes every layer)
// together with one chunk of each prefill item that is at layer l (its rows join the same
// matmuls); further chunks of those items at layer l run in further calls. An item that finishes
// layer l is compressed there (full-attention layers, if its press compresses), moves to l + 1
// and, with row budget left, continues when the loop reaches l + 1. An item that finishes the
// last layer gets its last-token logits and becomes ready to decode.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>

#include "model/op_timer.h"
#include "runtime/sequence_state.h"
#include "runtime/workspace_impl.h"
#include "snapkv/batch.h"
#include "snapkv/engine.h"
#include "snapkv/error.h"

namespace snapkv {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Sliding-window layer after a prefill: a later query (position >= the next position) sees only
// the window - 1 most recent entries, so keep exactly those and release the rest
// (KVHeadCache::keep reallocates to the exact size).
void trim_swa_layer(KVLayerCache& layer) {
  const int64_t keep = layer.window - 1;
  for (auto& h : layer.heads) {
    if (h.size() <= keep) continue;
    std::vector<int32_t> idx(static_cast<size_t>(keep));
    std::iota(idx.begin(), idx.end(), static_cast<int32_t>(h.size() - keep));
    h.keep(idx);
  }
}

/// Ids of steps, for the duplicate-sequence check (unique across workspaces).
std::atomic<uint64_t> g_step_id{0};

/// Tokens of an item's next prefill chunk at one layer: at most `room` (the rows left in this
/// call, a hard limit), about `budget` (token-layers left this step) and `left` (tokens of the
/// layer still to run). A one-token chunk would go to the split-K decode kernel, whose rounding
/// differs from the blocked prefill kernel's, so results would depend on how the prompt was split
/// (batched != alone): with max_rows >= 3 no chunk of one token is made and none is left behind
/// (the budget may then be exceeded by up to two tokens). Returns 0 when this call has no room for such
/// a chunk; a later call of the layer (room = max_rows) always has.
int64_t chunk_tokens(int64_t left, int64_t budget, int64_t room, int64_t max_rows) {
  int64_t cnt = std::min({left, budget, room});
  if (max_rows < 3 || cnt <= 0 || cnt == left) return cnt;
  if (cnt < 2) cnt = std::min<int64_t>(2, room);
  if (left - cnt == 1) cnt = cnt + 1 <= room ? cnt + 1 : cnt - 1;
  return cnt >= 2 ? cnt : 0;
}

/// Checks the batch and fills `plan` (reusing its storage).
void check_batch(const Model& model, Batch& batch, int64_t max_rows, StepPlan& plan) {
  plan.spans.clear();
  plan.items.clear();
  plan.budget.clear();
  const uint64_t id = ++g_step_id;
  for (Batch::Row& r : batch.rows()) r.out = -1;  // no row has logits until this step gives them
  const auto& rows = batch.rows();
  if (rows.empty() && batch.prefills().empty()) throw Error("step: empty batch (no decode rows, no prefill)");
  if (static_cast<int64_t>(rows.size()) > max_rows)
    throw Error(fmt::format("step: {} decode rows exceed the workspace's max_rows {}", rows.size(), max_rows));
  const int n_vocab = model.config().n_vocab;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Batch::Row& r = rows[i];
    if (r.seq == nullptr) throw Error(fmt::format("step: row {} has no sequence", i));
    if (r.token < 0 || r.token >= n_vocab)
      throw Error(fmt::format("token id {} at row {} is outside the vocabulary [0, {})", r.token, i, n_vocab));
    if (!plan.spans.empty() && plan.spans.back().st == &r.seq->state()) {
      ++plan.spans.back().n;
      continue;
    }
    Sequence::State& st = r.seq->state();
    if (st.step_mark == id) throw Error(fmt::format("step: the rows of one sequence must be consecutive (row {})", i));
    st.step_mark = id;
    if (st.model.get() != &model) throw Error(fmt::format("step: row {} belongs to a sequence of another model", i));
    if (st.job) throw Error(fmt::format("step: row {}: the sequence is still prefilling", i));
    plan.spans.push_back({&st, static_cast<int64_t>(i), 1});
  }
  for (const DecodeSpan& s : plan.spans)
    if (s.st->n_past + s.n > s.st->n_ctx)
      throw Error(fmt::format("the context of {} tokens is full (-c)", s.st->n_ctx));
  for (size_t i = 0; i < batch.prefills().size(); ++i) {
    Batch::PrefillItem& it = batch.prefills()[i];
    it.done = false;
    it.error.clear();
    it.failure = nullptr;
    if (it.seq == nullptr) throw Error(fmt::format("step: prefill item {} has no sequence", i));
    Sequence::State& st = it.seq->state();
    if (st.step_mark == id) throw Error(fmt::format("step: prefill item {}: its sequence is already in this batch", i));
    st.step_mark = id;
    if (st.model.get() != &model)
      throw Error(fmt::format("step: prefill item {} belongs to a sequence of another model", i));
    if (!st.job) throw Error(fmt::format("step: prefill item {}: the sequence has no pending prefill", i));
    plan.items.push_back(&st);
    plan.budget.push_back(it.max_rows == 0 ? INT64_MAX : it.max_rows);
  }
}

/// Copies the queries of the chunk's rows that the press (or retain_window) needs.
void capture_queries(const ModelConfig& c, PrefillJob& job, const float* q, int64_t t0, int64_t cnt) {
  const int hd = c.head_dim;
  const int64_t q_dim = static_cast<int64_t>(c.n_head) * hd;
  const int64_t W = job.window;
  for (int64_t t = std::max(t0, job.n - W); t < t0 + cnt && W > 0; ++t) {
    const float* src = q + (t - t0) * q_dim;
    for (int hq = 0; hq < c.n_head; ++hq)
      std::memcpy(job.window_q.data() + (static_cast<size_t>(hq) * W + static_cast<size_t>(t - (job.n - W))) * hd,
                  src + hq * hd, sizeof(float) * hd);
  }
  if (!job.all_q.empty()) {
    for (int64_t t = t0; t < t0 + cnt; ++t) {
      const float* src = q + (t - t0) * q_dim;
      for (int hq = 0; hq < c.n_head; ++hq)
        std::memcpy(job.all_q.data() + (static_cast<size_t>(hq) * job.n + static_cast<size_t>(t)) * hd, src + hq * hd,
                    sizeof(float) * hd);
    }
  }
}

/// The last `rows` of each head's window queries ([n_head][W][hd] -> [n_head][rows][hd]).
std::vector<float> last_window_rows(const ModelConfig& c, const PrefillJob& job, int64_t rows) {
  const auto hd = static_cast<size_t>(c.head_dim);
  const auto W = static_cast<size_t>(job.window);
  std::vector<float> out(static_cast<size_t>(c.n_head) * static_cast<size_t>(rows) * hd);
  for (int h = 0; h < c.n_head; ++h)
    std::memcpy(out.data() + static_cast<size_t>(h) * static_cast<size_t>(rows) * hd,
                job.window_q.data() + (static_cast<size_t>(h) * W + W - static_cast<size_t>(rows)) * hd,
                sizeof(float) * static_cast<size_t>(rows) * hd);
  return out;
}

/// Work at the end of layer il of a prefill: retain and compress (full attention), trim (SWA).
void finish_layer(Sequence::State& st, PrefillJob& job, int il, int n_threads) {
  const ModelConfig& c = st.model->config();
  const bool full = c.layer_window(il) == 0;
  if (full) {
    if (job.reselect && st.cold->has_layer(il)) st.reselect_layer(il, job.window_q.data(), n_threads);
    if (job.retain_window > 0) st.retained_q[static_cast<size_t>(il)] = last_window_rows(c, job, job.retain_window);
    if (job.plan.compress) {
      const float* wq = job.window_q.data();
      std::vector<float> packed;
      if (job.window != job.plan.window) {
        packed = last_window_rows(c, job, job.plan.window);
        wq = packed.data();
      }
      st.compress_layer(il, job.plan, job.compress_index, job.n_compress_layers, job.n, wq,
                        job.all_q.empty() ? nullptr : job.all_q.data(), n_threads);
    }
    ++job.compress_index;
  } else {
    trim_swa_layer(st.cache.layer(il));
  }
  if (job.progress) job.progress(il + 1, c.n_layer);
  ++job.layer;
  job.done = 0;
}

}  // namespace

void Engine::step(Batch& batch, Workspace& ws) const {
  Workspace::Impl& w = ws.impl();
  const Model& m = *model_;
  if (w.model.get() != &m) throw Error("step: the workspace was made for another engine");
  StepPlan& plan = w.plan;
  check_batch(m, batch, w.max_rows, plan);
  const ModelConfig& c = m.config();
  const int64_t E = c.n_embd;
  const auto& rows = batch.rows();
  const auto n_dec = static_cast<int64_t>(rows.size());

  // Profiling: decode-only steps and steps with prefill rows apart; the step's time from here.
  StepProfile* prof = w.profiling ? (plan.items.empty() ? &w.profile.decode : &w.profile.prefill) : nullptr;
  struct StepTime {  // adds the step to prof however it ends
    StepProfile* p;
    Clock::time_point t0;
    ~StepTime() {
      if (p == nullptr) return;
      p->steps += 1;
      p->seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    }
  } step_time{prof, prof != nullptr ? Clock::now() : Clock::time_point{}};

  // Decode rows: embeddings and positions (the ids were checked above).
  w.h_dec.resize(static_cast<size_t>(n_dec * E));
  w.pos_dec.resize(static_cast<size_t>(n_dec));
  {
    OpTimer t(n_dec > 0 ? prof : nullptr, ProfileOp::Embed);
    for (const DecodeSpan& s : plan.spans)
      for (int64_t k = 0; k < s.n; ++k) {
        const auto r = static_cast<size_t>(s.row0 + k);
        w.pos_dec[r] = static_cast<int32_t>(s.st->n_past + k);
        m.embed({&rows[r].token, 1}, w.h_dec.data() + static_cast<int64_t>(r) * E);
      }
  }
  const auto t_step = Clock::now();
  std::vector<PrefillPart>& parts = plan.parts;
  try {
    for (Sequence::State* st : plan.items)
      if (!st->job->started) {
        st->start_job();
        st->job->t_start = t_step;
      }
    for (int il = 0; il < c.n_layer; ++il) {
      const bool full_layer = c.layer_window(il) == 0;
      for (bool first = true;; first = false) {
        const int64_t rows_dec = first ? n_dec : 0;
        int64_t n = rows_dec;
        parts.clear();
        for (size_t i = 0; i < plan.items.size(); ++i) {
          if (!plan.items[i]->job) continue;  // failed on its own earlier in this step
          PrefillJob& job = *plan.items[i]->job;
          if (job.layer != il || plan.budget[i] <= 0) continue;
          const int64_t cnt = chunk_tokens(job.n - job.done, plan.budget[i], w.max_rows - n, w.max_rows);
          if (cnt <= 0) continue;
          parts.push_back({i, job.done, cnt, n});
          n += cnt;
        }
        if (n == 0) break;

        // Room in the caches: decode spans for their rows; a full-attention prefill layer for
        // the whole prompt at once (exactly sized), a sliding-window one per chunk.
        w.spans.clear();
        if (rows_dec > 0)
          for (const DecodeSpan& s : plan.spans) {
            s.st->cache.make_room(il, s.n, /*decode=*/true);
            w.spans.push_back({s.row0, s.n, &s.st->cache.layer(il)});
          }
        for (const PrefillPart& p : parts) {
          Sequence::State& st = *plan.items[p.item];
          if (!full_layer) {
            st.cache.make_room(il, p.cnt);
          } else if (p.t0 == 0) {
            // Re-selection: the layer's prompt entries whole again before the question attends.
            if (st.job->reselect && st.cold->has_layer(il)) st.restore_layer(il);
            st.cache.make_room(il, st.job->n);
          }
          w.spans.push_back({p.row0, p.cnt, &st.cache.layer(il)});
        }

        // Rows of the call: in place when they come from one buffer, else gathered.
        BlockBatch b;
        b.n = n;
        b.spans = w.spans;
        b.buf = &w.buf;
        b.attn_ws = &w.attn;
        b.decode_ws = &w.decode;
        b.decode_rows = &w.decode_rows;
        b.tc = &w.tc;
        b.profile = prof;
        const bool gathered = !(parts.empty() || (rows_dec == 0 && parts.size() == 1));
        if (parts.empty()) {
          b.h = w.h_dec.data();
          b.pos = w.pos_dec.data();
        } else if (!gathered) {
          PrefillJob& job = *plan.items[parts[0].item]->job;
          b.h = job.h.data() + parts[0].t0 * E;
          b.pos = job.pos.data() + parts[0].t0;
        } else {
          if (rows_dec > 0) {  // with no decode rows h_dec / pos_dec may be empty (null data)
            std::memcpy(w.x.data(), w.h_dec.data(), sizeof(float) * static_cast<size_t>(rows_dec * E));
            std::memcpy(w.pos.data(), w.pos_dec.data(), sizeof(int32_t) * static_cast<size_t>(rows_dec));
          }
          for (const PrefillPart& p : parts) {
            PrefillJob& job = *plan.items[p.item]->job;
            std::memcpy(w.x.data() + p.row0 * E, job.h.data() + p.t0 * E,
                        sizeof(float) * static_cast<size_t>(p.cnt * E));
            std::memcpy(w.pos.data() + p.row0, job.pos.data() + p.t0, sizeof(int32_t) * static_cast<size_t>(p.cnt));
          }
          b.h = w.x.data();
          b.pos = w.pos.data();
        }
        m.forward_layer(il, b);
        if (gathered) {
          if (rows_dec > 0) std::memcpy(w.h_dec.data(), w.x.data(), sizeof(float) * static_cast<size_t>(rows_dec * E));
          for (const PrefillPart& p : parts) {
            PrefillJob& job = *plan.items[p.item]->job;
            std::memcpy(job.h.data() + p.t0 * E, w.x.data() + p.row0 * E,
                        sizeof(float) * static_cast<size_t>(p.cnt * E));
          }
        }

        // After the call: collect queries, advance, finish layers.
        for (const PrefillPart& p : parts) {
          Sequence::State& st = *plan.items[p.item];
          PrefillJob& job = *st.job;
          if (full_layer)
            capture_queries(c, job, w.buf.q.data() + p.row0 * static_cast<int64_t>(c.n_head) * c.head_dim, p.t0, p.cnt);
          job.done += p.cnt;
          plan.budget[p.item] -= p.cnt;
          st.sample_peak();
          if (job.done == job.n) {
            try {
              finish_layer(st, job, il, w.tc.n_threads());
            } catch (const Error& e) {
              // This item's own failure (its press, its cold tier's file): it alone is reset.
              batch.prefills()[p.item].error = e.what();
              batch.prefills()[p.item].failure = std::current_exception();
              st.clear();
            }
          }
        }
      }
    }

    // Decode rows: logits of the rows that want them; positions advance.
    const int64_t V = c.n_vocab;
    int64_t n_out = 0;
    for (const Batch::Row& r : rows) n_out += r.want_logits ? 1 : 0;
    batch.output().resize(static_cast<size_t>(n_out * V));
    batch.n_vocab_out = V;
    {
      int64_t o = 0;
      auto& mrows = batch.rows();
      for (int64_t r0 = 0; r0 < n_dec;) {
        // Runs of consecutive rows that want logits go through the output projection together.
        if (!mrows[static_cast<size_t>(r0)].want_logits) {
          mrows[static_cast<size_t>(r0)].out = -1;
          ++r0;
          continue;
        }
        int64_t r1 = r0;
        while (r1 < n_dec && r1 - r0 < w.max_rows && mrows[static_cast<size_t>(r1)].want_logits) ++r1;
        OpTimer t(prof, ProfileOp::Logits, matrix_bytes(m.output()));
        m.logits(w.h_dec.data() + r0 * E, r1 - r0, batch.output().data() + o * V, w.logits_tmp.data(), w.tc);
        t.stop();
        for (int64_t r = r0; r < r1; ++r) mrows[static_cast<size_t>(r)].out = o++;
        r0 = r1;
      }
    }

    // Prefill items that finished every layer.
    for (size_t i = 0; i < plan.items.size(); ++i) {
      Sequence::State& st = *plan.items[i];
      if (!st.job) continue;  // failed on its own (batch.prefills()[i].error)
      PrefillJob& job = *st.job;
      if (job.layer < c.n_layer) continue;
      st.last_logits.resize(static_cast<size_t>(V));
      if (job.all_logits) {
        job.all_logits->resize(static_cast<size_t>(job.n * V));
        for (int64_t s = 0; s < job.n; s += w.max_rows) {
          const int64_t cn = std::min(w.max_rows, job.n - s);
          OpTimer t(prof, ProfileOp::Logits, matrix_bytes(m.output()));
          m.logits(job.h.data() + s * E, cn, job.all_logits->data() + s * V, w.logits_tmp.data(), w.tc);
        }
        std::memcpy(st.last_logits.data(), job.all_logits->data() + (job.n - 1) * V,
                    sizeof(float) * static_cast<size_t>(V));
      } else {
        OpTimer t(prof, ProfileOp::Logits, matrix_bytes(m.output()));
        m.logits(job.h.data() + (job.n - 1) * E, 1, st.last_logits.data(), w.logits_tmp.data(), w.tc);
      }
      if (job.plan.compress) st.compressed_once = true;
      if (job.reselect) ++st.stats.n_reselections;
      st.n_past += job.n;
      st.stats.prefill_ms += ms_since(job.t_start);
      st.job.reset();  // releases the prompt's activations and queries
      st.update_stats();
      batch.prefills()[i].done = true;
    }
    // Decode rows' positions advance last (nothing here allocates): the catch below relies on it.
    for (const DecodeSpan& s : plan.spans) {
      s.st->n_past += s.n;
      // The prefill logits described the prompt's last position, which is no longer the last one.
      std::vector<float>().swap(s.st->last_logits);
      s.st->update_stats();
    }
  } catch (...) {
    // A decode row's sequence goes back to where it stood (its entries of this step dropped; its
    // n_past advances only at the very end, after everything that can fail); a prefill item's is
    // reset (emptied). No row or item claims an output of the failed step.
    for (const DecodeSpan& s : plan.spans) s.st->roll_back_decode(s.st->n_past);
    for (Sequence::State* st : plan.items) st->clear();
    for (Batch::Row& r : batch.rows()) r.out = -1;
    for (Batch::PrefillItem& it : batch.prefills()) it.done = false;
    throw;
  }
}

}  // namespace snapkv
