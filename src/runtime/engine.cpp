// snapkv runtime: Engine loading, model information, sequences (see snapkv/engine.h).
#include "snapkv/engine.h"

#include <fmt/format.h>

#include "core/sha256.h"
#include "core/thread_context.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "runtime/sequence_state.h"
#include "snapkv/batch.h"
#include "snapkv/error.h"
#include "snapkv/sequence.h"
#include "snapkv/workspace.h"

namespace snapkv {

size_t ModelInfo::kv_bytes_per_token(KVType t) const { return kv_bytes_per_token(t, t); }

size_t ModelInfo::kv_bytes_per_token(KVType k, KVType v) const {
  return static_cast<size_t>(n_layer) * static_cast<size_t>(n_head_kv) * kv_entry_bytes(k, v, head_dim);
}

void Engine::check_options(const EngineOptions& opt) {
  if (opt.n_threads < 0 || opt.n_threads > 4096)
    throw Error(fmt::format("engine: thread count {} must be in [0, 4096] (0: all cores)", opt.n_threads));
  if (opt.prefill_attention != PrefillAttention::Exact && opt.prefill_attention != PrefillAttention::BF16 &&
      opt.prefill_attention != PrefillAttention::Int8)
    throw Error(fmt::format("engine: unknown prefill attention {}", static_cast<int>(opt.prefill_attention)));
  if (!prefill_attention_supported(opt.prefill_attention))
    throw Error(fmt::format(
        "engine: prefill attention '{}' is not supported by this build (it needs a CPU with {} and a build for it, "
        "-march=native on such a CPU); use 'exact'",
        prefill_attention_name(opt.prefill_attention),
        opt.prefill_attention == PrefillAttention::Int8 ? "AVX2" : "AVX512-BF16"));
}

std::shared_ptr<const Engine> Engine::load(const std::string& path, const EngineOptions& opt) {
  check_options(opt);
  return from_model(Model::load(path), opt);
}

std::shared_ptr<const Engine> Engine::from_model(std::shared_ptr<const Model> model, const EngineOptions& opt) {
  if (!model) throw Error("engine: no model");
  check_options(opt);
  std::shared_ptr<Engine> e(new Engine());
  e->model_ = std::move(model);
  const std::string path = e->model_->gguf().path();
  if (e->model_->gguf().has("tokenizer.ggml.model")) e->tokenizer_ = Tokenizer::from_gguf(e->model_->gguf());
  e->n_threads_ = opt.n_threads == 0 ? available_cores() : opt.n_threads;
  e->prefill_attention_ = opt.prefill_attention;
  const ModelConfig& c = e->model_->config();
  ModelInfo& i = e->info_;
  i.path = path;
  i.arch = c.arch;
  i.name = c.name;
  i.n_layer = c.n_layer;
  i.n_embd = c.n_embd;
  i.n_head = c.n_head;
  i.n_head_kv = c.n_head_kv;
  i.head_dim = c.head_dim;
  i.n_vocab = c.n_vocab;
  i.n_ctx_train = c.n_ctx_train;
  i.weight_bytes = e->model_->weight_bytes();
  for (int il = 0; il < c.n_layer; ++il) i.layer_window.push_back(c.layer_window(il));
  i.window_slack = KVCache::kSwaSlack;
  return e;
}

Engine::~Engine() = default;

const Tokenizer& Engine::tokenizer() const {
  if (!tokenizer_) throw Error(fmt::format("{}: the model has no tokenizer (tokenizer.ggml.model)", info_.path));
  return *tokenizer_;
}

const std::string& Engine::model_sha256() const {
  std::call_once(sha256_once_, [this] {
    const auto img = model_->gguf().bytes();
    sha256_ = sha256_hex(std::string_view(reinterpret_cast<const char*>(img.data()), img.size()));
  });
  return sha256_;
}

ChatFormat Engine::chat_format() const { return detect_chat_format(model_->gguf()); }

ChatTemplate Engine::chat_template() const { return ChatTemplate::from_gguf(model_->gguf(), tokenizer_.get()); }

std::unique_ptr<Sequence> Engine::new_sequence(const SequenceOptions& opt) const {
  if (opt.n_ctx < 0) throw Error(fmt::format("context size (-c) {} must be >= 1 (or 0 for the model's)", opt.n_ctx));
  const int64_t ctx = opt.n_ctx == 0 ? info_.n_ctx_train : opt.n_ctx;
  if (ctx < 1 || ctx > (int64_t{1} << 30)) throw Error(fmt::format("context size (-c) {} is out of range", ctx));
  return std::unique_ptr<Sequence>(new Sequence(std::make_unique<Sequence::State>(model_, opt, ctx)));
}

std::span<const float> Engine::prefill(Sequence& seq, std::span<const int32_t> tokens, const PrefillOptions& opt,
                                       Workspace& ws) const {
  seq.begin_prefill(tokens, opt);
  Batch b;
  b.add_prefill(seq, 0);
  try {
    step(b, ws);
  } catch (...) {
    seq.state().job.reset();  // a rejected step leaves the prefill pending: drop it
    throw;
  }
  if (b.prefills()[0].failure) std::rethrow_exception(b.prefills()[0].failure);  // the sequence was reset
  return seq.prefill_logits();
}

}  // namespace snapkv
