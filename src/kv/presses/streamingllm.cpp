// snapkv press `streamingllm`: Xiao et al., "Efficient Streaming Language Models with Attention
// Sinks", ICLR 2024, arXiv 2309.17453, Sec. 3.2, applied once to the prompt: keep the
// S = cfg.sinks first positions (attention sinks, 0..S-1) and the C - S most recent ones
// (L-C+S..L-1), all with score +inf (kept unconditionally). Needs C >= S + 1 (at least one
// recent token; make_press() further asks C >= W + S so the observation window survives too);
// otherwise snapkv::Error.
#include <fmt/format.h>

#include <limits>

#include "kv/presses/presses.h"
#include "kv/presses/scoring.h"
#include "snapkv/error.h"

namespace snapkv::press_detail {
namespace {

class StreamingLLMPress final : public Press {
 public:
  explicit StreamingLLMPress(const PressConfig& cfg) : sinks_(cfg.sinks) {}
  std::string_view name() const override { return "streamingllm"; }
  PressResult compress(const PressInput& in, int64_t capacity) const override {
    check_input(in, capacity, name(), false, false);
    const int64_t L = in.n_tokens;
    if (capacity >= L) return keep_all(in.n_head_kv, L);
    if (capacity < sinks_ + 1)
      throw Error(fmt::format("press streamingllm, layer {}: capacity {} must be >= sinks + 1 = {}", in.layer, capacity,
                              sinks_ + 1));
    std::vector<int32_t> kept;
    kept.reserve(static_cast<size_t>(capacity));
    for (int64_t j = 0; j < sinks_; ++j) kept.push_back(static_cast<int32_t>(j));
    for (int64_t j = L - (capacity - sinks_); j < L; ++j) kept.push_back(static_cast<int32_t>(j));
    PressResult res;
    res.kept.assign(static_cast<size_t>(in.n_head_kv), kept);
    res.scores.assign(static_cast<size_t>(in.n_head_kv),
                      std::vector<float>(kept.size(), std::numeric_limits<float>::infinity()));
    return res;
  }

 private:
  int64_t sinks_;
};

}  // namespace

std::unique_ptr<Press> make_streamingllm_press(const PressConfig& cfg) {
  return std::make_unique<StreamingLLMPress>(cfg);
}

}  // namespace snapkv::press_detail
