#include "eval/suite.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "attention/decode_q8_keys.h"
#include "core/sha256.h"
#include "eval/haystack.h"
#include "eval/report.h"
#include "eval/tasks.h"
#include "snapkv/snapkv.h"
#include "snapkv_git_commit.h"  // generated at build time (cmake/git_commit.cmake)

namespace snapkv::eval {

namespace fs = std::filesystem;

std::vector<std::string> split_list(std::string_view text, std::string_view what) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    const size_t comma = text.find(',', at);
    const std::string_view item =
        text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    if (item.empty()) throw Error(fmt::format("{}: empty item in '{}'", what, text));
    out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return out;
}

std::vector<std::string> split_press_list(std::string_view text) {
  std::vector<std::string> out;
  for (const std::string& item : split_list(text, "--presses")) {
    const bool continues = item.find('=') != std::string::npos && item.find(':') == std::string::npos;
    if (continues) {
      if (out.empty()) throw Error(fmt::format("--presses: '{}' has no press before it", item));
      out.back() += "," + item;
    } else {
      out.push_back(item);
    }
  }
  return out;
}

std::vector<int64_t> parse_lengths(std::string_view text) {
  std::vector<int64_t> out;
  for (const std::string& item : split_list(text, "--lengths")) {
    std::string digits = item;
    int64_t mul = 1;
    if (!digits.empty() && (digits.back() == 'K' || digits.back() == 'k')) {
      mul = 1024;
      digits.pop_back();
    }
    int64_t v = 0;
    bool ok = !digits.empty() && digits.size() <= 9;
    for (char c : digits) ok = ok && c >= '0' && c <= '9';
    if (ok) v = std::stoll(digits) * mul;
    if (!ok || v <= 0) throw Error(fmt::format("--lengths: '{}' is not a positive length (e.g. 4096 or 4K)", item));
    if (std::find(out.begin(), out.end(), v) != out.end())
      throw Error(fmt::format("--lengths: {} tokens are listed twice ('{}' repeats one)", v, item));
    out.push_back(v);
  }
  return out;
}

std::vector<double> parse_depths(std::string_view text) {
  std::vector<double> out;
  std::vector<int64_t> hundredths;
  for (const std::string& d : split_list(text, "--depths")) {
    char* end = nullptr;
    const double v = std::strtod(d.c_str(), &end);
    if (end == d.c_str() || *end != '\0' || !(v >= 0 && v <= 100))
      throw Error(fmt::format("--depths: '{}' is not a percentage in [0, 100]", d));
    const int64_t h = std::llround(v * 100);
    if (std::find(hundredths.begin(), hundredths.end(), h) != hundredths.end())
      throw Error(fmt::format("--depths: '{}' repeats a depth (depths are told apart to 0.01 %)", d));
    hundredths.push_back(h);
    out.push_back(static_cast<double>(h) / 10000.0);
  }
  return out;
}

std::vector<std::string> expand_tasks(std::string_view text) {
  std::vector<std::string> out;
  auto add = [&](const std::string& t) {
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  };
  for (const std::string& item : split_list(text, "--tasks")) {
    if (item == "ruler") {
      for (const auto& t : ruler_task_names()) add(t);
    } else if (item == "all") {
      for (const auto& t : all_tasks()) add(t.name);
    } else {
      add(task_info(item).name);
    }
  }
  return out;
}

std::vector<Protocol> parse_protocols(std::string_view text) {
  std::vector<Protocol> out;
  auto add = [&](Protocol p) {
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  };
  for (const std::string& item : split_list(text, "--protocol")) {
    if (item == "both") {
      add(Protocol::Aware), add(Protocol::Agnostic);
    } else if (item == "all") {
      add(Protocol::Aware), add(Protocol::Agnostic), add(Protocol::Multi);
    } else {
      const Protocol p = parse_protocol(item);
      if (p == Protocol::Continuation) throw Error("--protocol: continuation is fidelity's own; it needs no flag");
      add(p);
    }
  }
  return out;
}

std::vector<std::string> press_grid(const std::vector<std::string>& names, const std::vector<std::string>& ratios,
                                    const std::vector<std::string>& budgets) {
  std::vector<std::string> out;
  for (const auto& n : names) {
    if (n == "none") {
      out.push_back(n);
      continue;
    }
    for (const auto& r : ratios) out.push_back(fmt::format("{}:ratio={}", n, r));
    for (const auto& b : budgets) out.push_back(fmt::format("{}:budget={}", n, b));
  }
  return out;
}

