// Test support: one request driven through the public Engine / Sequence / Workspace API with the
// call shape of the engine's first (single-request) API — prefill(tokens, compress), decode(token)
// — so that the property, golden and compression suites exercise Engine::step exactly as a user
// of generate() does. Settings are flat (PressConfig, as the CLI flags).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "kv/kv_cache.h"
#include "kv/presses/press.h"
#include "model/model.h"
#include "runtime/press_plan.h"
#include "snapkv/batch.h"
#include "snapkv/engine.h"
#include "snapkv/sequence.h"
#include "snapkv/workspace.h"

namespace snapkv {

struct TestSessionOptions {
  int64_t n_ctx = 0;  ///< 0 = the model's n_ctx_train
  KVType kv_type = KVType::F16;
  PressConfig press;        ///< name "none" = no compression
  int prefill_chunk = 512;  ///< WorkspaceOptions::max_rows
  int threads = 0;          ///< 0 = all cores
};

class TestSession {
 public:
  TestSession(std::shared_ptr<const Model> model, TestSessionOptions opt) : opt_(std::move(opt)) {
    EngineOptions eo;
    eo.n_threads = opt_.threads;
    engine_ = Engine::from_model(std::move(model), eo);
    if (opt_.press.name != "none") make_press(opt_.press);  // flag-named errors, as the CLI
    SequenceOptions so;
    so.n_ctx = opt_.n_ctx;
    so.kv_type = opt_.kv_type;
    so.log_kept = true;
    seq_ = engine_->new_sequence(so);
    WorkspaceOptions wo;
    wo.max_rows = opt_.prefill_chunk;
    ws_ = std::make_unique<Workspace>(*engine_, wo);
  }

  /// Prefills `tokens`; with `compress` the press of the options applies.
  std::span<const float> prefill(std::span<const int32_t> tokens, bool compress = true,
                                 std::vector<float>* all_logits = nullptr,
                                 const std::function<void(int, int)>& progress = {}) {
    PrefillOptions po;
    if (compress && opt_.press.name != "none") {
      press_capacity(opt_.press, static_cast<int64_t>(tokens.size()));  // flag-named errors, as the CLI
      po.press = to_spec(opt_.press);
    }
    po.all_logits = all_logits;
    po.progress = progress;
    return engine_->prefill(*seq_, tokens, po, *ws_);
  }

  /// One decode step of `token`; returns its logits (valid until the next call).
  std::span<const float> decode(int32_t token) {
    batch_.clear();
    batch_.add(*seq_, token, true);
    engine_->step(batch_, *ws_);
    return batch_.logits(0);
  }

  int64_t n_past() const { return seq_->n_past(); }
  int64_t n_ctx() const { return seq_->n_ctx(); }
  const Model& model() const { return engine_->model(); }
  const TestSessionOptions& options() const { return opt_; }
  const KVCache& kv_cache() const { return seq_->kv_cache(); }
  const SequenceStats& stats() const { return seq_->stats(); }
  const std::vector<KeptLayer>& kept() const { return seq_->kept(); }
  void reset() { seq_->reset(); }

  const Engine& engine() const { return *engine_; }
  Sequence& sequence() { return *seq_; }
  Workspace& workspace() { return *ws_; }

 private:
  TestSessionOptions opt_;
  std::shared_ptr<const Engine> engine_;
  std::unique_ptr<Sequence> seq_;
  std::unique_ptr<Workspace> ws_;
  Batch batch_;
};

}  // namespace snapkv
