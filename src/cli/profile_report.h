// snapkv: the report of `snapkv run --profile` (snapkv/op_profile.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "snapkv/op_profile.h"

namespace snapkv::cli {

/// A Markdown table of one phase's operations ("decode" or "prefill"): per op the calls, ms in
/// all and per step, share of the steps' wall time, MB read per step and GB/s (bytes / seconds,
/// 1 GB = 1e9 bytes; "-" for ops that read no weights or KV), then the sum of the ops and the
/// steps' wall time. Empty when the phase ran no step.
std::string profile_table(const StepProfile& p, const char* phase);

/// {"decode": {"steps", "seconds", "ops": {name: {"calls", "seconds", "bytes"}}}, "prefill": ...}.
nlohmann::json profile_json(const OpProfile& p);

}  // namespace snapkv::cli