std::pair<std::string, bool> source_git_commit() { return {SNAPKV_GIT_COMMIT, SNAPKV_GIT_DIRTY != 0}; }

namespace {

using Clock = std::chrono::steady_clock;

struct Unit {
  SampleRequest req;
  std::vector<Protocol> protocols;
  double weight = 0;  // for the ETA: prompt length x protocols
};

// Decode's K.Q arithmetic over Q8_0 keys when the run decodes over such keys (its cache's; the
// fidelity reference's only when fed one token per call): int16 query and integer dot products,
// or f32 (also for head_dim > 512, which the int16 path leaves to f32); "none" without Q8_0 keys.
// Resuming on a CPU (or with SNAPKV_DECODE_Q8_KEYS_I16) that gives the other would mix the two.
std::string decode_q8_keys_name(const EvalConfig& cfg, int head_dim) {
  const bool reference_decodes = cfg.reference_kv_type == KVType::Q8_0 && cfg.fidelity_chunk == 1;
  if (cfg.kv_type != KVType::Q8_0 && !reference_decodes) return "none";
  return attn::decode_q8_keys_i16() && head_dim <= attn::kQueryI16MaxDim ? "int16-avx512vnni" : "f32";
}

nlohmann::ordered_json config_json(const EvalConfig& cfg, const Engine& e, const std::string& sha,
                                   const std::vector<PressRun>& presses, const PromptFormat& fmt) {
  using J = nlohmann::ordered_json;
  J j;
  J m;
  m["path"] = fs::absolute(cfg.model_path).lexically_normal().string();
  m["sha256"] = sha;
  m["arch"] = e.info().arch;
  m["name"] = e.info().name;
  m["n_layer"] = e.info().n_layer;
  m["n_head_kv"] = e.info().n_head_kv;
  m["n_ctx_train"] = e.info().n_ctx_train;
  j["model"] = m;
  j["tasks"] = cfg.tasks;
  j["lengths"] = cfg.lengths;
  J ps = J::array();
  for (const auto& p : presses) ps.push_back(p.canonical);
  j["presses"] = ps;
  J pr = J::array();
  for (Protocol p : cfg.protocols) pr.push_back(protocol_name(p));
  j["protocols"] = pr;
  j["samples"] = cfg.samples;
  j["seed"] = cfg.seed;
  j["depths"] = cfg.depths;
  j["chat"] = chat_mode_name(cfg.chat);
  j["prompt_format"] = fmt.name();
  j["gen_tokens"] = cfg.gen_tokens;
  j["fidelity_chunk"] = cfg.fidelity_chunk;
  j["kv_type"] = kv_type_name(cfg.kv_type);
  j["kv_type_v"] = kv_type_name(cfg.kv_type_v.value_or(cfg.kv_type));
  j["reference_kv_type"] = kv_type_name(cfg.reference_kv_type.value_or(cfg.kv_type));  // fidelity's reference
  j["reference_kv_type_v"] = kv_type_name(cfg.reference_kv_type.value_or(cfg.kv_type_v.value_or(cfg.kv_type)));
  j["prefill_attention"] = prefill_attention_name(cfg.prefill_attention);  // fidelity's reference: always exact
  j["prefill_attention_isa"] = prefill_attention_isa(cfg.prefill_attention, e.info().head_dim);  // informational
  j["decode_q8_keys"] = decode_q8_keys_name(cfg, e.info().head_dim);
  j["cold_tier"] = cold_tier_name(cfg.cold_tier);  // the reselect protocol's
  j["threads"] = cfg.threads;
  j["independent"] = cfg.independent;
  j["decoding"] = "greedy";
  const TextSource& t = natural_text();
  j["text"] = {{"dir", t.dir}, {"files", t.files}, {"bytes", t.raw.size()}, {"sha256", t.sha256}};
  const auto [commit, dirty] = source_git_commit();
  j["snapkv"] = {{"version", SNAPKV_PROJECT_VERSION}, {"git_commit", commit}, {"git_dirty", dirty}};
  const std::time_t now = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  j["started"] = buf;
  return j;
}

// The fields --resume requires to be equal (they decide the samples).
void check_resumable(const nlohmann::json& old, const nlohmann::ordered_json& now, const std::string& path) {
  auto same = [&](const char* what, const nlohmann::json& a, const nlohmann::json& b) {
    if (a != b)
      throw Error(fmt::format("--resume: {} has {} = {}, this run {}: use another --out or the same settings", path,
                              what, a.dump(), b.dump()));
  };
  same("model.sha256", old.at("model").at("sha256"), now["model"]["sha256"]);
  for (const char* k : {"tasks", "lengths", "samples", "seed", "prompt_format", "gen_tokens", "kv_type"})
    same(k, old.at(k), now[k]);
  // Depths to 1e-9: runs before session 52 stored percent / 100, now (percent to 0.01) x 100 /
  // 10000, which can differ in the last bit for fractional percents.
  const nlohmann::json& od = old.at("depths");
  bool depths_equal = od.is_array() && od.size() == now["depths"].size();
  for (size_t i = 0; depths_equal && i < od.size(); ++i)
    depths_equal = od[i].is_number() && std::fabs(od[i].get<double>() - now["depths"][i].get<double>()) < 1e-9;
  if (!depths_equal) same("depths", od, now["depths"]);
  same("kv_type_v", old.value("kv_type_v", old.at("kv_type")), now["kv_type_v"]);  // older runs: one type
  same("reference_kv_type", old.value("reference_kv_type", old.at("kv_type")), now["reference_kv_type"]);
  // Older runs: one type for keys and values.
  same("reference_kv_type_v", old.value("reference_kv_type_v", old.value("reference_kv_type", old.at("kv_type"))),
       now["reference_kv_type_v"]);
  same("fidelity_chunk", old.value("fidelity_chunk", nlohmann::json(64)), now["fidelity_chunk"]);  // older: 64
  // Older runs (before session 56) decoded over Q8_0 keys in f32, and fed fidelity 64 tokens a call.
  const bool old_q8 = old.at("kv_type") == "q8_0";
  same("decode_q8_keys (int16 needs AVX512-VNNI; SNAPKV_DECODE_Q8_KEYS_I16=0 gives f32)",
       old.value("decode_q8_keys", nlohmann::json(old_q8 ? "f32" : "none")), now["decode_q8_keys"]);
  // Runs before --prefill-attn were exact.
  same("prefill_attention",
       old.value("prefill_attention", nlohmann::json(prefill_attention_name(PrefillAttention::Exact))),
       now["prefill_attention"]);
  same("text.sha256", old.at("text").at("sha256"), now["text"]["sha256"]);
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) throw Error(fmt::format("cannot write '{}'", p.string()));
}

}  // namespace

