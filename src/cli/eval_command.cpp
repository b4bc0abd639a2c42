// `snapkv eval`: quality under compression (docs/design.md, "Eval"). Flags -> EvalConfig, the
// suite (src/eval/suite.h), a progress bar with ETA on a terminal, then the pictures and
// index.html by scripts/eval_plots.py.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "core/thread_context.h"
#include "eval/suite.h"
#include "snapkv/error.h"

namespace snapkv::cli {

namespace {

std::string hms(double s) {
  if (s < 0) return "?";
  const auto t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m{:02}s", t / 3600, t / 60 % 60, t % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The first of $SNAPKV_PYTHON, python3, /usr/bin/python3 that imports matplotlib (the python3 on
// PATH may be a pyenv one without Debian's python3-matplotlib), or "" when none does.
std::string plot_python() {
  std::vector<std::string> cands;
  if (const char* e = std::getenv("SNAPKV_PYTHON"); e != nullptr && *e != '\0') cands.emplace_back(e);
  cands.emplace_back("python3");
  cands.emplace_back("/usr/bin/python3");
  for (const auto& c : cands) {
    const std::string cmd = shell_quote(c) + " -c 'import matplotlib' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return c;
  }
  return "";
}

// $SNAPKV_EVAL_PLOTS, else share/snapkv/eval_plots.py beside the binary (the build tree: CMake
// copies scripts/eval_plots.py there) or in the prefix it is installed in (bin/../share/snapkv);
// "" when there is none.
std::string plot_script() {
  if (const char* e = std::getenv("SNAPKV_EVAL_PLOTS"); e != nullptr && *e != '\0') return e;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const auto& dir : {exe.parent_path(), exe.parent_path().parent_path()}) {
    const auto p = dir / "share" / "snapkv" / "eval_plots.py";
    if (std::filesystem::exists(p, ec)) return p.string();
  }
  return "";
}

}  // namespace

int eval_command(const EvalOptions& o) {
  eval::EvalConfig cfg;
  cfg.model_path = resolve_model_path(o.model);
  cfg.tasks = eval::expand_tasks(o.tasks);
  cfg.lengths = eval::parse_lengths(o.lengths);
  if (!o.presses.empty()) {
    cfg.presses = eval::split_press_list(o.presses);
  } else {
    const auto names = eval::split_list(o.press_grid, "--press-grid");
    const auto ratios = o.ratios.empty() ? std::vector<std::string>{} : eval::split_list(o.ratios, "--ratios");
    const auto budgets = o.budgets.empty() ? std::vector<std::string>{} : eval::split_list(o.budgets, "--budgets");
    if (ratios.empty() && budgets.empty()) throw Error("--press-grid needs --ratios or --budgets");
    cfg.presses = eval::press_grid(names, ratios, budgets);
  }
  cfg.protocols = eval::parse_protocols(o.protocol);
  cfg.samples = o.samples;
  cfg.seed = o.seed;
  cfg.depths = eval::parse_depths(o.depths);
  cfg.chat = eval::parse_chat_mode(o.chat);
  cfg.answer_prefix = o.answer_prefix == "on";
  cfg.gen_tokens = o.gen_tokens;
  cfg.fidelity_chunk = o.fidelity_chunk;
  cfg.kv_type = parse_kv_type(o.kv_type);
  cfg.kv_type_v = parse_kv_type_v(o.kv_type_v, cfg.kv_type);
  if (!o.reference_kv_type.empty()) cfg.reference_kv_type = parse_kv_type(o.reference_kv_type, "--reference-kv-type");
  cfg.prefill_attention = parse_prefill_attention(o.prefill_attn);
  cfg.cold_tier = parse_cold_tier(o.cold_tier);
  cfg.threads = o.threads > 0 ? o.threads : available_cores();
  cfg.independent = o.no_fork;

  const bool tty = stderr_is_tty() && !o.quiet;
  auto progress = [&](const eval::SuiteProgress& p) {
    if (o.quiet) return;
    if (tty) {
      const int width = 24;
      const int filled = p.total > 0 ? p.done * width / p.total : width;
      fmt::print(stderr, "\r\x1b[Keval [{}{}] {}/{} samples  {}  {} elapsed, ETA {}", std::string(filled, '#'),
                 std::string(width - filled, '-'), p.done, p.total, p.current, hms(p.elapsed_s), hms(p.eta_s));
      if (p.done == p.total && p.finished_sample) fmt::print(stderr, "\n");
    } else if (p.finished_sample) {
      fmt::print(stderr, "eval: {}/{} {} ({} elapsed, ETA {})\n", p.done, p.total, p.current, hms(p.elapsed_s),
                 hms(p.eta_s));
    }
    std::fflush(stderr);
  };
  const eval::SuiteResult r = eval::run_suite(cfg, o.out, o.resume, progress);
  fmt::print(stderr,
             "eval: {} samples run, {} skipped; {} records written ({} already there); {} wall; prefill {:.1f} s, "
             "{:.1f} s saved by forking\n",
             r.samples_run, r.samples_skipped, r.records, r.records_skipped, hms(r.wall_s), r.prefill_ms / 1000,
             r.prefill_saved_ms / 1000);
  if (!o.no_plots) {
    const std::string py = plot_python();
    if (py.empty())
      throw Error(
          fmt::format("no python3 with matplotlib to draw the pictures (scripts/deps.sh installs "
                      "python3-matplotlib; $SNAPKV_PYTHON picks an interpreter; --no-plots skips them). The "
                      "results are in {}",
                      o.out));
    const std::string script = plot_script();
    if (script.empty())
      throw Error(
          fmt::format("eval_plots.py not found in share/snapkv beside the binary or its prefix (set "
                      "$SNAPKV_EVAL_PLOTS to scripts/eval_plots.py; --no-plots skips the pictures). The "
                      "results are in {}",
                      o.out));
    const std::string cmd = fmt::format("{} {} {}", shell_quote(py), shell_quote(script), shell_quote(o.out));
    const int rc = std::system(cmd.c_str());
    if (rc != 0)
      throw Error(
          fmt::format("the pictures were not drawn ({} failed; scripts/deps.sh installs python3-matplotlib; "
                      "--no-plots skips them). The results are in {}",
                      cmd, o.out));
  }
  fmt::print("{}\n", (std::filesystem::path(o.out) / (o.no_plots ? "summary.csv" : "index.html")).string());
  return 0;
}

}  // namespace snapkv::cli
