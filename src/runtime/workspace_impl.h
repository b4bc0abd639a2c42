// snapkv runtime: what a Workspace holds (see snapkv/workspace.h).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "attention/attention.h"
#include "attention/decode.h"
#include "core/thread_context.h"
#include "model/model.h"
#include "runtime/sequence_state.h"
#include "snapkv/workspace.h"

namespace snapkv {

/// Decode rows of one sequence in a step: batch rows [row0, row0 + n).
struct DecodeSpan {
  Sequence::State* st = nullptr;
  int64_t row0 = 0;
  int64_t n = 0;
};

/// A prefill item's part of one block call.
struct PrefillPart {
  size_t item = 0;
  int64_t t0 = 0;    ///< first prompt token of the chunk
  int64_t cnt = 0;   ///< tokens
  int64_t row0 = 0;  ///< its first row in the call
};

/// The plan of one step, kept in the workspace so that a decode step allocates nothing.
struct StepPlan {
  std::vector<DecodeSpan> spans;
  std::vector<Sequence::State*> items;  ///< per prefill item
  std::vector<int64_t> budget;          ///< per item: token-layers left in this step
  std::vector<PrefillPart> parts;       ///< of the current block call
};

struct Workspace::Impl {
  /// The engine's model (a workspace serves one engine). Owned, so that a model loaded after the
  /// engine is gone can never sit at the same address and pass step()'s check with buffers sized
  /// for another model.
  std::shared_ptr<const Model> model;
  int64_t max_rows = 0;
  ThreadContext tc;
  ForwardBuffers buf;       ///< activations of one block call [max_rows x ...]
  AttentionWorkspace attn;  ///< attention scratch (prefill chunks), with the prefill arithmetic
  DecodeWorkspace decode;   ///< split-K decode attention scratch for max_rows rows
  std::vector<DecodeQuery> decode_rows;
  std::vector<float> x;           ///< [max_rows x n_embd] gathered residual rows of a mixed call
  std::vector<int32_t> pos;       ///< [max_rows] positions of a call
  std::vector<BlockSpan> spans;   ///< spans of a call
  std::vector<float> h_dec;       ///< [decode rows x n_embd] residual of the step's decode rows
  std::vector<int32_t> pos_dec;   ///< [decode rows]
  std::vector<float> logits_tmp;  ///< [max_rows x n_embd] scratch of Model::logits
  StepPlan plan;
  bool profiling = false;  ///< Workspace::set_profiling
  OpProfile profile;       ///< what the profiled steps gathered

  Impl(std::shared_ptr<const Model> m, int n_threads, int64_t rows, PrefillAttention prefill);
};

}  // namespace snapkv
