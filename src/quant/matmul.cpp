// snapkv: matmul entry point: argument checks, then the per-type kernel.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <span>
#include <string_view>

#include "quant/act_quant.h"
#include "quant/matmul_impl.h"
#include "quant/quant.h"
#include "quant/simd.h"
#include "snapkv/error.h"

namespace snapkv {

namespace quant {

bool token_lanes_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("SNAPKV_TOKEN_LANES");
    return v == nullptr || std::string_view(v) != "0";
  }();
  return on;
}

int64_t lane_min_tokens(GGMLType t) {
#if defined(SNAPKV_AVX2) && !defined(SNAPKV_VNNI)
  switch (t) {
    case GGMLType::Q4_K:
    case GGMLType::Q5_K:
    case GGMLType::Q6_K:
      return 12;
    case GGMLType::Q8_0:
      return 16;
    default:
      return 8;
  }
#else
  (void)t;
  return 8;
#endif
}

}  // namespace quant

namespace {

const quant::MatmulOps& ops_for(GGMLType t) {
  switch (t) {
    case GGMLType::Q4_0:
      return quant::kOpsQ4_0;
    case GGMLType::Q4_1:
      return quant::kOpsQ4_1;
    case GGMLType::Q5_0:
      return quant::kOpsQ5_0;
    case GGMLType::Q5_1:
      return quant::kOpsQ5_1;
    case GGMLType::Q8_0:
      return quant::kOpsQ8_0;
    case GGMLType::Q4_K:
      return quant::kOpsQ4_K;
    case GGMLType::Q5_K:
      return quant::kOpsQ5_K;
    case GGMLType::Q6_K:
      return quant::kOpsQ6_K;
    case GGMLType::F32:
      return quant::kOpsF32;
    case GGMLType::F16:
      return quant::kOpsF16;
    case GGMLType::BF16:
      return quant::kOpsBF16;
    default:
      throw Error(
          fmt::format("matmul: weight type {} has no snapkv kernels", ggml_type_name(static_cast<uint32_t>(t))));
  }
}

/// What a checked product needs.
enum class Work { kNone, kZero, kCompute };

/// Checks one product's arguments (snapkv::Error naming what is wrong): kNone when there is
/// nothing to compute (no tokens or rows), kZero when W has no columns (Y = 0).
Work check(const WeightView& W, const float* X, int64_t n_tokens, const float* Y) {
  const auto id = static_cast<uint32_t>(W.type);
  if (!ggml_type_known(id) || !ggml_type_supported(W.type)) {
    throw Error(fmt::format("matmul: weight type {} has no snapkv kernels", ggml_type_name(id)));
  }
  const int64_t bs = ggml_type_traits(id).block_size;
  if (W.cols < 0 || W.cols % bs != 0) {
    throw Error(
        fmt::format("matmul: {} columns is not a multiple of the {} block size {}", W.cols, ggml_type_name(id), bs));
  }
  if (W.rows < 0) throw Error(fmt::format("matmul: negative row count {}", W.rows));
  if (n_tokens < 0) throw Error(fmt::format("matmul: negative token count {}", n_tokens));
  if (n_tokens == 0 || W.rows == 0) return Work::kNone;
  if (Y == nullptr || (W.cols > 0 && (X == nullptr || W.data == nullptr))) {
    throw Error("matmul: null weight, input or output pointer");
  }
  return W.cols == 0 ? Work::kZero : Work::kCompute;
}

/// Products per shared parallel region in matmul_group (a fixed array: no allocation per call).
constexpr size_t kMaxGroup = 8;

/// The group's decode-family path for products[0..n) (all checked): X converted once per weight
/// type into one scratch buffer, then one parallel region whose threads walk every product's row
/// blocks in turn (no barrier between products).
void run_group(const MatmulProduct* p, const quant::MatmulOps* const* ops, size_t n, const float* X, int64_t n_tokens,
               ThreadContext& tc) {
  size_t share[kMaxGroup];  // the first product with the same (type, cols): its conversion is used
  size_t offset[kMaxGroup];
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    share[i] = i;
    for (size_t j = 0; j < i; ++j) {
      if (p[j].W.type == p[i].W.type && p[j].W.cols == p[i].W.cols) {
        share[i] = j;
        break;
      }
    }
    offset[i] = share[i] == i ? total : offset[share[i]];
    if (share[i] == i) total += quant::round_up64(ops[i]->act_bytes(p[i].W.cols, n_tokens));
  }
  uint8_t* act = total > 0 ? tc.scratch(quant::kSlotAct, 0, total) : nullptr;
  quant::TileJob jobs[kMaxGroup];
  double macs = 0;
  for (size_t i = 0; i < n; ++i) {
    if (share[i] == i) {
      jobs[i] =
          ops[i]->prepare(p[i].W, X, n_tokens, p[i].Y, act == nullptr ? nullptr : act + offset[i], tc.n_threads());
    } else {
      const quant::TileJob& s = jobs[share[i]];
      jobs[i] = {quant::tile_ctx(p[i].W, s.ctx.act, s.ctx.a_stride, p[i].Y, tc.n_threads()), p[i].W.rows, n_tokens,
                 s.loop};
    }
    macs += jobs[i].macs();
  }
  const bool par = quant::tiles_parallel(macs);
  WorkSplit splits[kMaxGroup];  // per product (each of its own rows); shared by the team
  for (size_t i = 0; i < n; ++i) quant::share_rows(jobs[i].ctx, jobs[i].rows, par, splits[i]);
#pragma omp parallel num_threads(tc.n_threads()) if (par)
  for (size_t i = 0; i < n; ++i) jobs[i].loop(jobs[i].ctx, jobs[i].rows, jobs[i].n_tokens);
}

}  // namespace

