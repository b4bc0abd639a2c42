// snapkv eval: a whole run (what `snapkv eval` does besides flags and pictures): the samples of
// every task x length x index (x depth), each run under its protocols against every press, the
// records appended to DIR/samples.jsonl as each sample finishes, then DIR/summary.csv and
// DIR/summary.json; DIR/config.json records the configuration and its provenance.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eval/prompt.h"
#include "eval/runner.h"
#include "snapkv/kv_type.h"
#include "snapkv/prefill_attention.h"

namespace snapkv::eval {

/// `a,b,c` split on commas; an item with '=' but no ':' continues the previous spec, so
/// "snapkv:budget=512,window=16,tova:ratio=0.5" is two specs. Empty items are errors.
std::vector<std::string> split_press_list(std::string_view text);
/// Comma-separated items, none empty (throws snapkv::Error naming `what`).
std::vector<std::string> split_list(std::string_view text, std::string_view what);
/// "2K,4096" -> {2048, 4096}: positive integers, with an optional K (x1024) suffix; a length
/// given twice (e.g. 1K and 1024) is an error.
std::vector<int64_t> parse_lengths(std::string_view text);
/// "10,33.5,90" (percent) -> {0.10, 0.335, 0.90}: numbers in [0, 100] rounded to 0.01 % (the
/// precision of the samples' ids, "d33.5"); two that round alike are an error.
std::vector<double> parse_depths(std::string_view text);
/// Task names with the aliases "ruler" (the 11 RULER tasks) and "all" (every task), deduplicated.
std::vector<std::string> expand_tasks(std::string_view text);
/// "aware", "agnostic", "multi", "reselect", "followup", "both" (aware, agnostic), "all" (aware, agnostic,
/// multi), or a comma list.
std::vector<Protocol> parse_protocols(std::string_view text);
/// `names` x `ratios` and `names` x `budgets` as specs ("snapkv:ratio=0.5", "tova:budget=512").
std::vector<std::string> press_grid(const std::vector<std::string>& names, const std::vector<std::string>& ratios,
                                    const std::vector<std::string>& budgets);

struct EvalConfig {
  std::string model_path;
  std::vector<std::string> tasks;
  std::vector<int64_t> lengths;
  std::vector<std::string> presses;  ///< as given; "none" is added first when missing
  std::vector<Protocol> protocols;   ///< of the generation tasks (fidelity: continuation)
  int samples = 1;
  uint64_t seed = 0;
  std::vector<double> depths;  ///< niah_grid, in [0, 1]
  ChatMode chat = ChatMode::Auto;
  bool answer_prefix = true;  ///< RULER's answer prefix after the question (false: --answer-prefix off)
  int gen_tokens = 0;         ///< 0: each task's
  /// Fidelity: continuation tokens per teacher-forced prefill call (--fidelity-chunk; 1 runs each
  /// token through the decode attention kernel, as generation does).
  int fidelity_chunk = 64;
  KVType kv_type = KVType::F16;
  std::optional<KVType> kv_type_v;  ///< --kv-type-v: the values' type when not kv_type
  /// The fidelity task's reference (the "full" distribution every press is compared with): a full
  /// cache of this element type, keys and values (--reference-kv-type; default: kv_type /
  /// kv_type_v, the same cache uncompressed).
  /// E.g. kv_type Q8_0 with reference F16 measures quantization and compression together.
  std::optional<KVType> reference_kv_type;
  /// Arithmetic of prefill attention of the runs (--prefill-attn). The fidelity task's reference
  /// is always prefilled Exact (on its own when this is not).
  PrefillAttention prefill_attention = PrefillAttention::Exact;
  /// The cold tier of the reselect protocol (--cold-tier; int8 in RAM by default).
  ColdTierOptions cold_tier = {.enabled = true, .format = ColdFormat::Int8, .dir = {}};
  int threads = 0;           ///< 0: every core
  bool independent = false;  ///< no forks: each press prefilled on its own (slow; a check)
};

struct SuiteProgress {
  int done = 0, total = 0;           ///< samples
  double elapsed_s = 0, eta_s = -1;  ///< eta: -1 until one sample is done
  std::string current;               ///< the sample being run (or just finished)
  bool finished_sample = false;
};

struct SuiteResult {
  int64_t records = 0;          ///< written by this run
  int64_t records_skipped = 0;  ///< already in samples.jsonl (--resume)
  int samples_run = 0, samples_skipped = 0;
  double wall_s = 0;
  double prefill_ms = 0;        ///< shared and unshared prefills of this run
  double prefill_saved_ms = 0;  ///< what one prefill per press would have cost on top
  nlohmann::ordered_json summary;
};

/// Runs the suite into `out_dir` (created). With `resume`, DIR/config.json must describe the
/// same samples (model sha256, tasks, lengths, samples, seed, depths, chat, gen_tokens, kv type,
/// prefill attention; a config.json without prefill_attention was written by an exact run)
/// and the (sample, press, protocol, question) records already in DIR/samples.jsonl are skipped;
/// without it, an existing samples.jsonl is an error. Throws snapkv::Error for bad settings
/// (a length over the model's context, an unknown task or press) before any sample runs.
SuiteResult run_suite(const EvalConfig& cfg, const std::string& out_dir, bool resume,
                      const std::function<void(const SuiteProgress&)>& progress = {});

/// `git rev-parse HEAD` of the source tree this binary was built from, and whether it had
/// uncommitted changes to tracked files, read at build time (cmake/git_commit.cmake);
/// {"unknown", false} without git.
std::pair<std::string, bool> source_git_commit();

}  // namespace snapkv::eval
