// snapkv: command-line entry point (llama.cpp-style flags).
//   snapkv run      -m MODEL.gguf (-p TEXT | -f FILE) [-n N] [-t T] [-c CTX] [--temp T] ... [--press NAME --budget C]
//   snapkv inspect  -m MODEL.gguf [--json]
//   snapkv tokenize -m MODEL.gguf -p TEXT [--json]
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <map>

#include "cli/commands.h"
#include "snapkv/error.h"

using snapkv::cli::RunOptions;

namespace {

void add_run_options(CLI::App& run, RunOptions& o) {
  run.add_option("-m,--model", o.model, "GGUF model file (default: the cached Gemma 3 270M Q4_K_M)");
  auto* p = run.add_option("-p,--prompt", o.prompt, "prompt text");
  auto* f = run.add_option("-f,--file", o.prompt_file, "read the prompt from a file");
  p->excludes(f);
  run.add_option("-n,--n-predict", o.n_predict, "tokens to generate")->capture_default_str()->check(CLI::Range(0, 1 << 30));
  run.add_option("-t,--threads", o.threads, "threads (0: all cores)")->capture_default_str()->check(CLI::Range(0, 1024));
  run.add_option("-c,--ctx-size", o.n_ctx, "context length in tokens (0: the model's training context)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  run.add_option("--temp", o.temp, "temperature (0: greedy)")->capture_default_str()->check(CLI::Range(0.0f, 100.0f));
  run.add_option("--top-k", o.top_k, "top-k sampling (0: off)")->capture_default_str()->check(CLI::Range(0, 1 << 30));
  run.add_option("--top-p", o.top_p, "top-p sampling (1: off)")->capture_default_str()->check(CLI::Range(0.0f, 1.0f));
  run.add_option_function<uint64_t>("--seed", [&o](uint64_t s) { o.seed = s, o.seed_set = true; }, "RNG seed (default: random)");
  run.add_flag("--chat", o.chat, "wrap the prompt in the model's chat template");
  run.add_flag("--ignore-eos", o.ignore_eos, "do not stop at end-of-generation tokens");
  run.add_option("--kv-type", o.kv_type, "KV cache element type")->capture_default_str()->check(CLI::IsMember({"f16", "f32"}));
  run.add_flag("--json", o.json, "print one JSON report instead of streaming text");

  // Prompt KV-cache compression.
  std::string names;
  for (const auto& n : snapkv::press_names()) names += (names.empty() ? "" : "|") + n;
  run.add_option("--press", o.press.name, "KV-cache compression policy: " + names)->capture_default_str();
  auto* b = run.add_option_function<int64_t>(
      "--budget", [&o](int64_t c) { o.press.budget = c, o.budget_set = true; },
      "tokens kept per KV head, observation window included (default 1024)");
  auto* r = run.add_option_function<double>(
      "--compression-ratio", [&o](double x) { o.press.compression_ratio = x, o.ratio_set = true; },
      "fraction of prompt positions removed, in [0,1) (alternative to --budget)");
  b->excludes(r);
  run.add_option("--window", o.press.window, "observation window W (recent tokens always kept)")->capture_default_str();
  run.add_option("--kernel", o.press.kernel, "1D pooling kernel K (odd)")->capture_default_str();
  static const std::map<std::string, snapkv::PoolType> pools{{"max", snapkv::PoolType::Max}, {"avg", snapkv::PoolType::Avg}};
  run.add_option("--pool", o.press.pool, "pooling: max|avg (default max)")->transform(CLI::CheckedTransformer(pools));
  static const std::map<std::string, snapkv::GQAAgg> aggs{
      {"mean", snapkv::GQAAgg::Mean}, {"max", snapkv::GQAAgg::Max}, {"sum", snapkv::GQAAgg::Sum}};
  run.add_option("--gqa-agg", o.press.gqa_agg, "reduce query-head scores per KV head: mean|max|sum (default mean)")
      ->transform(CLI::CheckedTransformer(aggs));
  run.add_option("--sinks", o.press.sinks, "attention sinks kept by streamingllm")->capture_default_str();
  run.add_option("--question", o.question,
                 "question asked after the context (-p/-f) was prefilled and compressed (query-agnostic protocol)");
  run.add_option("--dump-kept", o.dump_kept, "write the kept positions and scores per layer and KV head as JSON");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"snapkv: LLM inference with SnapKV prompt KV-cache compression"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "snapkv 0.1.0");

  RunOptions run_opt;
  auto* run = app.add_subcommand("run", "generate text from a prompt");
  add_run_options(*run, run_opt);

  std::string inspect_model;
  bool inspect_json = false;
  auto* inspect = app.add_subcommand("inspect", "architecture, hyper-parameters, tensors, types and sizes of a GGUF");
  inspect->add_option("-m,--model", inspect_model, "GGUF file (default: the cached Gemma 3 270M)");
  inspect->add_flag("--json", inspect_json, "JSON output");

  std::string tok_model, tok_text;
  bool tok_json = false, tok_no_bos = false, tok_special = false;
  auto* tokenize = app.add_subcommand("tokenize", "token ids and pieces of a text");
  tokenize->add_option("-m,--model", tok_model, "GGUF file (default: the cached Gemma 3 270M)");
  tokenize->add_option("-p,--prompt", tok_text, "text to tokenize")->required();
  tokenize->add_flag("--json", tok_json, "JSON output");
  tokenize->add_flag("--no-bos", tok_no_bos, "do not add BOS/EOS as the model's metadata asks");
  tokenize->add_flag("--parse-special", tok_special, "recognise special-token texts such as <start_of_turn>");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "snapkv: error: {}\n", e.what());
    return 2;
  }

  try {
    if (*run) return snapkv::cli::run_command(run_opt);
    if (*inspect) return snapkv::cli::inspect_command(inspect_model, inspect_json);
    if (*tokenize) return snapkv::cli::tokenize_command(tok_model, tok_text, tok_json, !tok_no_bos, tok_special);
  } catch (const snapkv::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "snapkv: error: {}\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "snapkv: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "snapkv: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
