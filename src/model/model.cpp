// Model loading, weight binding and the parts of the forward pass shared by the architectures.
#include "model/model.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "core/fp16.h"
#include "model/arch.h"
#include "model/norm.h"
#include "model/op_timer.h"
#include "quant/kern_rowlane.h"
#include "quant/matmul_impl.h"
#include "snapkv/error.h"

namespace snapkv {

int64_t read_int(const GGUFFile& f, const std::string& key, int64_t lo, int64_t hi) {
  if (!f.has(key)) throw Error(fmt::format("{}: metadata key '{}' is missing", f.path(), key));
  const int64_t v = f.get_i64(key);
  if (v < lo || v > hi)
    throw Error(fmt::format("{}: metadata key '{}' = {} is outside [{}, {}]", f.path(), key, v, lo, hi));
  return v;
}

int64_t read_int_or(const GGUFFile& f, const std::string& key, int64_t def, int64_t lo, int64_t hi) {
  if (!f.has(key)) return def;
  return read_int(f, key, lo, hi);
}

float read_float(const GGUFFile& f, const std::string& key) {
  if (!f.has(key)) throw Error(fmt::format("{}: metadata key '{}' is missing", f.path(), key));
  const double v = f.get_f64(key);
  if (!std::isfinite(v) || v <= 0.0 || v > std::numeric_limits<float>::max())
    throw Error(fmt::format("{}: metadata key '{}' = {} must be a finite positive number", f.path(), key, v));
  return static_cast<float>(v);
}

float read_float_or(const GGUFFile& f, const std::string& key, float def) {
  if (!f.has(key)) return def;
  return read_float(f, key);
}

bool read_common_hparams(const GGUFFile& f, const std::string& arch, float default_rms_eps, float default_rope_base,
                         ModelConfig& c) {
  const auto key = [&arch](const char* k) { return arch + "." + k; };
  c.arch = arch;
  c.name = f.has("general.name") ? std::string(f.get_string("general.name")) : "";
  constexpr int64_t kBig = 1 << 20;
  c.n_embd = static_cast<int>(read_int(f, key("embedding_length"), 1, kBig));
  c.n_layer = static_cast<int>(read_int(f, key("block_count"), 1, 4096));
  c.n_ff = static_cast<int>(read_int(f, key("feed_forward_length"), 1, kBig));
  c.n_head = static_cast<int>(read_int(f, key("attention.head_count"), 1, 4096));
  c.n_head_kv = static_cast<int>(read_int_or(f, key("attention.head_count_kv"), c.n_head, 1, c.n_head));
  if (c.n_head % c.n_head_kv != 0)
    throw Error(
        fmt::format("{}: head_count {} is not a multiple of head_count_kv {}", f.path(), c.n_head, c.n_head_kv));
  c.head_dim = static_cast<int>(read_int_or(f, key("attention.key_length"), c.n_embd / c.n_head, 1, 65536));
  const int64_t v_len = read_int_or(f, key("attention.value_length"), c.head_dim, 1, 65536);
  if (v_len != c.head_dim)
    throw Error(
        fmt::format("{}: attention.value_length {} != key_length {} is not supported", f.path(), v_len, c.head_dim));
  c.n_rot = static_cast<int>(read_int_or(f, key("rope.dimension_count"), c.head_dim, 2, c.head_dim));
  if (c.n_rot % 2 != 0) throw Error(fmt::format("{}: rope.dimension_count {} must be even", f.path(), c.n_rot));
  c.n_ctx_train = read_int(f, key("context_length"), 1, int64_t{1} << 31);
  c.rms_eps = read_float_or(f, key("attention.layer_norm_rms_epsilon"), default_rms_eps);
  c.rope_base = read_float_or(f, key("rope.freq_base"), default_rope_base);
  const auto type = f.get_string_opt(key("rope.scaling.type"));
  if (!type || *type == "none") return false;
  if (*type != "linear")
    throw Error(fmt::format("{}: rope scaling type '{}' is not supported (none, linear)", f.path(), *type));
  c.rope_freq_scale = 1.0f / read_float(f, key("rope.scaling.factor"));
  return true;
}

std::shared_ptr<const Model> Model::load(const std::string& path) {
  GGUFFile f = GGUFFile::open(path);
  if (!f.has("general.architecture"))
    throw Error(fmt::format("{}: metadata key 'general.architecture' is missing", path));
  const std::string arch(f.get_string("general.architecture"));
  if (arch == "llama") return make_llama_model(std::move(f));
  if (arch == "gemma3") return make_gemma3_model(std::move(f));
  throw Error(fmt::format("{}: unsupported architecture '{}' (supported: llama, gemma3)", path, arch));
}

Model::Model(GGUFFile&& f) : gguf_(std::move(f)) {}
Model::~Model() = default;

namespace {

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", d[i]);
  return s + "]";
}

}  // namespace

