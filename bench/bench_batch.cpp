// bench_batch: many sequences at once through the public API (Engine::step with Batches).
//
//   build/bench_batch -m MODEL [-t 2] [--prompt-tokens 4096] [--batch 1,2,4,8,16] [--steps 32]
//                     [--presses none,snapkv:budget=1024] [--memory 64] [--interleave 4] [--json FILE]
//
// 1. Batched decode: one prompt of exactly --prompt-tokens tokens (a prefix of --text, repeated)
//    is prefilled once, keeping its window queries; each press gets --batch forks of it,
//    compressed with the press (Sequence::compress: the same cache a prefill with that press
//    gives), each fed a different first token so that they diverge. All forks then decode
//    together, one row each per Engine::step, for --steps timed steps after 3 warm-up steps.
//    Reported: aggregate tokens/s, ms per step, speedup over one sequence, and the
//    memory-bandwidth bound of a step: (weight bytes + the batch's KV bytes) / read bandwidth
//    (measured here, --bandwidth-gbs to give it).
// 2. Memory (--memory N): N idle sequences holding the compressed prompt; resident memory
//    growth (/proc/self/statm) against their KV bytes + 4 bytes of position per entry + the
//    stated per-sequence constant (Sequence::constant_bytes).
// 3. Interleaving (--interleave N): N sequences decode while one more prompt of the same length
//    prefills with the first compressing press, advancing --prefill-rows token-layers per step;
//    per-step latency (ITL) of the decoders during the prefill, and the prefill's time, against
//    decoding alone and prefilling alone.
#include <fmt/format.h>
#include <malloc.h>
#include <omp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "snapkv/snapkv.h"

namespace {

using Clock = std::chrono::steady_clock;
using snapkv::Batch;
using snapkv::Engine;
using snapkv::PressSpec;
using snapkv::Sequence;
using snapkv::Workspace;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(std::stoi(x));
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

size_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

/// Read bandwidth (GB/s) of `threads` threads summing a 1 GiB array, best of 5.
double measure_bandwidth(int threads) {
  const size_t n = (size_t{1} << 30) / sizeof(float);
  std::vector<float> a(n, 1.0f);
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = Clock::now();
    double total = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
    for (size_t i = 0; i < n; i += 16) {
      float s = 0;
      for (size_t j = 0; j < 16; ++j) s += a[i + j];
      total += s;
    }
    const double s = ms_since(t0) / 1000.0;
    if (total < 0) std::puts("");  // keeps the loop
    best = std::max(best, static_cast<double>(n * sizeof(float)) / s / 1e9);
  }
  return best;
}

std::vector<int32_t> exact_prompt(const Engine& e, const std::string& text, int64_t n) {
  std::string t = text;
  std::vector<int32_t> ids = e.tokenizer().encode(t, true, false);
  while (static_cast<int64_t>(ids.size()) < n) {
    t += "\n\n" + text;
    ids = e.tokenizer().encode(t, true, false);
  }
  ids.resize(static_cast<size_t>(n));
  return ids;
}

/// Forks of `base` compressed with `press`, each fed a different first token.
std::vector<std::unique_ptr<Sequence>> make_forks(const Sequence& base, const std::string& press, int n,
                                                  Workspace& ws) {
  std::vector<std::unique_ptr<Sequence>> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(base.fork());
    if (press != "none") out.back()->compress(PressSpec::parse(press), ws);
  }
  return out;
}

struct StepTimes {
  double total_ms = 0;
  std::vector<double> per_step;
};

