// snapkv runtime: Batch (see snapkv/batch.h).
#include "snapkv/batch.h"

#include <fmt/format.h>

#include "snapkv/error.h"

namespace snapkv {

int Batch::add(Sequence& seq, int32_t token, bool want_logits) {
  rows_.push_back(Row{&seq, token, want_logits, -1});
  return static_cast<int>(rows_.size()) - 1;
}

int Batch::add_prefill(Sequence& seq, int64_t max_rows) {
  if (max_rows < 0) throw Error(fmt::format("batch: prefill row budget {} must be >= 0 (0: to the end)", max_rows));
  prefills_.push_back(PrefillItem{&seq, max_rows, false, {}, nullptr});
  return static_cast<int>(prefills_.size()) - 1;
}

void Batch::clear() {
  rows_.clear();
  prefills_.clear();
}

std::span<const float> Batch::logits(int row) const {
  if (row < 0 || row >= n_rows()) throw Error(fmt::format("batch: row {} out of range ({} rows)", row, n_rows()));
  const Row& r = rows_[static_cast<size_t>(row)];
  if (r.out < 0) throw Error(fmt::format("batch: row {} has no logits (not asked for, or not stepped yet)", row));
  const auto V = static_cast<size_t>(n_vocab_out);
  return {logits_.data() + static_cast<size_t>(r.out) * V, V};
}

bool Batch::prefill_done(int item) const {
  if (item < 0 || item >= n_prefills())
    throw Error(fmt::format("batch: prefill item {} out of range ({} items)", item, n_prefills()));
  return prefills_[static_cast<size_t>(item)].done;
}

const std::string& Batch::prefill_error(int item) const {
  if (item < 0 || item >= n_prefills())
    throw Error(fmt::format("batch: prefill item {} out of range ({} items)", item, n_prefills()));
  return prefills_[static_cast<size_t>(item)].error;
}

}  // namespace snapkv