WeightView Model::bind_matrix(const std::string& name, int64_t rows, int64_t cols, bool required) {
  const GGUFTensorInfo* t = gguf_.find_tensor(name);
  if (!t) {
    if (required) throw Error(fmt::format("{}: tensor '{}' is missing", gguf_.path(), name));
    return {};
  }
  const bool shape_ok = (t->dims.size() == 2 && t->dims[0] == cols && t->dims[1] == rows) ||
                        (t->dims.size() == 1 && rows == 1 && t->dims[0] == cols);
  if (!shape_ok)
    throw Error(fmt::format("{}: tensor '{}' has shape {}, expected [{}, {}]", gguf_.path(), name, dims_str(t->dims),
                            cols, rows));
  if (!ggml_type_supported(t->ggml_type()))
    throw Error(fmt::format("{}: tensor '{}' has unsupported type {}", gguf_.path(), name, ggml_type_name(t->type)));
  if (cols % ggml_type_traits(t->type).block_size != 0)
    throw Error(fmt::format("{}: tensor '{}': {} columns are not a multiple of the {} block size", gguf_.path(), name,
                            cols, ggml_type_name(t->type)));
  weight_bytes_ += t->nbytes;
  return WeightView{t->ggml_type(), rows, cols, t->data};
}

std::vector<float> Model::bind_vector(const std::string& name, int64_t n, bool required) {
  const GGUFTensorInfo* t = gguf_.find_tensor(name);
  if (!t) {
    if (required) throw Error(fmt::format("{}: tensor '{}' is missing", gguf_.path(), name));
    return {};
  }
  if (t->n_elements() != n || t->dims.empty() || t->dims[0] != n)
    throw Error(fmt::format("{}: tensor '{}' has shape {}, expected [{}]", gguf_.path(), name, dims_str(t->dims), n));
  const GGMLType ty = t->ggml_type();
  if (ty != GGMLType::F32 && ty != GGMLType::F16 && ty != GGMLType::BF16)
    throw Error(fmt::format("{}: tensor '{}' has unsupported type {} (expected F32, F16 or BF16)", gguf_.path(), name,
                            ggml_type_name(t->type)));
  weight_bytes_ += t->nbytes;
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(ty, t->data, out.data(), n);
  return out;
}

AttentionParams Model::attention_params(int il) const {
  AttentionParams p;
  p.n_head = cfg_.n_head;
  p.n_head_kv = cfg_.n_head_kv;
  p.head_dim = cfg_.head_dim;
  p.scale = cfg_.attn_scale;
  p.window = cfg_.layer_window(il);
  return p;
}

RopeParams Model::rope_params(int il) const {
  RopeParams r;
  r.type = cfg_.rope_type;
  r.n_rot = cfg_.n_rot;
  r.head_dim = cfg_.head_dim;
  const bool swa = cfg_.layer_window(il) > 0;
  r.base = swa ? cfg_.rope_base_swa : cfg_.rope_base;
  r.freq_scale = swa ? 1.0f : cfg_.rope_freq_scale;
  r.freq_factors = rope_freqs_.empty() ? nullptr : rope_freqs_.data();
  return r;
}

void Model::embed(std::span<const int32_t> tokens, float* out) const {
  const int64_t E = cfg_.n_embd;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t id = tokens[i];
    if (id < 0 || id >= cfg_.n_vocab)
      throw Error(fmt::format("token id {} at index {} is outside the vocabulary [0, {})", id, i, cfg_.n_vocab));
  }
  const auto n = static_cast<int64_t>(tokens.size());
  for (int64_t i = 0; i < n; ++i) {
    float* row = out + i * E;
    const int32_t id = tokens[static_cast<size_t>(i)];
    if (output_rowlane_ != nullptr && cfg_.tied_output) {  // the repacked rows: the GGUF pages stay dropped
      quant::dequantize_rowlane_q8_0_row(output_rowlane_.get(), E, id, row);
    } else {
      dequantize_row(tok_embd_.type, tok_embd_.row(id), row, E);
    }
    if (cfg_.embd_scale != 1.0f)
      for (int64_t d = 0; d < E; ++d) row[d] *= cfg_.embd_scale;
  }
}

