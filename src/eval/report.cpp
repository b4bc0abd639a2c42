#include "eval/report.h"

#include <fmt/format.h>

#include <fstream>
#include <map>

#include "snapkv/error.h"

namespace snapkv::eval {

std::vector<nlohmann::json> read_jsonl(const std::string& path, bool* dropped) {
  if (dropped) *dropped = false;
  std::vector<nlohmann::json> out;
  std::ifstream in(path, std::ios::binary);
  if (!in) return out;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  for (size_t i = 0; i < lines.size(); ++i) {
    auto j = nlohmann::json::parse(lines[i], nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      if (i + 1 == lines.size()) {
        if (dropped) *dropped = true;
        break;
      }
      throw Error(fmt::format("{}: line {} is not a JSON object", path, i + 1));
    }
    out.push_back(std::move(j));
  }
  return out;
}

namespace {

struct Acc {
  nlohmann::ordered_json head;
  int64_t n = 0;
  double score = 0, kept = 0, bytes = 0, kl = 0, top1 = 0, ppl_full = 0, ppl = 0, ppl_delta = 0;
  bool fidelity = false;
};

double num(const nlohmann::json& j, const char* k) {
  const auto it = j.find(k);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

}  // namespace

nlohmann::ordered_json summarize(const std::vector<nlohmann::json>& records) {
  std::vector<std::string> order;
  std::map<std::string, Acc> groups;
  for (const auto& r : records) {
    const std::string key =
        fmt::format("{}\t{}\t{}\t{}", r.at("task").get<std::string>(), r.at("length").get<int64_t>(),
                    r.at("press").get<std::string>(), r.at("protocol").get<std::string>());
    auto [it, fresh] = groups.try_emplace(key);
    Acc& a = it->second;
    if (fresh) {
      order.push_back(key);
      for (const char* k : {"task", "length", "press", "press_name", "protocol", "ratio", "budget"})
        a.head[k] = r.at(k);
      a.fidelity = r.contains("kl");
    }
    ++a.n;
    a.score += num(r, "score");
    a.kept += num(r, "kept_fraction");
    a.bytes += num(r, "kv_cache_bytes");
    a.kl += num(r, "kl");
    a.top1 += num(r, "top1");
    a.ppl_full += num(r, "ppl_full");
    a.ppl += num(r, "ppl");
    a.ppl_delta += num(r, "ppl_delta");
  }
  // The full-cache score of each (task, length, protocol).
  std::map<std::string, double> full;
  for (const auto& key : order) {
    const Acc& a = groups[key];
    if (a.head["press_name"] == "none" && !a.fidelity)
      full[fmt::format("{}\t{}\t{}", a.head["task"].get<std::string>(), a.head["length"].get<int64_t>(),
                       a.head["protocol"].get<std::string>())] = 100.0 * a.score / static_cast<double>(a.n);
  }
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& key : order) {
    const Acc& a = groups[key];
    const auto n = static_cast<double>(a.n);
    nlohmann::ordered_json row = a.head;
    row["n"] = a.n;
    if (a.fidelity) {
      row["score"] = nullptr;
      row["score_full"] = nullptr;
      row["fraction_of_full"] = nullptr;
    } else {
      const double score = 100.0 * a.score / n;
      row["score"] = score;
      const auto f = full.find(fmt::format("{}\t{}\t{}", a.head["task"].get<std::string>(),
                                           a.head["length"].get<int64_t>(), a.head["protocol"].get<std::string>()));
      row["score_full"] = f != full.end() ? nlohmann::ordered_json(f->second) : nlohmann::ordered_json(nullptr);
      row["fraction_of_full"] = f != full.end() && f->second > 0 ? nlohmann::ordered_json(score / f->second)
                                                                 : nlohmann::ordered_json(nullptr);
    }
    row["kept_fraction"] = a.kept / n;
    row["kv_cache_bytes"] = a.bytes / n;
    for (const auto& [k, v] : {std::pair{"kl", a.kl},
                               {"top1", a.top1},
                               {"ppl_full", a.ppl_full},
                               {"ppl", a.ppl},
                               {"ppl_delta", a.ppl_delta}})
      row[k] = a.fidelity ? nlohmann::ordered_json(v / n) : nlohmann::ordered_json(nullptr);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string summary_csv(const nlohmann::ordered_json& rows) {
  static const char* kCols[] = {
      "task", "length",   "press",      "press_name",       "protocol",      "ratio",          "budget",
      "n",    "score",    "score_full", "fraction_of_full", "kept_fraction", "kv_cache_bytes", "kl",
      "top1", "ppl_full", "ppl",        "ppl_delta"};
  auto cell = [](const nlohmann::ordered_json& v) -> std::string {
    if (v.is_null()) return "";
    if (v.is_string()) {
      std::string s = v.get<std::string>();
      if (s.find_first_of(",\"\n") == std::string::npos) return s;
      std::string q = "\"";
      for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
      return q + "\"";
    }
    if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
    if (v.is_number()) return fmt::format("{:.6g}", v.get<double>());
    return v.dump();
  };
  std::string out;
  for (size_t i = 0; i < std::size(kCols); ++i) out += (i ? "," : "") + std::string(kCols[i]);
  out += "\n";
  for (const auto& r : rows) {
    for (size_t i = 0; i < std::size(kCols); ++i)
      out += (i ? "," : "") + cell(r.contains(kCols[i]) ? r[kCols[i]] : nullptr);
    out += "\n";
  }
  return out;
}

}  // namespace snapkv::eval