SuiteResult run_suite(const EvalConfig& cfg, const std::string& out_dir, bool resume,
                      const std::function<void(const SuiteProgress&)>& progress) {
  const auto t_start = Clock::now();
  if (cfg.tasks.empty()) throw Error("no tasks (--tasks)");
  if (cfg.lengths.empty()) throw Error("no lengths (--lengths)");
  if (cfg.samples < 1) throw Error("--samples must be >= 1");
  for (double d : cfg.depths)
    if (!(d >= 0 && d <= 1)) throw Error(fmt::format("--depths: {} is outside 0..100%", d * 100));
  // Presses: "none" first (the full-cache reference), no duplicates by canonical spec.
  std::vector<PressRun> presses = {resolve_press("none")};
  for (const auto& t : cfg.presses) {
    PressRun p = resolve_press(t);
    const bool dup =
        std::any_of(presses.begin(), presses.end(), [&](const PressRun& q) { return q.canonical == p.canonical; });
    if (!dup) presses.push_back(std::move(p));
  }
  const bool has_gen_task =
      std::any_of(cfg.tasks.begin(), cfg.tasks.end(), [](const std::string& t) { return t != "fidelity"; });
  if (has_gen_task && cfg.protocols.empty()) throw Error("no protocols (--protocol)");

  EngineOptions eo;
  eo.n_threads = cfg.threads;
  eo.prefill_attention = cfg.prefill_attention;
  auto engine = Engine::load(cfg.model_path, eo);
  const KVType ref = cfg.reference_kv_type.value_or(cfg.kv_type);
  for (const auto& [k, v] : {std::pair{cfg.kv_type, cfg.kv_type_v.value_or(cfg.kv_type)}, std::pair{ref, ref}})
    if (const std::string why = kv_types_problem(k, v, engine->info().head_dim); !why.empty())
      throw Error(fmt::format("--kv-type / --kv-type-v / --reference-kv-type: {}", why));
  for (int64_t L : cfg.lengths) {
    if (L > engine->info().n_ctx_train)
      throw Error(fmt::format("--lengths: {} exceeds the model's context of {} tokens", L, engine->info().n_ctx_train));
    // A sample's prompt is L minus the task's own generation length; --gen-tokens replaces the
    // latter (fidelity scores its own continuation instead of generating).
    for (const std::string& t : cfg.tasks) {
      if (t == "fidelity") continue;
      const int64_t total = L - task_info(t).gen_tokens + cfg.gen_tokens;
      if (cfg.gen_tokens > 0 && total > engine->info().n_ctx_train)
        throw Error(
            fmt::format("--gen-tokens {} with --lengths {}: {}'s prompt and its generated tokens take {} "
                        "positions, beyond the model's context of {} tokens",
                        cfg.gen_tokens, L, t, total, engine->info().n_ctx_train));
    }
  }
  Workspace ws(*engine);
  PromptFormat fmt(*engine, cfg.chat, cfg.answer_prefix);
  Generator gen(fmt);
  RunnerOptions ro;
  ro.independent = cfg.independent;
  ro.kv_type = cfg.kv_type;
  ro.kv_type_v = cfg.kv_type_v;
  ro.reference_kv_type = cfg.reference_kv_type;
  ro.gen_tokens = cfg.gen_tokens;
  ro.fidelity_chunk = cfg.fidelity_chunk;
  ro.cold_tier = cfg.cold_tier;
  Runner runner(*engine, ws, ro);

  // Samples: by length, then task, then index (and depth).
  std::vector<Unit> units;
  for (int64_t L : cfg.lengths) {
    for (const std::string& task : cfg.tasks) {
      const TaskInfo& info = task_info(task);
      std::vector<Protocol> protos =
          info.kind == TaskKind::Fidelity ? std::vector<Protocol>{Protocol::Continuation} : cfg.protocols;
      std::vector<double> depths = {-1};
      if (info.kind == TaskKind::NiahGrid) {
        if (cfg.depths.empty()) throw Error("niah_grid needs --depths");
        depths = cfg.depths;
      }
      for (int i = 0; i < cfg.samples; ++i)
        for (double d : depths)
          units.push_back(
              {{task, L, cfg.seed, i, d}, protos, static_cast<double>(L) * static_cast<double>(protos.size())});
    }
  }

  fs::create_directories(out_dir);
  const fs::path dir(out_dir);
  const fs::path jsonl = dir / "samples.jsonl";
  const std::string sha = sha256_file(cfg.model_path);
  const nlohmann::ordered_json config = config_json(cfg, *engine, sha, presses, fmt);
  std::set<std::string> done;
  SuiteResult res;
  nlohmann::json before;  // the "run" totals of the earlier invocations (--resume)
  if (resume) {
    const fs::path sp = dir / "summary.json";
    if (fs::exists(sp)) {
      std::ifstream in(sp);
      const auto j = nlohmann::json::parse(in, nullptr, false);
      if (j.is_object() && j.contains("run") && j["run"].is_object()) before = j["run"];
    }
    const fs::path cp = dir / "config.json";
    if (fs::exists(cp)) {
      if (!fs::is_regular_file(cp)) throw Error(fmt::format("--resume: '{}' is not a regular file", cp.string()));
      std::ifstream in(cp);
      try {
        check_resumable(nlohmann::json::parse(in), config, cp.string());
      } catch (const nlohmann::json::exception& e) {
        throw Error(fmt::format("--resume: '{}' is not the config.json of an eval run: {}", cp.string(), e.what()));
      }
    }
    if (fs::exists(jsonl) && !fs::is_regular_file(jsonl))
      throw Error(fmt::format("--resume: '{}' is not a regular file", jsonl.string()));
    bool dropped = false;
    const auto old = read_jsonl(jsonl.string(), &dropped);
    for (size_t i = 0; i < old.size(); ++i) {
      try {
        done.insert(record_key(old[i]));
        summarize({old[i]});  // the fields the summary reads, with their types
      } catch (const nlohmann::json::exception& e) {
        throw Error(
            fmt::format("--resume: '{}': record {} is not an eval record: {}", jsonl.string(), i + 1, e.what()));
      }
    }
    if (dropped) {  // rewrite without the broken last line
      std::string text;
      for (const auto& r : old) text += r.dump() + "\n";
      write_file(jsonl, text);
    }
  } else if (fs::exists(jsonl) && fs::file_size(jsonl) > 0) {
    throw Error(fmt::format("{} exists: pass --resume to continue that run, or choose another --out", jsonl.string()));
  }
  write_file(dir / "config.json", config.dump(2) + "\n");
  std::ofstream out(jsonl, std::ios::binary | std::ios::app);
  if (!out) throw Error(fmt::format("cannot write '{}'", jsonl.string()));

  double total_w = 0, done_w = 0;
  for (const auto& u : units) total_w += u.weight;
  double run_w = 0, run_s = 0;  // work and time of the samples actually run (for the ETA)
  SuiteProgress pg;
  pg.total = static_cast<int>(units.size());
  for (const Unit& u : units) {
    const std::string id = sample_id(u.req);
    // What is left of this sample.
    auto key = [&](size_t press, Protocol p, int q) {
      return fmt::format("{}\t{}\t{}\t{}", id, presses[press].canonical, protocol_name(p), q);
    };
    // A quick check on question 0 first; multi's other questions need the sample (below).
    bool all_done = !done.empty();
    for (Protocol p : u.protocols)
      for (size_t i = 0; i < presses.size() && all_done; ++i) all_done = done.count(key(i, p, 0)) > 0;
    pg.current = id;
    pg.finished_sample = false;
    pg.elapsed_s = std::chrono::duration<double>(Clock::now() - t_start).count();
    if (progress) progress(pg);
    Sample s;
    bool skipped = false;
    if (all_done) {
      // Multi: every question of every press must be there too.
      s = gen.make(u.req);
      all_done = true;
      for (Protocol p : u.protocols)
        for (size_t i = 0; i < presses.size(); ++i)
          for (int q = 0; q < (multi_question(p) ? static_cast<int>(s.questions.size()) : 1); ++q)
            all_done = all_done && done.count(key(i, p, q)) > 0;
      skipped = all_done;
    }
    const auto t0 = Clock::now();
    if (!skipped) {
      if (s.id.empty()) s = gen.make(u.req);
      for (Protocol p : u.protocols) {
        auto skip = [&](size_t press, int q) { return done.count(key(press, p, q)) > 0; };
        const std::vector<Record> recs = runner.run(s, presses, p, skip);
        int forked = 0;
        for (const Record& r : recs) {
          out << r.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
          forked += r.forked && r.question == 0 ? 1 : 0;
        }
        out.flush();
        if (!out) throw Error(fmt::format("error writing '{}'", jsonl.string()));
        res.records += static_cast<int64_t>(recs.size());
        res.prefill_ms += runner.last_prefill_ms();
        if (!recs.empty() && forked > 1 && !cfg.independent) {
          double shared = 0;
          for (const Record& r : recs)
            if (r.forked) shared = r.prefill_ms;
          res.prefill_saved_ms += shared * (forked - 1);
        }
      }
      ++res.samples_run;
      run_w += u.weight;
      run_s += std::chrono::duration<double>(Clock::now() - t0).count();
    } else {
      ++res.samples_skipped;
    }
    done_w += u.weight;
    ++pg.done;
    pg.finished_sample = true;
    pg.elapsed_s = std::chrono::duration<double>(Clock::now() - t_start).count();
    pg.eta_s = run_w > 0 ? run_s / run_w * (total_w - done_w) : -1;
    if (progress) progress(pg);
  }
  out.close();
  res.records_skipped = static_cast<int64_t>(done.size());

  const auto all = read_jsonl(jsonl.string());
  res.summary = summarize(all);
  write_file(dir / "summary.csv", summary_csv(res.summary));
  res.wall_s = std::chrono::duration<double>(Clock::now() - t_start).count();
  nlohmann::ordered_json sj;
  sj["config"] = config;
  sj["run"] = {{"wall_s", res.wall_s},
               {"samples_run", res.samples_run},
               {"samples_skipped", res.samples_skipped},
               {"records_written", res.records},
               {"records_total", all.size()},
               {"prefill_ms", res.prefill_ms},
               {"prefill_saved_ms", res.prefill_saved_ms}};
  // Totals over this invocation and the earlier ones of a resumed run.
  for (const char* k : {"wall_s", "prefill_ms", "prefill_saved_ms"}) {
    const std::string all_k = std::string(k) + "_all";
    double prev = 0;
    if (before.contains(all_k) && before[all_k].is_number()) {
      prev = before[all_k].get<double>();
    } else if (before.contains(k) && before[k].is_number()) {
      prev = before[k].get<double>();
    }
    sj["run"][all_k] = sj["run"][k].get<double>() + prev;
  }
  sj["run"]["invocations"] = 1 + (before.contains("invocations") && before["invocations"].is_number_integer()
                                      ? before["invocations"].get<int>()
                                      : (before.is_null() ? 0 : 1));
  sj["rows"] = res.summary;
  write_file(dir / "summary.json", sj.dump(2) + "\n");
  return res;
}

}  // namespace snapkv::eval
