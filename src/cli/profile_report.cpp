// snapkv: the report of `snapkv run --profile`.
#include "cli/profile_report.h"

#include <fmt/format.h>

namespace snapkv::cli {

std::string profile_table(const StepProfile& p, const char* phase) {
  if (p.steps == 0) return {};
  const auto steps = static_cast<double>(p.steps);
  std::string out = fmt::format("{}: {} step{}, {:.3f} ms per step\n\n", phase, p.steps, p.steps == 1 ? "" : "s",
                                1e3 * p.seconds / steps);
  out += "| op | calls | ms | ms/step | share | MB/step | GB/s |\n|---|---|---|---|---|---|---|\n";
  double sum = 0, bytes = 0;
  for (int i = 0; i < kProfileOpCount; ++i) {
    const OpStats& s = p.ops[static_cast<size_t>(i)];
    if (s.calls == 0) continue;
    sum += s.seconds;
    bytes += s.bytes;
    const std::string gbs = s.bytes > 0 && s.seconds > 0 ? fmt::format("{:.1f}", s.bytes / s.seconds / 1e9) : "-";
    out += fmt::format("| {} | {} | {:.1f} | {:.3f} | {:.1f} % | {:.2f} | {} |\n",
                       profile_op_name(static_cast<ProfileOp>(i)), s.calls, 1e3 * s.seconds, 1e3 * s.seconds / steps,
                       p.seconds > 0 ? 100.0 * s.seconds / p.seconds : 0.0, s.bytes / steps / 1e6, gbs);
  }
  out += fmt::format("| sum of the ops | | {:.1f} | {:.3f} | {:.1f} % | {:.2f} | {} |\n", 1e3 * sum, 1e3 * sum / steps,
                     p.seconds > 0 ? 100.0 * sum / p.seconds : 0.0, bytes / steps / 1e6,
                     bytes > 0 && sum > 0 ? fmt::format("{:.1f}", bytes / sum / 1e9) : "-");
  out += fmt::format("| steps (wall) | {} | {:.1f} | {:.3f} | 100 % | {:.2f} | {} |\n", p.steps, 1e3 * p.seconds,
                     1e3 * p.seconds / steps, bytes / steps / 1e6,
                     bytes > 0 && p.seconds > 0 ? fmt::format("{:.1f}", bytes / p.seconds / 1e9) : "-");
  return out;
}

nlohmann::json profile_json(const OpProfile& p) {
  auto phase = [](const StepProfile& s) {
    nlohmann::json ops = nlohmann::json::object();
    for (int i = 0; i < kProfileOpCount; ++i) {
      const OpStats& o = s.ops[static_cast<size_t>(i)];
      if (o.calls == 0) continue;
      ops[profile_op_name(static_cast<ProfileOp>(i))] = {
          {"calls", o.calls}, {"seconds", o.seconds}, {"bytes", o.bytes}};
    }
    return nlohmann::json{{"steps", s.steps}, {"seconds", s.seconds}, {"ops", ops}};
  };
  return {{"decode", phase(p.decode)}, {"prefill", phase(p.prefill)}};
}

}  // namespace snapkv::cli