void matmul(const WeightView& W, const float* X, int64_t n_tokens, float* Y, ThreadContext& tc) {
  switch (check(W, X, n_tokens, Y)) {
    case Work::kNone:
      return;
    case Work::kZero:
      std::fill(Y, Y + n_tokens * W.rows, 0.0f);
      return;
    case Work::kCompute:
      ops_for(W.type).matmul(W, X, n_tokens, Y, tc);
      return;
  }
}

void matmul_group(std::span<const MatmulProduct> products, const float* X, int64_t n_tokens, ThreadContext& tc) {
  for (size_t i = 0; i < products.size(); ++i) {  // every product checked before any is computed
    const MatmulProduct& p = products[i];
    if (p.W.cols != products[0].W.cols) {
      throw Error(
          fmt::format("matmul_group: product {} has {} columns, product 0 has {}", i, p.W.cols, products[0].W.cols));
    }
    check(p.W, X, n_tokens, p.Y);
  }
  // From 8 tokens on, separate calls (the quantized types take the token-lane kernels from
  // quant::lane_min_tokens on, in regions of their own; from 8 up to it, matmul's decode tiles give
  // the same bits as a group would).
  if (n_tokens >= 8 || products.size() == 1) {
    for (const MatmulProduct& p : products) matmul(p.W, X, n_tokens, p.Y, tc);
    return;
  }
  MatmulProduct group[kMaxGroup];
  const quant::MatmulOps* ops[kMaxGroup];
  size_t n = 0;
  for (const MatmulProduct& p : products) {
    const Work w = check(p.W, X, n_tokens, p.Y);
    if (w == Work::kZero) std::fill(p.Y, p.Y + n_tokens * p.W.rows, 0.0f);
    if (w != Work::kCompute) continue;
    group[n] = p;
    ops[n] = &ops_for(p.W.type);
    if (++n == kMaxGroup) {
      run_group(group, ops, n, X, n_tokens, tc);
      n = 0;
    }
  }
  if (n > 0) run_group(group, ops, n, X, n_tokens, tc);
}

}  // namespace snapkv