void Model::logits(const float* h, int64_t n, float* out, float* tmp, ThreadContext& tc) const {
  const int64_t E = cfg_.n_embd;
  rms_norm_rows(h, E, output_norm_.data(), tmp, E, E, n, cfg_.rms_eps, tc.n_threads());
  if (output_rowlane_ != nullptr && n >= 1 && n <= quant::kRowLaneMaxTokens) {
    quant::matmul_rowlane_q8_0(output_rowlane_.get(), output_.rows, E, tmp, n, out, tc);
    return;
  }
  matmul(output_, tmp, n, out, tc);
}

void Model::prepare_decode_layouts() {
  if constexpr (!quant::kRowLaneSupported) return;
  const char* env = std::getenv("SNAPKV_ROWLANE");
  const bool on = !(env != nullptr && std::string_view(env) == "0") && quant::token_lanes_enabled();
  const WeightView& W = output_;
  if (!on || W.data == nullptr || W.type != GGMLType::Q8_0 || W.cols % 32 != 0 || W.rows < 1) return;
  const size_t bytes = quant::rowlane_q8_0_bytes(W.rows, W.cols);
  output_rowlane_.reset(new uint8_t[bytes]);
  output_rowlane_bytes_ = bytes;
  // In chunks, each chunk's GGUF pages dropped once packed (a file mapping would read them again
  // on demand; nothing does: a tied matrix's embedding lookups read the repacked rows): the file
  // pages and the copy never both stay resident, so the process's memory stays what the logits'
  // reads of the GGUF rows made it. On the loading thread alone (the engine starts no threads of
  // its own; Gemma 3's 178 MB take ~0.1 s).
  const int64_t ng = (W.rows + quant::kRowLaneRows - 1) / quant::kRowLaneRows;
  constexpr int64_t kChunkGroups = 256;  // 256 x 16 rows
  const size_t stride = W.row_bytes();
  const bool drop = gguf_.mapped();
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (int64_t g0 = 0; g0 < ng; g0 += kChunkGroups) {
    const int64_t g1 = std::min(ng, g0 + kChunkGroups);
    quant::pack_rowlane_q8_0_groups(W.data, stride, W.rows, W.cols, output_rowlane_.get(), g0, g1);
    if (drop) {
      const auto lo = reinterpret_cast<uintptr_t>(W.data + static_cast<size_t>(g0 * quant::kRowLaneRows) * stride);
      const auto hi = reinterpret_cast<uintptr_t>(
          W.data + static_cast<size_t>(std::min(W.rows, g1 * quant::kRowLaneRows)) * stride);
      const uintptr_t a = (lo + page - 1) / page * page, e = hi / page * page;
      if (e > a) ::madvise(reinterpret_cast<void*>(a), e - a, MADV_DONTNEED);  // only a hint: errors ignored
    }
  }
}

