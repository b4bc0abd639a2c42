// Architecture `gemma3` (Gemma 3 text models): hyper-parameters, weights and the block
//   a = Wo Attn(RoPE(n_q(Wq n(h))), RoPE(n_k(Wk n(h))), Wv n(h));  h += n_post(a)
//   f = Wdown (gelu_tanh(Wgate n(h)) * Wup n(h));                   h += n_postffw(f)
// with RMSNorm n (GGUF norm weights already include Gemma's +1), embeddings scaled by
// sqrt(n_embd), 5 sliding-window layers (window `attention.sliding_window`, RoPE base 10000)
// per full-attention layer (RoPE base `rope.freq_base`), NeoX RoPE, tied output
// (Gemma 3 technical report, Sec. 2; llama.cpp llm_build_gemma3).
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "model/arch.h"
#include "model/norm.h"
#include "model/op_timer.h"
#include "snapkv/error.h"

namespace snapkv {

namespace {

constexpr int kSwaPattern = 6;  // layer il uses a sliding window iff il % 6 < 5

class Gemma3Model final : public Model {
 public:
  explicit Gemma3Model(GGUFFile&& f) : Model(std::move(f)) {
    read_config();
    bind_weights();
    prepare_decode_layouts();
  }

  void run_block(int il, BlockBatch& b) const override {
    const LayerWeights& L = layers_[static_cast<size_t>(il)];
    ForwardBuffers& B = *b.buf;
    const int64_t E = cfg_.n_embd, n = b.n;
    const float eps = cfg_.rms_eps;
    const int nt = b.tc->n_threads();
    {
      OpTimer t(b.profile, ProfileOp::Norm);
      rms_norm_rows(b.h, E, L.attn_norm.data(), B.xn.data(), E, E, n, eps, nt);
    }
    attention_block(il, b, B.xn.data());  // B.xn = Wo attn
    {
      OpTimer t(b.profile, ProfileOp::Norm);
      rms_norm_rows(B.xn.data(), E, L.post_attn_norm.data(), B.xn.data(), E, E, n, eps, nt);
    }
    {
      OpTimer t(b.profile, ProfileOp::Residual);
      for (int64_t i = 0; i < n * E; ++i) b.h[i] += B.xn[static_cast<size_t>(i)];
    }
    {
      OpTimer t(b.profile, ProfileOp::Norm);
      rms_norm_rows(b.h, E, L.ffn_norm.data(), B.xn.data(), E, E, n, eps, nt);
    }
    const MatmulProduct gate_up[] = {{L.ffn_gate, B.ffn_a.data()}, {L.ffn_up, B.ffn_b.data()}};
    {
      OpTimer t(b.profile, ProfileOp::FfnGateUp, matrix_bytes(L.ffn_gate) + matrix_bytes(L.ffn_up));
      matmul_group(gate_up, B.xn.data(), n, *b.tc);
    }
    {
      OpTimer t(b.profile, ProfileOp::FfnAct);
      geglu_inplace(B.ffn_a.data(), B.ffn_b.data(), n * cfg_.n_ff, nt);
    }
    {
      OpTimer t(b.profile, ProfileOp::FfnDown, matrix_bytes(L.ffn_down));
      matmul(L.ffn_down, B.ffn_a.data(), n, B.xn.data(), *b.tc);
    }
    {
      OpTimer t(b.profile, ProfileOp::Norm);
      rms_norm_rows(B.xn.data(), E, L.post_ffn_norm.data(), B.xn.data(), E, E, n, eps, nt);
    }
    OpTimer t(b.profile, ProfileOp::Residual);
    for (int64_t i = 0; i < n * E; ++i) b.h[i] += B.xn[static_cast<size_t>(i)];
  }

 private:
  void read_config() {
    const GGUFFile& f = gguf_;
    ModelConfig& c = cfg_;
    read_common_hparams(f, "gemma3", /*default_rms_eps=*/1e-6f, /*default_rope_base=*/1000000.0f, c);
    c.rope_base_swa = 10000.0f;  // fixed for Gemma 3's local layers (llama.cpp: rope_freq_base_train_swa)
    c.sliding_window = static_cast<int>(read_int(f, "gemma3.attention.sliding_window", 1, int64_t{1} << 30));
    c.layer_is_swa.resize(static_cast<size_t>(c.n_layer));
    for (int il = 0; il < c.n_layer; ++il)
      c.layer_is_swa[static_cast<size_t>(il)] = (il % kSwaPattern) < kSwaPattern - 1 ? 1 : 0;
    // Gemma 3 27B (62 layers) scales queries by 1/sqrt(n_embd / n_head); the others by 1/sqrt(head_dim).
    c.attn_scale = c.n_layer == 62 ? 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head))
                                   : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
    c.rope_type = RopeType::NeoX;
    c.ffn_act = FfnActivation::GeluTanh;
    c.qk_norm = true;
    c.post_norms = true;
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

    const int64_t q_dim = static_cast<int64_t>(c.n_head) * c.head_dim;
    const int64_t kv_dim = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
    layers_.resize(static_cast<size_t>(c.n_layer));
    for (int il = 0; il < c.n_layer; ++il) {
      const std::string p = fmt::format("blk.{}.", il);
      LayerWeights& L = layers_[static_cast<size_t>(il)];
      L.attn_norm = bind_vector(p + "attn_norm.weight", c.n_embd);
      L.wq = bind_matrix(p + "attn_q.weight", q_dim, c.n_embd);
      L.wk = bind_matrix(p + "attn_k.weight", kv_dim, c.n_embd);
      L.wv = bind_matrix(p + "attn_v.weight", kv_dim, c.n_embd);
      L.q_norm = bind_vector(p + "attn_q_norm.weight", c.head_dim);
      L.k_norm = bind_vector(p + "attn_k_norm.weight", c.head_dim);
      L.wo = bind_matrix(p + "attn_output.weight", c.n_embd, q_dim);
      L.post_attn_norm = bind_vector(p + "post_attention_norm.weight", c.n_embd);
      L.ffn_norm = bind_vector(p + "ffn_norm.weight", c.n_embd);
      L.ffn_gate = bind_matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd);
      L.ffn_up = bind_matrix(p + "ffn_up.weight", c.n_ff, c.n_embd);
      L.ffn_down = bind_matrix(p + "ffn_down.weight", c.n_embd, c.n_ff);
      L.post_ffn_norm = bind_vector(p + "post_ffw_norm.weight", c.n_embd);
    }
  }
};

}  // namespace

std::shared_ptr<const Model> make_gemma3_model(GGUFFile&& f) { return std::make_shared<Gemma3Model>(std::move(f)); }

}  // namespace snapkv
