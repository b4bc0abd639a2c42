// snapkv: a Batch — the work of one Engine::step: decode rows (one token each, tagged with its
// sequence, as llama.cpp's llama_batch tags rows with a seq_id) and prefill items (a sequence
// whose layer-major prefill advances by a row budget in this step). Outputs (logits) are read
// back from the batch after the step.
#pragma once

#include <cstdint>
#include <exception>
#include <span>
#include <string>
#include <vector>

namespace snapkv {

class Sequence;

/// A batch holds pointers to its sequences: each must stay alive (and not be used elsewhere)
/// until the batch is cleared or stepped for the last time; stepping a batch that names a
/// destroyed sequence is undefined.
class Batch {
 public:
  /// A decode row: `token` is appended to `seq` at position seq.n_past() + (rows of seq already
  /// in this batch). Rows of one sequence must be added one after another. With `want_logits`
  /// the step computes the row's logits (logits(row)). Returns the row index.
  int add(Sequence& seq, int32_t token, bool want_logits = true);

  /// A prefill item: this step advances seq's pending prefill (Sequence::begin_prefill) by at
  /// most `max_rows` token-layers (rows x layers; 0 = to the end), layer-major. A long prefill
  /// thus advances a layer-chunk at a time between decode steps of other sequences. Chunks are
  /// never one token long (unless the prompt is, or the workspace's max_rows < 3), so a step may
  /// run up to two token-layers more than `max_rows`: results do not depend on the split. Returns the
  /// item index.
  int add_prefill(Sequence& seq, int64_t max_rows = 0);

  /// Removes every row and item (keeps the allocations).
  void clear();

  int n_rows() const { return static_cast<int>(rows_.size()); }
  int n_prefills() const { return static_cast<int>(prefills_.size()); }

  /// After a step: the logits of decode row `row` (n_vocab floats), valid until the next step or
  /// clear(). Throws snapkv::Error for a row without logits (not asked for, or the last step
  /// failed) or out of range.
  std::span<const float> logits(int row) const;
  /// After a step: true if prefill item `item` finished (its sequence is ready to decode);
  /// its last-token logits are then Sequence::prefill_logits().
  bool prefill_done(int item) const;
  /// After a step: why prefill item `item` failed on its own (Engine::step: a snapkv::Error at
  /// the end of one of its layers, e.g. its cold tier's disk is full), its sequence then reset
  /// (emptied) while the other rows and items went on; empty if it did not fail.
  const std::string& prefill_error(int item) const;

  struct Row {
    Sequence* seq = nullptr;
    int32_t token = 0;
    bool want_logits = true;
    int64_t out = -1;  ///< index of its logits in the output (set by the step)
  };
  struct PrefillItem {
    Sequence* seq = nullptr;
    int64_t max_rows = 0;
    bool done = false;           ///< set by the step
    std::string error;           ///< set by the step when the item failed on its own (prefill_error)
    std::exception_ptr failure;  ///< that failure itself (a snapkv::Error or a subclass), to rethrow
  };
  const std::vector<Row>& rows() const { return rows_; }
  std::vector<Row>& rows() { return rows_; }
  std::vector<PrefillItem>& prefills() { return prefills_; }
  /// Output buffer of the step: [rows with logits x n_vocab].
  std::vector<float>& output() { return logits_; }
  int64_t n_vocab_out = 0;

 private:
  std::vector<Row> rows_;
  std::vector<PrefillItem> prefills_;
  std::vector<float> logits_;
};

}  // namespace snapkv
