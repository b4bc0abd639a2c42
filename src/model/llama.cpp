// Architecture `llama` (Llama 2/3, Mistral, TinyLlama, SmolLM): hyper-parameters, weights and
// the pre-norm block  h += Wo Attn(RoPE(Wq n(h)), RoPE(Wk n(h)), Wv n(h));
//                     h += Wdown (silu(Wgate n(h)) * Wup n(h))   with n = RMSNorm
// (Touvron et al. 2023, Sec. 2.2; llama.cpp llm_build_llama).
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "model/arch.h"
#include "model/norm.h"
#include "model/op_timer.h"
#include "snapkv/error.h"

namespace snapkv {

namespace {

class LlamaModel final : public Model {
 public:
  explicit LlamaModel(GGUFFile&& f) : Model(std::move(f)) {
    read_config();
    bind_weights();
    prepare_decode_layouts();
  }

  void run_block(int il, BlockBatch& b) const override {
    const LayerWeights& L = layers_[static_cast<size_t>(il)];
    ForwardBuffers& B = *b.buf;
    const int64_t E = cfg_.n_embd, n = b.n;
    {
      OpTimer t(b.profile, ProfileOp::Norm);
      rms_norm_rows(b.h, E, L.attn_norm.data(), B.xn.data(), E, E, n, cfg_.rms_eps, b.tc->n_threads());
    }
    attention_block(il, b, B.xn.data());  // B.xn = Wo attn
    {
      OpTimer t(b.profile, ProfileOp::Residual);
      for (int64_t i = 0; i < n * E; ++i) b.h[i] += B.xn[static_cast<size_t>(i)];
    }
    {
      OpTimer t(b.profile, ProfileOp::Norm);
      rms_norm_rows(b.h, E, L.ffn_norm.data(), B.xn.data(), E, E, n, cfg_.rms_eps, b.tc->n_threads());
    }
    const MatmulProduct gate_up[] = {{L.ffn_gate, B.ffn_a.data()}, {L.ffn_up, B.ffn_b.data()}};
    {
      OpTimer t(b.profile, ProfileOp::FfnGateUp, matrix_bytes(L.ffn_gate) + matrix_bytes(L.ffn_up));
      matmul_group(gate_up, B.xn.data(), n, *b.tc);
    }
    {
      OpTimer t(b.profile, ProfileOp::FfnAct);
      swiglu_inplace(B.ffn_a.data(), B.ffn_b.data(), n * cfg_.n_ff, b.tc->n_threads());
    }
    {
      OpTimer t(b.profile, ProfileOp::FfnDown, matrix_bytes(L.ffn_down));
      matmul(L.ffn_down, B.ffn_a.data(), n, B.xn.data(), *b.tc);
    }
    OpTimer t(b.profile, ProfileOp::Residual);
    for (int64_t i = 0; i < n * E; ++i) b.h[i] += B.xn[static_cast<size_t>(i)];
  }

 private:
  void read_config() {
    const GGUFFile& f = gguf_;
    ModelConfig& c = cfg_;
    const bool scaled = read_common_hparams(f, "llama", /*default_rms_eps=*/1e-5f, /*default_rope_base=*/10000.0f, c);
    c.rope_base_swa = c.rope_base;
    // Older conversions give linear scaling as `rope.scale_linear` instead of rope.scaling.*.
    if (!scaled && f.has("llama.rope.scale_linear"))
      c.rope_freq_scale = 1.0f / read_float(f, "llama.rope.scale_linear");
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    c.embd_scale = 1.0f;
    c.rope_type = RopeType::Normal;
    c.ffn_act = FfnActivation::SiLU;
    c.sliding_window = 0;
    c.layer_is_swa.assign(static_cast<size_t>(c.n_layer), 0);
    c.qk_norm = false;
    c.post_norms = false;
  }

  void bind_weights() {
    ModelConfig& c = cfg_;
    const GGUFTensorInfo* te = gguf_.find_tensor("token_embd.weight");
    if (!te) throw Error(fmt::format("{}: tensor 'token_embd.weight' is missing", gguf_.path()));
    if (te->dims.size() != 2 || te->dims[0] != c.n_embd || te->dims[1] < 1 || te->dims[1] > (int64_t{1} << 31) - 1)
      throw Error(fmt::format("{}: tensor 'token_embd.weight' has a bad shape (n_embd {})", gguf_.path(), c.n_embd));
    c.n_vocab = static_cast<int>(te->dims[1]);
    tok_embd_ = bind_matrix("token_embd.weight", c.n_vocab, c.n_embd);
    output_norm_ = bind_vector("output_norm.weight", c.n_embd);
    output_ = bind_matrix("output.weight", c.n_vocab, c.n_embd, /*required=*/false);
    c.tied_output = output_.data == nullptr;
    if (c.tied_output) output_ = tok_embd_;
    rope_freqs_ = bind_vector("rope_freqs.weight", c.n_rot / 2, /*required=*/false);

    const int64_t q_dim = static_cast<int64_t>(c.n_head) * c.head_dim;
    const int64_t kv_dim = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
    layers_.resize(static_cast<size_t>(c.n_layer));
    for (int il = 0; il < c.n_layer; ++il) {
      const std::string p = fmt::format("blk.{}.", il);
      for (const char* unsupported :
           {"ffn_gate_inp.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias", "attn_qkv.weight"})
        if (gguf_.find_tensor(p + unsupported))
          throw Error(fmt::format("{}: tensor '{}{}' is not supported by the llama block (MoE, biases, fused QKV)",
                                  gguf_.path(), p, unsupported));
      LayerWeights& L = layers_[static_cast<size_t>(il)];
      L.attn_norm = bind_vector(p + "attn_norm.weight", c.n_embd);
      L.wq = bind_matrix(p + "attn_q.weight", q_dim, c.n_embd);
      L.wk = bind_matrix(p + "attn_k.weight", kv_dim, c.n_embd);
      L.wv = bind_matrix(p + "attn_v.weight", kv_dim, c.n_embd);
      L.wo = bind_matrix(p + "attn_output.weight", c.n_embd, q_dim);
      L.ffn_norm = bind_vector(p + "ffn_norm.weight", c.n_embd);
      L.ffn_gate = bind_matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd);
      L.ffn_up = bind_matrix(p + "ffn_up.weight", c.n_ff, c.n_embd);
      L.ffn_down = bind_matrix(p + "ffn_down.weight", c.n_embd, c.n_ff);
    }
  }
};

}  // namespace

std::shared_ptr<const Model> make_llama_model(GGUFFile&& f) { return std::make_shared<LlamaModel>(std::move(f)); }

}  // namespace snapkv
