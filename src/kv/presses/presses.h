// snapkv presses: constructors of the individual policies (one file each), used by make_press().
// Each takes a PressConfig already validated by make_press().
#pragma once

#include <memory>

#include "kv/presses/press.h"

namespace snapkv::press_detail {

std::unique_ptr<Press> make_none_press(const PressConfig& cfg);
std::unique_ptr<Press> make_snapkv_press(const PressConfig& cfg);
std::unique_ptr<Press> make_pyramidkv_press(const PressConfig& cfg);
std::unique_ptr<Press> make_adakv_press(const PressConfig& cfg);
std::unique_ptr<Press> make_streamingllm_press(const PressConfig& cfg);
std::unique_ptr<Press> make_h2o_press(const PressConfig& cfg);
std::unique_ptr<Press> make_tova_press(const PressConfig& cfg);
std::unique_ptr<Press> make_knorm_press(const PressConfig& cfg);
std::unique_ptr<Press> make_random_press(const PressConfig& cfg);

}  // namespace snapkv::press_detail
