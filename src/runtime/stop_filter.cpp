// snapkv runtime: StopFilter (see snapkv/stop_filter.h).
#include "snapkv/stop_filter.h"

#include <algorithm>

namespace snapkv {

StopFilter::StopFilter(std::vector<std::string> stop) : stop_(std::move(stop)) {
  for (const auto& s : stop_) max_len_ = std::max(max_len_, s.size());
}

std::string StopFilter::push(std::string_view piece) {
  const size_t before = text_.size();
  text_ += piece;
  if (!stop_.empty()) {
    const size_t from = before >= max_len_ ? before - max_len_ + 1 : 0;
    size_t cut = std::string::npos;
    for (const auto& s : stop_) {
      if (s.empty()) continue;
      const size_t at = text_.find(s, from);
      if (at != std::string::npos) cut = std::min(cut, at);
    }
    if (cut != std::string::npos) {
      text_.resize(cut);
      stopped_ = true;
      return take(text_.size());
    }
  }
  return take(text_.size() - held_tail());
}

std::string StopFilter::rest() { return take(text_.size()); }

size_t StopFilter::held_tail() const {
  size_t best = 0;
  for (const auto& s : stop_)
    for (size_t k = std::min(s.size() - (s.empty() ? 0 : 1), text_.size()); k > best; --k)
      if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
        best = k;
        break;
      }
  return best;
}

std::string StopFilter::take(size_t end) {
  end = std::max(end, emitted_);
  std::string out = text_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

}  // namespace snapkv