void Model::attention_block(int il, BlockBatch& b, const float* x_normed) const {
  const LayerWeights& L = layers_[static_cast<size_t>(il)];
  ForwardBuffers& B = *b.buf;
  const int hd = cfg_.head_dim;
  const int64_t q_dim = static_cast<int64_t>(cfg_.n_head) * hd;
  const int64_t kv_dim = static_cast<int64_t>(cfg_.n_head_kv) * hd;
  const int64_t n = b.n;

  ThreadContext& tc = *b.tc;
  const int nt = tc.n_threads();
  const MatmulProduct qkv[] = {{L.wq, B.q.data()}, {L.wk, B.k.data()}, {L.wv, B.v.data()}};
  OpTimer t_qkv(b.profile, ProfileOp::QKV, matrix_bytes(L.wq) + matrix_bytes(L.wk) + matrix_bytes(L.wv));
  matmul_group(qkv, x_normed, n, tc);
  t_qkv.stop();
  OpTimer t_rope(b.profile, ProfileOp::QKNormRope);
  if (cfg_.qk_norm) {
    rms_norm_rows(B.q.data(), hd, L.q_norm.data(), B.q.data(), hd, hd, n * cfg_.n_head, cfg_.rms_eps, nt);
    rms_norm_rows(B.k.data(), hd, L.k_norm.data(), B.k.data(), hd, hd, n * cfg_.n_head_kv, cfg_.rms_eps, nt);
  }
  const RopeParams rp = rope_params(il);
  rope_rows(rp, b.pos, n, B.q.data(), q_dim, cfg_.n_head, nt);
  rope_rows(rp, b.pos, n, B.k.data(), kv_dim, cfg_.n_head_kv, nt);
  t_rope.stop();

  OpTimer t_append(b.profile, ProfileOp::KVAppend);
  for (const BlockSpan& s : b.spans) {
    for (int g = 0; g < cfg_.n_head_kv; ++g)
      s.cache->heads[static_cast<size_t>(g)].append(s.n, b.pos + s.row0, B.k.data() + s.row0 * kv_dim + g * hd, kv_dim,
                                                    B.v.data() + s.row0 * kv_dim + g * hd, kv_dim);
  }
  t_append.stop();
  // Attention: spans of several rows (prefill chunks) one by one with the blocked kernel; the
  // one-row spans (decode rows of many sequences) together in one split-K call.
  double kv_bytes = 0;  // what the rows read: a decode row the window's entries, a prefill chunk all held
  if (b.profile != nullptr)
    for (const BlockSpan& s : b.spans)
      for (const KVHeadCache& hc : s.cache->heads) {
        const int64_t n_read =
            s.n == 1 && s.cache->window > 0 ? std::min<int64_t>(hc.size(), s.cache->window) : hc.size();
        kv_bytes += static_cast<double>(n_read) * static_cast<double>(hc.k_row_bytes() + hc.v_row_bytes());
      }
  OpTimer t_attn(b.profile, ProfileOp::Attention, kv_bytes);
  const AttentionParams ap = attention_params(il);
  std::vector<DecodeQuery>& rows = *b.decode_rows;
  rows.clear();
  for (const BlockSpan& s : b.spans) {
    if (s.n == 1) {
      rows.push_back({B.q.data() + s.row0 * q_dim, b.pos[s.row0], s.cache, B.attn.data() + s.row0 * q_dim});
      continue;
    }
    attention(ap, B.q.data() + s.row0 * q_dim, b.pos + s.row0, s.n, *s.cache, B.attn.data() + s.row0 * q_dim,
              *b.attn_ws, nt);
  }
  if (!rows.empty()) attention_decode(ap, rows, *b.decode_ws, nt);
  t_attn.stop();
  OpTimer t_wo(b.profile, ProfileOp::AttnOutput, matrix_bytes(L.wo));
  matmul(L.wo, B.attn.data(), n, B.xn.data(), tc);
}

void Model::forward_layer(int il, BlockBatch& b) const {
  if (il < 0 || il >= cfg_.n_layer) throw Error(fmt::format("block batch: layer {} of {}", il, cfg_.n_layer));
  int64_t next = 0;
  for (const BlockSpan& s : b.spans) {
    if (s.row0 != next || s.n < 1 || s.cache == nullptr)
      throw Error(fmt::format("block batch: span at row {} ({} rows) does not continue at row {}", s.row0, s.n, next));
    next += s.n;
  }
  if (next != b.n) throw Error(fmt::format("block batch: spans cover {} of {} rows", next, b.n));
  if (b.buf == nullptr || b.attn_ws == nullptr || b.decode_ws == nullptr || b.decode_rows == nullptr ||
      b.tc == nullptr || b.n > b.buf->capacity)
    throw Error(fmt::format("block batch: {} rows without buffers for them", b.n));
  run_block(il, b);
}

ForwardBuffers::ForwardBuffers(const ModelConfig& c, int64_t cap) : capacity(cap) {
  const auto n = static_cast<size_t>(cap);
  xn.resize(n * static_cast<size_t>(c.n_embd));
  q.resize(n * static_cast<size_t>(c.n_head) * static_cast<size_t>(c.head_dim));
  k.resize(n * static_cast<size_t>(c.n_head_kv) * static_cast<size_t>(c.head_dim));
  v.resize(k.size());
  attn.resize(q.size());
  ffn_a.resize(n * static_cast<size_t>(c.n_ff));
  ffn_b.resize(ffn_a.size());
}

}  // namespace snapkv
