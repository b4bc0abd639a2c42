// Workspace profiling (snapkv/op_profile.h): it changes no result, counts every operation once
// per layer and step, and its byte counts are the weight matrices' GGUF sizes and the KV bytes the
// caches hold when each decode row attends.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "gguf/gguf.h"
#include "runtime/runtime_util.h"

namespace snapkv {
namespace {

using rtest::prompt;

/// GGUF bytes of the tensors named blk.<l>.<suffix> over all layers.
double layer_bytes(const GGUFFile& f, int n_layer, const std::string& suffix) {
  double b = 0;
  for (int l = 0; l < n_layer; ++l) {
    const GGUFTensorInfo* t = f.find_tensor("blk." + std::to_string(l) + "." + suffix);
    EXPECT_NE(t, nullptr) << suffix;
    if (t) b += static_cast<double>(t->nbytes);
  }
  return b;
}

struct ProfiledRun {
  std::vector<std::vector<float>> logits;  // the prefill's, then each decode step's
  OpProfile profile;
};

// Prefill `p`, then `steps` greedy decode steps, with profiling on or off.
ProfiledRun run(const Engine& e, const std::vector<int32_t>& p, int steps, bool profiling, KVType kv) {
  SequenceOptions so;
  so.kv_type = kv;
  so.n_ctx = 1024;
  auto seq = e.new_sequence(so);
  Workspace ws(e);
  ws.set_profiling(profiling);
  EXPECT_EQ(ws.profiling(), profiling);
  ProfiledRun r;
  auto l = e.prefill(*seq, p, {}, ws);
  r.logits.emplace_back(l.begin(), l.end());
  Batch b;
  for (int s = 0; s < steps; ++s) {
    b.clear();
    b.add(*seq, argmax(r.logits.back()));
    e.step(b, ws);
    auto d = b.logits(0);
    r.logits.emplace_back(d.begin(), d.end());
  }
  r.profile = ws.profile();
  return r;
}

TEST(OpProfile, CountsEveryOperationAndChangesNoResult) {
  auto e = rtest::stories();
  const ModelInfo& info = e->info();
  const int L = info.n_layer, steps = 6;
  const auto p = prompt(40, info.n_vocab, 3);
  const ProfiledRun off = run(*e, p, steps, false, KVType::F16);
  const ProfiledRun on = run(*e, p, steps, true, KVType::F16);
  ASSERT_EQ(off.logits.size(), on.logits.size());
  for (size_t i = 0; i < on.logits.size(); ++i) EXPECT_EQ(off.logits[i], on.logits[i]) << "step " << i;

  // Off: nothing gathered.
  EXPECT_EQ(off.profile.decode.steps, 0);
  EXPECT_EQ(off.profile.prefill.steps, 0);
  for (const OpStats& s : off.profile.decode.ops) EXPECT_EQ(s.calls, 0);

  // The prompt fits one step (40 rows), the decode took `steps`.
  const StepProfile& pre = on.profile.prefill;
  const StepProfile& dec = on.profile.decode;
  EXPECT_EQ(pre.steps, 1);
  EXPECT_EQ(dec.steps, steps);
  EXPECT_EQ(pre[ProfileOp::Embed].calls, 0);  // a prompt's embeddings are made when its prefill starts
  EXPECT_EQ(pre[ProfileOp::Logits].calls, 1);
  const int64_t n = steps;
  EXPECT_EQ(dec[ProfileOp::Embed].calls, n);
  EXPECT_EQ(dec[ProfileOp::Logits].calls, n);
  for (const ProfileOp op : {ProfileOp::QKV, ProfileOp::QKNormRope, ProfileOp::KVAppend, ProfileOp::Attention,
                             ProfileOp::AttnOutput, ProfileOp::FfnGateUp, ProfileOp::FfnAct, ProfileOp::FfnDown}) {
    EXPECT_EQ(dec[op].calls, n * L) << profile_op_name(op);
    EXPECT_EQ(pre[op].calls, L) << profile_op_name(op);
  }
  EXPECT_EQ(dec[ProfileOp::Norm].calls, 2 * n * L);  // llama: before attention and before the FFN
  EXPECT_EQ(dec[ProfileOp::Residual].calls, 2 * n * L);

  // Bytes: each projection reads its matrix once per call; the output matrix per logits call.
  const GGUFFile f = GGUFFile::open((test::shared_dir() / "models" / "stories260K.gguf").string());
  const double qkv =
      layer_bytes(f, L, "attn_q.weight") + layer_bytes(f, L, "attn_k.weight") + layer_bytes(f, L, "attn_v.weight");
  EXPECT_EQ(dec[ProfileOp::QKV].bytes, static_cast<double>(n) * qkv);
  EXPECT_EQ(dec[ProfileOp::AttnOutput].bytes, static_cast<double>(n) * layer_bytes(f, L, "attn_output.weight"));
  EXPECT_EQ(dec[ProfileOp::FfnGateUp].bytes,
            static_cast<double>(n) * (layer_bytes(f, L, "ffn_gate.weight") + layer_bytes(f, L, "ffn_up.weight")));
  EXPECT_EQ(dec[ProfileOp::FfnDown].bytes, static_cast<double>(n) * layer_bytes(f, L, "ffn_down.weight"));
  const GGUFTensorInfo* out = f.find_tensor("output.weight");
  if (out == nullptr) out = f.find_tensor("token_embd.weight");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(dec[ProfileOp::Logits].bytes, static_cast<double>(n) * static_cast<double>(out->nbytes));
  for (const ProfileOp op : {ProfileOp::Embed, ProfileOp::Norm, ProfileOp::QKNormRope, ProfileOp::KVAppend,
                             ProfileOp::FfnAct, ProfileOp::Residual})
    EXPECT_EQ(dec[op].bytes, 0) << profile_op_name(op);
  // Attention: at decode step s every layer holds prompt + s + 1 entries (this token's appended
  // first), of n_head_kv x (K + V) F16 rows.
  const double entry = static_cast<double>(L) * info.n_head_kv * 2.0 * 2.0 * info.head_dim;
  double kv = 0;
  for (int s = 0; s < steps; ++s) kv += static_cast<double>(p.size() + static_cast<size_t>(s) + 1) * entry;
  EXPECT_EQ(dec[ProfileOp::Attention].bytes, kv);

  // Times: every op that ran took some, and together no more than the steps.
  double sum = 0;
  for (int i = 0; i < kProfileOpCount; ++i) {
    const OpStats& s = dec.ops[static_cast<size_t>(i)];
    EXPECT_GT(s.seconds, 0.0) << profile_op_name(static_cast<ProfileOp>(i));
    sum += s.seconds;
  }
  EXPECT_LE(sum, dec.seconds);
  EXPECT_GT(pre.seconds, 0.0);
}

TEST(OpProfile, ClearAndSwitchOff) {
  auto e = rtest::stories();
  auto seq = e->new_sequence({});
  Workspace ws(*e);
  ws.set_profiling(true);
  auto l = e->prefill(*seq, prompt(20, e->info().n_vocab, 4), {}, ws);
  Batch b;
  b.add(*seq, argmax(l));
  e->step(b, ws);
  EXPECT_EQ(ws.profile().decode.steps, 1);
  const int32_t next = argmax(b.logits(0));
  ws.set_profiling(false);  // keeps what was gathered, adds nothing more
  b.clear();
  b.add(*seq, next);
  e->step(b, ws);
  EXPECT_EQ(ws.profile().decode.steps, 1);
  EXPECT_EQ(ws.profile().decode[ProfileOp::QKV].calls, e->info().n_layer);
  ws.clear_profile();
  EXPECT_EQ(ws.profile().decode.steps, 0);
  EXPECT_EQ(ws.profile().prefill.steps, 0);
  EXPECT_EQ(ws.profile().decode[ProfileOp::QKV].calls, 0);
}

TEST(OpProfile, GemmaCountsItsFourNormsAndQKNorms) {
  auto e = rtest::gemma();
  if (!e) GTEST_SKIP() << "Gemma 3 270M not in the model cache (scripts/get-model.sh gemma3)";
  const int L = e->info().n_layer;
  const ProfiledRun on = run(*e, prompt(600, e->info().n_vocab, 5, 2), 2, true, KVType::F16);
  const StepProfile& dec = on.profile.decode;
  EXPECT_EQ(dec.steps, 2);
  EXPECT_EQ(dec[ProfileOp::Norm].calls, 2 * 4 * L);  // before and after attention and FFN
  EXPECT_EQ(dec[ProfileOp::QKNormRope].calls, 2 * L);
  EXPECT_EQ(dec[ProfileOp::Residual].calls, 2 * 2 * L);
  // Attention: a decode row reads its whole cache in the full layers (600 + s + 1 entries at step
  // s) and a sliding layer's last 512 (its window; the layer holds 511 or more after the append).
  const ModelInfo& info = e->info();
  const double entry = info.n_head_kv * 2.0 * 2.0 * info.head_dim;  // K + V, F16, per layer
  double kv = 0;
  for (int s = 0; s < 2; ++s)
    for (int l = 0; l < L; ++l) kv += entry * (info.layer_window[static_cast<size_t>(l)] > 0 ? 512.0 : 600.0 + s + 1);
  EXPECT_EQ(dec[ProfileOp::Attention].bytes, kv);
  // Tied embeddings: the logits read token_embd (Q8_0).
  const GGUFFile f = GGUFFile::open(test::gemma_path().string());
  EXPECT_EQ(dec[ProfileOp::Logits].bytes, 2.0 * static_cast<double>(f.find_tensor("token_embd.weight")->nbytes));
}

}  // namespace
}  // namespace snapkv
