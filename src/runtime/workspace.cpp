// snapkv runtime: Workspace (see snapkv/workspace.h).
#include <fmt/format.h>

#include "runtime/workspace_impl.h"
#include "snapkv/engine.h"
#include "snapkv/error.h"

namespace snapkv {

namespace {

int64_t checked_rows(int64_t rows) {
  if (rows < 1 || rows > (int64_t{1} << 20))
    throw Error(fmt::format("workspace: max_rows {} must be in [1, 2^20]", rows));
  return rows;
}

}  // namespace

Workspace::Impl::Impl(std::shared_ptr<const Model> mp, int n_threads, int64_t rows, PrefillAttention prefill)
    : model(std::move(mp)),
      max_rows(checked_rows(rows)),
      tc(n_threads),
      buf(model->config(), rows),
      attn(model->attention_params(0), rows, prefill),
      decode(model->attention_params(0), rows),
      x(static_cast<size_t>(rows) * static_cast<size_t>(model->config().n_embd)),
      pos(static_cast<size_t>(rows)),
      logits_tmp(static_cast<size_t>(rows) * static_cast<size_t>(model->config().n_embd)) {
  decode_rows.reserve(static_cast<size_t>(rows));
}

Workspace::Workspace(const Engine& engine, const WorkspaceOptions& opt) {
  if (opt.n_threads < 0 || opt.n_threads > 4096)
    throw Error(fmt::format("workspace: thread count {} must be in [0, 4096] (0: the engine's)", opt.n_threads));
  if (opt.prefill_attention && !prefill_attention_supported(*opt.prefill_attention))
    throw Error(
        fmt::format("workspace: prefill attention {} is unknown or not supported by this build and CPU "
                    "(bf16 needs AVX512-BF16, int8 AVX2)",
                    static_cast<int>(*opt.prefill_attention)));
  impl_ = std::make_unique<Impl>(engine.model_ptr(), opt.n_threads == 0 ? engine.n_threads() : opt.n_threads,
                                 opt.max_rows, opt.prefill_attention.value_or(engine.prefill_attention()));
}

Workspace::~Workspace() = default;

int Workspace::n_threads() const { return impl_->tc.n_threads(); }
int64_t Workspace::max_rows() const { return impl_->max_rows; }
PrefillAttention Workspace::prefill_attention() const { return impl_->attn.prefill_attention(); }

void Workspace::set_profiling(bool on) { impl_->profiling = on; }
bool Workspace::profiling() const { return impl_->profiling; }
const OpProfile& Workspace::profile() const { return impl_->profile; }
void Workspace::clear_profile() { impl_->profile = OpProfile{}; }

size_t Workspace::bytes() const {
  const Impl& w = *impl_;
  const ForwardBuffers& b = w.buf;
  size_t s = sizeof(float) * (b.xn.size() + b.q.size() + b.k.size() + b.v.size() + b.attn.size() + b.ffn_a.size() +
                              b.ffn_b.size() + w.x.size() + w.h_dec.size() + w.logits_tmp.size());
  s += sizeof(int32_t) * (w.pos.size() + w.pos_dec.size());
  s += w.tc.scratch_bytes() + w.attn.bytes() + w.decode.bytes() + sizeof(DecodeQuery) * w.decode_rows.capacity();
  return s;
}

}  // namespace snapkv
