// snapkv: a Workspace — the scratch memory and threads of one worker (gemma.cpp's per-worker
// activations). Sized by the rows of one block call and the kernels' block sizes, never by the
// context length. One workspace serves one Engine::step at a time; workers that step
// concurrently each need their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "snapkv/op_profile.h"
#include "snapkv/prefill_attention.h"

namespace snapkv {

class Engine;

struct WorkspaceOptions {
  /// OpenMP threads of this worker's kernels; 0 = the engine's (EngineOptions::n_threads).
  int n_threads = 0;
  /// Rows of one block call: decode rows of a step plus the prefill chunk they run with (a
  /// prefill advances in chunks of at most this many tokens per layer). Bounds the activation
  /// memory: about max_rows x (4 n_embd + 3 n_head head_dim + 2 n_ff) floats.
  int64_t max_rows = 512;
  /// Arithmetic of this worker's prefill attention (Exact, BF16 or Int8, see prefill_attention.h);
  /// nullopt = the engine's (EngineOptions::prefill_attention). E.g. Exact for a reference run
  /// beside an engine loaded with BF16.
  std::optional<PrefillAttention> prefill_attention;
};

class Workspace {
 public:
  /// Throws snapkv::Error for n_threads < 0 or > 4096, max_rows < 1 or > 2^20, or a
  /// prefill_attention this build does not run (!prefill_attention_supported). The workspace
  /// keeps the engine's model alive (it may outlive the engine; it serves only that model).
  Workspace(const Engine& engine, const WorkspaceOptions& opt = {});
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  int n_threads() const;
  int64_t max_rows() const;
  /// The prefill attention arithmetic of this workspace (resolved: its own, else the engine's).
  PrefillAttention prefill_attention() const;
  /// Bytes of scratch held now (activations, attention blocks, matmul scratch).
  size_t bytes() const;

  /// Profiling (snapkv/op_profile.h): while on, every Engine::step on this workspace adds the wall
  /// time and bytes read of each operation to profile() (decode-only steps and steps with prefill
  /// rows apart). Off by default; turning it on or off keeps what was gathered. Results are the
  /// same either way.
  void set_profiling(bool on);
  bool profiling() const;
  /// What the profiled steps gathered since the workspace was made or clear_profile().
  const OpProfile& profile() const;
  void clear_profile();

  struct Impl;  ///< internal (src/runtime/workspace_impl.h)
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace snapkv
