// snapkv press `none`: keeps every prompt position (no compression; the baseline).
#include "kv/presses/presses.h"
#include "kv/presses/scoring.h"

namespace snapkv::press_detail {
namespace {

class NonePress final : public Press {
 public:
  std::string_view name() const override { return "none"; }
  PressResult compress(const PressInput& in, int64_t capacity) const override {
    check_input(in, capacity, name(), false, false);
    return keep_all(in.n_head_kv, in.n_tokens);
  }
};

}  // namespace

std::unique_ptr<Press> make_none_press(const PressConfig&) { return std::make_unique<NonePress>(); }

}  // namespace snapkv::press_detail
