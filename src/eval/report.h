// snapkv eval: the files of a run: per-record JSONL (read back for --resume), the summary
// (per task, length, press and protocol) as rows, CSV and JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace snapkv::eval {

/// The records of a JSONL file. A missing file gives none. A last line that does not parse (a
/// run killed while writing it) is dropped and `*dropped` set; a bad line elsewhere throws
/// snapkv::Error naming the file and line.
std::vector<nlohmann::json> read_jsonl(const std::string& path, bool* dropped = nullptr);

/// Summary rows, one per (task, length, press, protocol), in first-seen order: n (records),
/// score (mean x 100; null for fidelity), score_full (the `none` row of the same task, length
/// and protocol), fraction_of_full (score / score_full; null when the full score is 0),
/// kept_fraction and kv_cache_bytes (means), ratio, budget, press_name, and for fidelity the
/// means of kl, top1, ppl_full, ppl and ppl_delta.
nlohmann::ordered_json summarize(const std::vector<nlohmann::json>& records);

/// The rows as CSV (header first; numbers with 6 significant digits; empty for null).
std::string summary_csv(const nlohmann::ordered_json& rows);

}  // namespace snapkv::eval
