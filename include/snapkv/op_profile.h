// snapkv: where the time of a forward step goes, per kind of operation (Workspace::set_profiling).
//
// With profiling on, Engine::step times every operation of the forward pass with a steady clock
// (after the operation returns; the kernels' own threads have joined by then) and adds the bytes
// it reads from memory, so that a memory-bound decode can be compared with the machine's
// bandwidth op by op (bytes / seconds). Steps whose rows are all decode rows accumulate into
// `decode`, steps with prefill rows into `prefill`. Profiling changes no result (the same calls
// run in the same order) and costs two clock reads per operation (24-28 per layer); off, nothing.
// Not timed as operations (they count in the step's time only): a prompt's token embeddings and
// query capture, cache growth, and the press's compression or re-selection when a prefill finishes
// a layer, so a prefill step with a press can show a gap between its ops and its wall time. A
// step that throws still counts, with the operations it ran.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace snapkv {

/// Kinds of operation of a forward step. Per layer: Norm (RMSNorms before and after the
/// attention and the FFN), QKV (the Q, K, V projections), QKNormRope (per-head Q/K norms and
/// RoPE), KVAppend (this step's K and V rows into the caches), Attention, AttnOutput (the output
/// projection), FfnGateUp (gate and up projections), FfnAct (SwiGLU / GeGLU), FfnDown, Residual
/// (the two residual adds). Per step: Embed (token embeddings of the decode rows; a prompt's are
/// made when its prefill starts) and Logits (final norm and output projection of the rows that
/// want logits).
enum class ProfileOp : int {
  Embed,
  Norm,
  QKV,
  QKNormRope,
  KVAppend,
  Attention,
  AttnOutput,
  FfnGateUp,
  FfnAct,
  FfnDown,
  Residual,
  Logits,
};
inline constexpr int kProfileOpCount = static_cast<int>(ProfileOp::Logits) + 1;

/// "embed", "norm", "qkv", "qk_norm_rope", "kv_append", "attention", "attn_output",
/// "ffn_gate_up", "ffn_act", "ffn_down", "residual", "logits".
const char* profile_op_name(ProfileOp op);

struct OpStats {
  int64_t calls = 0;   ///< times the operation ran (the per-layer ones: once per layer call of a step; a
                       ///< prefill longer than the workspace's max_rows makes several calls per layer)
  double seconds = 0;  ///< wall time, summed over calls
  /// Bytes read from the weights and the KV cache, summed over calls: a projection reads its whole
  /// weight matrix once per call, whatever the row count (GGUF bytes); Attention the K and V
  /// bytes a decode row reads (its sequence's entries in the layer: all of them, or a sliding
  /// window's last `window`), and for a prefill chunk the bytes its sequence's layer cache holds
  /// (it reads its part of them, more than once); Logits the output matrix. Other ops: 0.
  double bytes = 0;
};

/// Operations of the steps of one kind.
struct StepProfile {
  int64_t steps = 0;   ///< Engine::step calls counted here
  double seconds = 0;  ///< their wall time (the ops, plus what is not timed as one: file comment)
  std::array<OpStats, kProfileOpCount> ops{};
  OpStats& operator[](ProfileOp op) { return ops[static_cast<std::size_t>(op)]; }
  const OpStats& operator[](ProfileOp op) const { return ops[static_cast<std::size_t>(op)]; }
};

/// A workspace's profile: decode-only steps and steps with prefill rows, apart.
struct OpProfile {
  StepProfile decode;
  StepProfile prefill;
};

}  // namespace snapkv
