// snapkv: StopFilter — generated text as it streams out, cut at the first stop string. Text that
// might still become a stop string is held back until it is decided, so a stop string is never
// streamed. Used by generate() and by the server (one filter per request).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace snapkv {

class StopFilter {
 public:
  /// `stop`: the stop strings (empty ones are ignored). They should be valid UTF-8, as the text is.
  explicit StopFilter(std::vector<std::string> stop);
  /// Appends `piece`; returns the text that is now safe to emit. Sets stopped() on a match (the
  /// text is then cut before the earliest match completed by this piece).
  std::string push(std::string_view piece);
  /// Everything not yet emitted (at the end of generation).
  std::string rest();
  bool stopped() const { return stopped_; }
  /// The whole text so far (cut before a stop string).
  const std::string& text() const { return text_; }

 private:
  size_t held_tail() const;  ///< longest suffix of the text that is a proper prefix of a stop string
  std::string take(size_t end);
  std::vector<std::string> stop_;
  size_t max_len_ = 0;
  std::string text_;
  size_t emitted_ = 0;
  bool stopped_ = false;
};

}  // namespace snapkv