/// `steps` greedy decode steps of all `seqs` together (after `warm` untimed ones).
StepTimes decode_together(const Engine& e, std::vector<std::unique_ptr<Sequence>>& seqs, Workspace& ws, int warm,
                          int steps) {
  const int V = e.info().n_vocab;
  std::vector<int32_t> next(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) next[i] = static_cast<int32_t>((1000 + 37 * i) % static_cast<size_t>(V));
  Batch b;
  StepTimes t;
  for (int s = 0; s < warm + steps; ++s) {
    b.clear();
    for (size_t i = 0; i < seqs.size(); ++i) b.add(*seqs[i], next[i]);
    const auto t0 = Clock::now();
    e.step(b, ws);
    const double ms = ms_since(t0);
    for (size_t i = 0; i < seqs.size(); ++i) next[i] = snapkv::argmax(b.logits(static_cast<int>(i)));
    if (s >= warm) {
      t.total_ms += ms;
      t.per_step.push_back(ms);
    }
  }
  return t;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_batch: batched decode, idle-sequence memory and prefill/decode interleaving"};
  std::string model, text_file = "/usr/share/common-licenses/GPL-3", batch_list = "1,2,4,8,16", json_out;
  std::string presses_arg = "none;snapkv:budget=1024";
  int threads = 2, steps = 32, memory_n = 64, interleave_n = 4;
  int64_t prompt_tokens = 4096, prefill_rows = 0;
  double bandwidth = 0;
  app.add_option("-m,--model", model, "GGUF model")->required();
  app.add_option("-t,--threads", threads, "threads")->capture_default_str();
  app.add_option("--prompt-tokens", prompt_tokens, "tokens of each prompt")->capture_default_str();
  app.add_option("--text", text_file, "text the prompts are cut from")->capture_default_str();
  app.add_option("--batch", batch_list, "sequence counts of the batched-decode table")->capture_default_str();
  app.add_option("--steps", steps, "timed decode steps per measurement")->capture_default_str();
  app.add_option("--presses", presses_arg, "press specs separated by ';'")->capture_default_str();
  app.add_option("--memory", memory_n, "idle sequences of the memory check (0: skip)")->capture_default_str();
  app.add_option("--interleave", interleave_n, "decoding sequences while a prefill runs (0: skip)")
      ->capture_default_str();
  app.add_option("--prefill-rows", prefill_rows, "token-layers a prefill advances per step (0: n_layer x 512 / 4)");
  app.add_option("--bandwidth-gbs", bandwidth, "read bandwidth (0: measure)");
  app.add_option("--json", json_out, "write every number as JSON");
  CLI11_PARSE(app, argc, argv);

  snapkv::EngineOptions eo;
  eo.n_threads = threads;
  auto engine = Engine::load(model, eo);
  const Engine& e = *engine;
  const auto& info = e.info();
  std::ifstream tf(text_file, std::ios::binary);
  if (!tf) {
    fmt::print(stderr, "bench_batch: cannot read --text {}\n", text_file);
    return 1;
  }
  const std::string text((std::istreambuf_iterator<char>(tf)), std::istreambuf_iterator<char>());
  const auto prompt = exact_prompt(e, text, prompt_tokens);
  const std::vector<std::string> presses = split(presses_arg, ';');
  if (bandwidth <= 0) bandwidth = measure_bandwidth(threads);
  nlohmann::json J;
  J["model"] = model;
  J["threads"] = threads;
  J["prompt_tokens"] = prompt_tokens;
  J["bandwidth_gbs"] = bandwidth;
  J["weight_bytes"] = info.weight_bytes;
  fmt::print("model {} ({}, {} layers, {} KV heads x {}), {} threads, prompt {} tokens, read bandwidth {:.1f} GB/s\n",
             model, info.arch, info.n_layer, info.n_head_kv, info.head_dim, threads, prompt_tokens, bandwidth);

  Workspace ws(e);
  auto base = e.new_sequence({});
  snapkv::PrefillOptions po;
  po.retain_window = 64;
  auto t0 = Clock::now();
  e.prefill(*base, prompt, po, ws);
  const double prefill_alone_ms = ms_since(t0);
  fmt::print("prefill of the prompt: {:.0f} ms ({:.0f} tokens/s)\n\n", prefill_alone_ms,
             1000.0 * static_cast<double>(prompt_tokens) / prefill_alone_ms);
  J["prefill_ms"] = prefill_alone_ms;

  // 1. Batched decode.
  const std::vector<int> ns = parse_list(batch_list);
  fmt::print(
      "| press | sequences | KV bytes / seq | ms / step | aggregate tok/s | x one seq | bound tok/s | of bound |\n");
  fmt::print("|---|---|---|---|---|---|---|---|\n");
  nlohmann::json rows = nlohmann::json::array();
  for (const std::string& press : presses) {
    double one = 0;
    for (const int n : ns) {
      auto seqs = make_forks(*base, press, n, ws);
      const StepTimes t = decode_together(e, seqs, ws, 3, steps);
      const double agg = 1000.0 * n * steps / t.total_ms;
      if (n == ns.front()) one = agg / n * ns.front();
      const double kv = static_cast<double>(seqs[0]->stats().kv_cache_bytes);
      const double bytes_step = static_cast<double>(info.weight_bytes) + n * kv;
      const double bound = n / (bytes_step / (bandwidth * 1e9));
      fmt::print("| {} | {} | {:.1f} MiB | {:.1f} | {:.1f} | {:.2f}x | {:.0f} | {:.0f}% |\n", press, n, kv / 1048576.0,
                 t.total_ms / steps, agg, agg / one, bound, 100.0 * agg / bound);
      std::fflush(stdout);
      rows.push_back({{"press", press},
                      {"sequences", n},
                      {"kv_bytes_per_seq", kv},
                      {"ms_per_step", t.total_ms / steps},
                      {"aggregate_tokens_per_s", agg},
                      {"bound_tokens_per_s", bound}});
    }
  }
  J["batched_decode"] = rows;

  // 2. Memory of idle sequences.
  if (memory_n > 0) {
    const std::string press = presses.back();
    std::vector<std::unique_ptr<Sequence>> idle;
    malloc_trim(0);  // memory freed by the tables above would otherwise be reused without growing RSS
    const size_t rss0 = resident_bytes();
    size_t kv = 0, pos = 0, constant = 0;
    for (int i = 0; i < memory_n; ++i) {
      idle.push_back(base->fork());
      if (press != "none") idle.back()->compress(PressSpec::parse(press), ws);
      const auto& st = idle.back()->stats();
      kv += st.kv_cache_bytes;
      pos += st.kv_cache_bytes / (2 * snapkv::kv_row_bytes(snapkv::KVType::F16, info.head_dim)) * sizeof(int32_t);
      constant += idle.back()->constant_bytes();
    }
    const size_t grown_held = resident_bytes() - rss0;
    // The forks' full-length copies were freed by compress(); glibc keeps such holes resident
    // until malloc_trim returns their pages (what a server does after compressing).
    malloc_trim(0);
    const size_t grown = resident_bytes() - rss0;
    const double expected = static_cast<double>(kv + pos + constant);
    fmt::print(
        "\n{} idle sequences ({}): RSS grew {:.2f} MiB ({:.2f} MiB before malloc_trim); KV {:.2f} MiB + positions "
        "{:.2f} MiB + constant {} x {} B = {:.2f} MiB expected ({:+.2f}%; before malloc_trim {:+.2f}%)\n",
        memory_n, press, grown / 1048576.0, grown_held / 1048576.0, kv / 1048576.0, pos / 1048576.0, memory_n,
        idle.back()->constant_bytes(), expected / 1048576.0, 100.0 * (static_cast<double>(grown) / expected - 1.0),
        100.0 * (static_cast<double>(grown_held) / expected - 1.0));
    J["memory"] = {{"sequences", memory_n},
                   {"press", press},
                   {"rss_growth_bytes", grown},
                   {"rss_growth_bytes_before_trim", grown_held},
                   {"kv_bytes", kv},
                   {"position_bytes", pos},
                   {"constant_bytes_each", idle.back()->constant_bytes()}};
  }

  // 3. A prefill interleaved with decoding.
  if (interleave_n > 0) {
    std::string press = presses.back();
    auto seqs = make_forks(*base, press, interleave_n, ws);
    const StepTimes alone = decode_together(e, seqs, ws, 3, steps);
    const int64_t rows_per_step = prefill_rows > 0 ? prefill_rows : info.n_layer * 512 / 4;
    auto fresh = e.new_sequence({});
    snapkv::PrefillOptions pf;
    pf.press = PressSpec::parse(press);
    fresh->begin_prefill(prompt, pf);
    const int V = info.n_vocab;
    std::vector<int32_t> next(seqs.size(), 1000 % V);
    std::vector<double> itl;
    Batch b;
    t0 = Clock::now();
    while (fresh->prefilling()) {
      b.clear();
      for (size_t i = 0; i < seqs.size(); ++i) b.add(*seqs[i], next[i]);
      b.add_prefill(*fresh, rows_per_step);
      const auto ts = Clock::now();
      e.step(b, ws);
      itl.push_back(ms_since(ts));
      for (size_t i = 0; i < seqs.size(); ++i) next[i] = snapkv::argmax(b.logits(static_cast<int>(i)));
    }
    const double prefill_mixed_ms = ms_since(t0);
    fmt::print(
        "\n{} sequences decoding while a {}-token prompt prefills ({}, {} token-layers per step):\n"
        "  decode alone: {:.1f} ms / step; during the prefill: median {:.1f}, p90 {:.1f}, max {:.1f} ms / step over {} "
        "steps ({} tokens each sequence)\n"
        "  prefill: {:.0f} ms alone (uncompressed), {:.0f} ms interleaved ({:.2f}x)\n",
        interleave_n, prompt_tokens, press, rows_per_step, alone.total_ms / steps, percentile(itl, 0.5),
        percentile(itl, 0.9), percentile(itl, 1.0), itl.size(), itl.size(), prefill_alone_ms, prefill_mixed_ms,
        prefill_mixed_ms / prefill_alone_ms);
    J["interleave"] = {{"sequences", interleave_n},
                       {"press", press},
                       {"rows_per_step", rows_per_step},
                       {"decode_alone_ms_per_step", alone.total_ms / steps},
                       {"itl_ms", itl},
                       {"prefill_alone_ms", prefill_alone_ms},
                       {"prefill_interleaved_ms", prefill_mixed_ms}};
  }
  if (!json_out.empty()) std::ofstream(json_out) << J.dump(1) << "\n";
  return 0;
}
