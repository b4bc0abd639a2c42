// snapkv: parse_bounded_json (see chat/bounded_json.h).
#include "chat/bounded_json.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "snapkv/error.h"

namespace snapkv::chat {
namespace {

/// SAX handler that only counts: depth and keys per open object; stops at the first bound
/// crossed or syntax error, remembering which.
class BoundsCheck : public nlohmann::json_sax<nlohmann::ordered_json> {
 public:
  BoundsCheck(int max_depth, size_t max_keys) : max_depth_(max_depth), max_keys_(max_keys) {}

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    keys_.push_back(0);
    return enter();
  }
  bool key(string_t&) override {
    if (!keys_.empty() && ++keys_.back() > max_keys_) {
      error_ = fmt::format("has a JSON object with more than {} keys", max_keys_);
      return false;
    }
    return true;
  }
  bool end_object() override {
    if (!keys_.empty()) keys_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return enter(); }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = fmt::format("is not valid JSON: {}", e.what());
    return false;
  }

  /// Empty when the text is within bounds and valid.
  const std::string& error() const { return error_; }

 private:
  bool enter() {
    if (++depth_ > max_depth_) {
      error_ = fmt::format("nests deeper than {} levels", max_depth_);
      return false;
    }
    return true;
  }

  int max_depth_;
  size_t max_keys_;
  int depth_ = 0;
  std::vector<size_t> keys_;  // per open object
  std::string error_;
};

}  // namespace

nlohmann::ordered_json parse_bounded_json(std::string_view text, int max_depth, size_t max_keys,
                                          std::string_view what) {
  BoundsCheck check(max_depth, max_keys);
  const bool ok = nlohmann::ordered_json::sax_parse(text, &check);
  if (!ok || !check.error().empty()) {
    throw Error(fmt::format("{} {}", what, check.error().empty() ? "is not valid JSON" : check.error()));
  }
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // not expected after the check; still an Error
    throw Error(fmt::format("{} is not valid JSON: {}", what, e.what()));
  }
}

}  // namespace snapkv::chat
