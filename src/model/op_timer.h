// snapkv: timing of a forward step's operations into a StepProfile (snapkv/op_profile.h).
#pragma once

#include <chrono>

#include "quant/quant.h"
#include "snapkv/op_profile.h"

namespace snapkv {

/// Adds one call of `op` (its wall time from construction to stop() or destruction, and `bytes`)
/// to `profile`; with a null profile it does nothing, not even read the clock.
class OpTimer {
 public:
  OpTimer(StepProfile* profile, ProfileOp op, double bytes = 0) : p_(profile), op_(op), bytes_(bytes) {
    if (p_ != nullptr) t0_ = std::chrono::steady_clock::now();
  }
  ~OpTimer() { stop(); }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

  void stop() {
    if (p_ == nullptr) return;
    OpStats& s = (*p_)[op_];
    s.calls += 1;
    s.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    s.bytes += bytes_;
    p_ = nullptr;
  }

 private:
  StepProfile* p_;
  ProfileOp op_;
  double bytes_;
  std::chrono::steady_clock::time_point t0_{};
};

/// Bytes of a weight matrix in its GGUF type (what one matmul call reads).
inline double matrix_bytes(const WeightView& w) {
  return static_cast<double>(w.rows) * static_cast<double>(w.row_bytes());
}

}  // namespace snapkv
