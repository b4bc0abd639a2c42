// snapkv: command-line entry point (llama.cpp-style flags).
//   snapkv serve    -m MODEL [--host H] [--port P] [--kv-memory-budget B] [--press ...] (src/server/)
//   snapkv run      -m MODEL.gguf|gemma3|smollm2 (-p TEXT | -f FILE) [-n N] [-t T] [-c CTX] [--temp T] ... [--press
//   NAME --budget C] [--chat [--system TEXT] [--messages FILE] [--chat-template FILE|NAME]]
//   snapkv inspect  -m MODEL.gguf [--json]
//   snapkv tokenize -m MODEL.gguf (-p TEXT | -f FILE) [--json]
//   snapkv chat-template -m MODEL.gguf [--messages FILE] [--system TEXT] [-p TEXT | -f FILE] [--json]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "snapkv/error.h"

using snapkv::cli::kv_type_arg;
using snapkv::cli::prefill_attention_arg;
using snapkv::cli::RunOptions;

namespace {

constexpr int64_t kMaxCount = int64_t{1} << 30;  // -n, -c, --top-k
constexpr int64_t kMaxSpan = int64_t{1} << 24;   // --window, --kernel, --sinks (sums stay in int)
constexpr const char* kModelHelp =
    "GGUF model file, or a cached model by name: gemma3 (Gemma 3 270M Q4_K_M, the default) or smollm2 "
    "(SmolLM2-135M-Instruct Q4_1); scripts/get-model.sh NAME fetches them";

void add_press_options(CLI::App& app, RunOptions& o);

// --system, --messages, --chat-template, --tools (run and chat-template).
/// --kv-type and --kv-type-v of run, serve and eval.
void add_kv_type_option(CLI::App& app, std::string& kv_type, std::string& kv_type_v) {
  app.add_option("--kv-type", kv_type,
                 "KV cache element type of keys, and of values unless --kv-type-v (q8_0 / q4_0: ggml blocks, 34 / 18 "
                 "bytes per 32 elements; q4_0 keys cost quality, see docs/quality.md)")
      ->capture_default_str()
      ->check(kv_type_arg());
  app.add_option("--kv-type-v", kv_type_v,
                 "KV cache element type of values (default: --kv-type's); mixed types must both be quantized, e.g. "
                 "--kv-type q8_0 --kv-type-v q4_0")
      ->check(kv_type_arg());
}

/// --prefill-attn of run, serve and eval.
void add_prefill_attn_option(CLI::App& app, std::string& prefill_attn) {
  app.add_option("--prefill-attn", prefill_attn,
                 "prefill attention arithmetic: exact (f32), bf16 (bfloat16 dot products, f32 sums; a CPU "
                 "and build with AVX512-BF16, else an error; layers with head_dim % 32 != 0 run exact) or int8 "
                 "(int8 Q K^T and P V, query and key scales per 32 dims, value scales per row, f32 softmax; a "
                 "build with AVX2, else an error; layers with head_dim % 32 != 0 or > 512 run exact)")
      ->capture_default_str()
      ->check(prefill_attention_arg());
}

void add_chat_flags(CLI::App& app, snapkv::cli::ChatFlags& c, bool implies_chat) {
  using snapkv::cli::non_empty;
  const std::string implies = implies_chat ? "; implies --chat" : "";
  app.add_option("--system", c.system,
                 "a system message before the conversation" + std::string(implies_chat ? " (implies --chat)" : ""))
      ->check(non_empty("omit --system for no system message"));
  app.add_option("--messages", c.messages_file,
                 "JSON file with an OpenAI-style list of messages [{\"role\": ..., \"content\": ...}, ...] "
                 "(multi-turn; -p/-f, if given, is appended as a user message" +
                     implies + ")")
      ->check(non_empty("--messages FILE"));
  app.add_option("--chat-template", c.template_flag,
                 "Jinja chat template file, or a built-in template: chatml, gemma, llama3 (default: the model's" +
                     implies + ")")
      ->check(non_empty("--chat-template FILE|NAME"));
  app.add_option("--tools", c.tools_file,
                 "JSON file with a list of tool definitions passed to the template as `tools`" + implies)
      ->check(non_empty("--tools FILE"));
}

void add_run_options(CLI::App& run, RunOptions& o) {
  using snapkv::cli::int_in;
  using snapkv::cli::non_empty;
  using snapkv::cli::one_of;
  using snapkv::cli::press_arg;
  using snapkv::cli::real_in;
  run.add_option("-m,--model", o.model, kModelHelp)->check(non_empty("omit -m to use the default model"));
  run.add_option("-p,--prompt", o.prompt,
                 "prompt text; with -f, the question asked after the file's document (its question span, for "
                 "window=question presses)")
      ->check(non_empty("give the text to continue"));
  run.add_option("-f,--file", o.prompt_file, "read the prompt (or, with -p, the document) from a file")
      ->check(non_empty("-f FILE"));
  run.add_option("-n,--n-predict", o.n_predict, "tokens to generate")
      ->capture_default_str()
      ->check(int_in(0, kMaxCount));
  run.add_option("-t,--threads", o.threads, "threads (0: all cores)")->capture_default_str()->check(int_in(0, 1024));
  run.add_option("-c,--ctx-size", o.n_ctx, "context length in tokens (0: the model's training context)")
      ->capture_default_str()
      ->check(int_in(0, kMaxCount));
  run.add_option("--temp", o.temp, "temperature (0: greedy)")->capture_default_str()->check(real_in(0, 100));
  run.add_option("--top-k", o.top_k, "top-k sampling (0: off)")->capture_default_str()->check(int_in(0, kMaxCount));
  run.add_option("--top-p", o.top_p, "top-p sampling (1: off)")->capture_default_str()->check(real_in(0, 1, true));
  run.add_option_function<uint64_t>(
         "--seed", [&o](uint64_t s) { o.seed = s, o.seed_set = true; }, "RNG seed (default: random)")
      ->check(snapkv::cli::uint64_any());
  run.add_flag("--chat", o.chat, "wrap the prompt in the model's chat template (tokenizer.chat_template)");
  add_chat_flags(run, o.chat_flags, true);
  run.add_flag("--ignore-eos", o.ignore_eos, "do not stop at end-of-generation tokens");
  add_kv_type_option(run, o.kv_type, o.kv_type_v);
  add_prefill_attn_option(run, o.prefill_attn);
  run.add_flag("--json", o.json, "print one JSON report instead of streaming text");

  add_press_options(run, o);
  run.add_option("--question", o.questions,
                 "question asked after the context (-p/-f) was prefilled and compressed (query-agnostic protocol); "
                 "repeat it to ask several, each of the same compressed document")
      ->check(non_empty("omit --question to ask nothing"));
  run.add_option("--cold-tier", o.cold_tier,
                 "keep every prompt entry of the compressed layers in a cold tier (int8, f16, or disk:DIR: int8 in "
                 "a file under DIR) and let each --question re-select the hot entries from it")
      ->check(non_empty("--cold-tier int8|f16|disk:DIR"));
  run.add_option("--save-session", o.save_session,
                 "write the prefilled, compressed context (hot KV cache, cold tier, press, model sha256) to FILE; "
                 "with no --question, stop there")
      ->check(non_empty("--save-session FILE"));
  run.add_option("--load-session", o.load_session,
                 "restore a context saved with --save-session (same model) instead of reading -p/-f, and answer "
                 "the --question(s) from it; with --cold-tier disk:DIR the cold rows go to a file under DIR")
      ->check(non_empty("--load-session FILE"))
      ->excludes("--save-session");
  run.add_option("--dump-kept", o.dump_kept, "write the kept positions and scores per layer and KV head as JSON")
      ->check(non_empty("--dump-kept FILE"));
  run.add_flag("--profile", o.profile,
               "time each operation of the forward pass and count the weight and KV bytes it reads; print a table "
               "per phase (decode, prefill) to stderr when done, and with --json add it as \"profile\"");
}

// The press flags shared by run and serve.
void add_press_options(CLI::App& app, RunOptions& o) {
  using snapkv::cli::int_in;
  using snapkv::cli::one_of;
  using snapkv::cli::press_arg;
  using snapkv::cli::real_in;
  app.add_option_function<std::string>(
         "--press",
         [&o](const std::string& s) {
           const snapkv::PressSpec spec = snapkv::PressSpec::parse(s);
           o.press.name = spec.name;
           if (s.find(':') != std::string::npos) o.press_spec = s;
         },
         "KV-cache compression policy: a name (default none), or a whole spec such as "
         "snapkv:budget=512,window=16 or knorm:alloc=ada (then without the flags below)")
      ->default_str("none")
      ->check(press_arg());
  auto* b = app.add_option_function<int64_t>(
                   "--budget", [&o](int64_t c) { o.press.budget = c, o.budget_set = true; },
                   "tokens kept per KV head, observation window included (default 1024)")
                ->check(int_in(1, int64_t{1} << 40));
  auto* r = app.add_option_function<double>(
                   "--compression-ratio", [&o](double x) { o.press.compression_ratio = x, o.ratio_set = true; },
                   "fraction of prompt positions removed (alternative to --budget)")
                ->check(real_in(0, 1, false, true));
  b->excludes(r);
  app.add_option("--window", o.press.window, "observation window W (recent tokens always kept)")
      ->capture_default_str()
      ->check(int_in(1, kMaxSpan));
  app.add_option("--kernel", o.press.kernel, "1D pooling kernel K (odd)")
      ->capture_default_str()
      ->check(int_in(1, kMaxSpan));
  app.add_option_function<std::string>(
         "--pool",
         [&o](const std::string& s) { o.press.pool = s == "avg" ? snapkv::PoolType::Avg : snapkv::PoolType::Max; },
         "pooling of the window's scores (default max)")
      ->check(one_of({"max", "avg"}));
  app.add_option_function<std::string>(
         "--gqa-agg",
         [&o](const std::string& s) {
           o.press.gqa_agg = s == "max" ? snapkv::GQAAgg::Max : s == "sum" ? snapkv::GQAAgg::Sum : snapkv::GQAAgg::Mean;
         },
         "reduce query-head scores per KV head (default mean)")
      ->check(one_of({"mean", "max", "sum"}));
  app.add_option("--sinks", o.press.sinks, "attention sinks kept by streamingllm")
      ->capture_default_str()
      ->check(int_in(0, kMaxSpan));
  app.add_option("--span-gap", o.press.span_gap,
                 "span-preserving selection: holes of up to G positions between kept tokens are kept too, at the "
                 "same budget (0: plain top-k)")
      ->capture_default_str()
      ->check(int_in(0, kMaxSpan));
}

// Press flags given, for the "spec or flags, not both" check.
void collect_press_flags(const CLI::App& app, RunOptions& o) {
  for (const char* f :
       {"--budget", "--compression-ratio", "--window", "--kernel", "--pool", "--gqa-agg", "--sinks", "--span-gap"})
    if (app.count(f) > 0) o.press_flags.emplace_back(f);
}

void add_serve_options(CLI::App& s, snapkv::cli::ServeOptions& o) {
  using snapkv::cli::int_in;
  using snapkv::cli::non_empty;
  using snapkv::cli::one_of;
  using snapkv::cli::real_in;
  s.add_option("-m,--model", o.model, kModelHelp)->check(non_empty("omit -m to use the default model"));
  s.add_option("--host", o.host, "address to listen on (127.0.0.1: this machine only)")
      ->capture_default_str()
      ->check(non_empty("--host ADDRESS"));
  s.add_option("--port", o.port, "TCP port")->capture_default_str()->check(int_in(1, 65535));
  s.add_option("-t,--threads", o.threads, "threads (0: all cores)")->capture_default_str()->check(int_in(0, 1024));
  s.add_option("-c,--ctx-size", o.n_ctx, "context length per request in tokens (0: the model's training context)")
      ->capture_default_str()
      ->check(int_in(0, kMaxCount));
  s.add_option("-n,--n-predict", o.n_predict, "max_tokens of a request that gives none")
      ->capture_default_str()
      ->check(int_in(1, kMaxCount));
  s.add_option("--kv-memory-budget", o.kv_memory_budget,
               "KV cache bytes that admitted requests may hold at most (BYTES, or with KiB/MiB/GiB; 0: unlimited)")
      ->capture_default_str();
  s.add_option("--session-budget", o.session_budget,
               "bytes (hot KV + cold tier) the compressed contexts of requests naming a \"session\" may hold "
               "together, least recently used dropped first (BYTES, or with KiB/MiB/GiB; 0: no sessions)")
      ->capture_default_str();
  s.add_option("--session-cold-tier", o.session_cold_tier,
               "cold tier of a compressed session context: int8, f16 or disk:DIR (follow-up requests re-select from "
               "it)")
      ->capture_default_str()
      ->check(non_empty("--session-cold-tier int8|f16|disk:DIR"));
  s.add_option("--max-queue", o.max_queue, "requests waiting for admission at most (then 429)")
      ->capture_default_str()
      ->check(int_in(0, 1 << 20));
  s.add_option("--max-batch-rows", o.max_batch_rows, "rows of one engine block call (decode rows + a prefill chunk)")
      ->capture_default_str()
      ->check(int_in(2, 1 << 20));
  s.add_option("--max-running", o.max_running, "requests running at once at most (< --max-batch-rows)")
      ->capture_default_str()
      ->check(int_in(1, 1 << 20));
  s.add_option("--prefill-rows", o.prefill_rows, "token-layers of prefill work per engine step (continuous batching)")
      ->capture_default_str()
      ->check(int_in(1, int64_t{1} << 40));
  add_kv_type_option(s, o.kv_type, o.kv_type_v);
  add_prefill_attn_option(s, o.prefill_attn);
  s.add_option("--temp", o.temp, "default temperature")->capture_default_str()->check(real_in(0, 100));
  s.add_option("--top-k", o.top_k, "default top-k (0: off)")->capture_default_str()->check(int_in(0, kMaxCount));
  s.add_option("--top-p", o.top_p, "default top-p (1: off)")->capture_default_str()->check(real_in(0, 1, true));
  s.add_option("--api-key", o.api_key, "require Authorization: Bearer KEY (all routes but /health)")
      ->check(non_empty("--api-key KEY"));
  s.add_flag("--metrics", o.metrics, "serve Prometheus metrics at GET /metrics");
  s.add_option("--max-body", o.max_body, "largest request body in bytes (then 413)")
      ->capture_default_str()
      ->check(int_in(1024, int64_t{1} << 32));
  s.add_option("--http-threads", o.http_threads,
               "HTTP threads at most: one per open connection, started as connections arrive (then they wait)")
      ->capture_default_str()
      ->check(int_in(1, 1 << 16));
  s.add_option("--read-timeout", o.read_timeout,
               "seconds a client may stay silent while it sends a request (then the connection is dropped)")
      ->capture_default_str()
      ->check(real_in(0.1, 3600));
  s.add_option("--shutdown-grace", o.shutdown_grace, "seconds running streams may finish after SIGINT/SIGTERM")
      ->capture_default_str()
      ->check(real_in(0, 3600));
  s.add_option("--debug-step-delay-ms", o.debug_step_delay_ms, "tests: sleep after every engine step")
      ->group("")  // hidden
      ->check(int_in(0, 10000));
  add_press_options(s, o.press);
}

void add_eval_options(CLI::App& ev, snapkv::cli::EvalOptions& o) {
  using snapkv::cli::int_in;
  using snapkv::cli::non_empty;
  using snapkv::cli::one_of;
  ev.add_option("-m,--model", o.model, kModelHelp)->check(non_empty("omit -m to use the default model"));
  ev.add_option("--tasks", o.tasks,
                "tasks, comma-separated: niah_single_1/2/3, niah_multikey_1/2/3, niah_multivalue, niah_multiquery, vt, "
                "cwe, fwe (RULER), niah_grid (depth x length), fidelity; aliases ruler, all")
      ->capture_default_str()
      ->check(non_empty("--tasks LIST"));
  ev.add_option("--lengths", o.lengths, "sample lengths in tokens (prompt + generated), e.g. 2K,4K,8K")
      ->capture_default_str()
      ->check(non_empty("--lengths LIST"));
  auto* ps = ev.add_option("--presses", o.presses,
                           "press specs, comma-separated (an item with '=' and no ':' continues the previous spec: "
                           "snapkv:budget=512,window=16,tova:ratio=0.5); none is always added")
                 ->check(non_empty("--presses LIST"));
  auto* grid = ev.add_option("--press-grid", o.press_grid, "press names crossed with --ratios and --budgets")
                   ->capture_default_str()
                   ->check(non_empty("--press-grid NAMES"));
  ps->excludes(grid);
  // The grid's settings mean nothing beside whole specs: an error, not silently dropped.
  ps->excludes(ev.add_option("--ratios", o.ratios, "compression ratios of the grid (fraction of the prompt removed)")
                   ->capture_default_str());
  ps->excludes(ev.add_option("--budgets", o.budgets,
                             "budgets of the grid (tokens kept per KV head); given alone, the grid has no --ratios"));
  ev.add_option("--protocol", o.protocol,
                "aware (question in the window), agnostic (context compressed alone), multi (several questions after "
                "one compression), reselect (multi with a cold tier: each question re-selects; issue 10), followup "
                "(compressed with question 1, later questions after its expected answer: plain SnapKV in a "
                "conversation), "
                "both (aware,agnostic), all (aware,agnostic,multi)")
      ->capture_default_str();
  ev.add_option("--cold-tier", o.cold_tier, "cold tier of the reselect protocol: int8, f16 or disk:DIR")
      ->capture_default_str()
      ->check(non_empty("--cold-tier int8|f16|disk:DIR"));
  ev.add_option("--samples", o.samples, "samples per task and length (niah_grid: per depth too)")
      ->capture_default_str()
      ->check(int_in(1, 100000));
  ev.add_option("--seed", o.seed, "seed of the samples")->capture_default_str()->check(snapkv::cli::uint64_any());
  ev.add_option("--out", o.out, "output directory")->required()->check(non_empty("--out DIR"));
  ev.add_option("-t,--threads", o.threads, "threads (0: all cores)")->capture_default_str()->check(int_in(0, 1024));
  ev.add_flag("--resume", o.resume, "continue the run in --out: skip the records already in samples.jsonl");
  ev.add_option("--depths", o.depths, "niah_grid needle depths in percent")->capture_default_str();
  ev.add_option("--chat", o.chat, "chat template: auto (the model's, if its GGUF has one), on, off")
      ->capture_default_str()
      ->check(one_of({"auto", "on", "off"}));
  ev.add_option("--answer-prefix", o.answer_prefix,
                "on: RULER's answer prefix after the question (the model's first tokens are the answer); off: the "
                "question alone, as users ask in a chat")
      ->capture_default_str()
      ->check(one_of({"on", "off"}));
  ev.add_option("--gen-tokens", o.gen_tokens, "tokens to generate per answer (0: each task's, RULER's)")
      ->capture_default_str()
      ->check(int_in(0, 1 << 20));
  ev.add_option("--fidelity-chunk", o.fidelity_chunk,
                "fidelity: continuation tokens per teacher-forced step (1: each token through the decode attention "
                "kernel, as generation runs it; larger: the prefill kernel)")
      ->capture_default_str()
      ->check(int_in(1, 4096));
  add_kv_type_option(ev, o.kv_type, o.kv_type_v);
  ev.add_option("--reference-kv-type", o.reference_kv_type,
                "fidelity: compare against a full cache of this type, keys and values (default: --kv-type / "
                "--kv-type-v), e.g. f16 with --kv-type q8_0")
      ->check(kv_type_arg());
  add_prefill_attn_option(ev, o.prefill_attn);
  ev.add_flag("--no-plots", o.no_plots, "do not draw the pictures and index.html");
  ev.add_flag("--no-fork", o.no_fork, "prefill every press on its own (slow; a check of the fork-based runner)");
  ev.add_flag("-q,--quiet", o.quiet, "no progress output");
}

// CLI11 reports an unknown subcommand as "A subcommand is required" and options placed before
// the subcommand as unexpected arguments; say what is wrong instead. Empty: argv looks fine.
std::string check_subcommand(int argc, char** argv) {
  if (argc < 2) return "";
  const std::string first = argv[1];
  for (const char* ok : {"run", "serve", "inspect", "tokenize", "chat-template", "eval", "-h", "--help", "--version"}) {
    if (first == ok) return "";
  }
  if (!first.empty() && first[0] == '-') {
    return fmt::format(
        "option '{}' before the subcommand: write options after it, e.g. snapkv run -m MODEL.gguf -p TEXT",
        snapkv::cli::printable(first));
  }
  return fmt::format(
      "unknown subcommand '{}' (expected run, serve, inspect, tokenize, chat-template or eval; see snapkv --help)",
      snapkv::cli::printable(first));
}

// Output that could not be written (disk full, closed stdout) must not end in exit 0. A reader
// that went away (EPIPE, when SIGPIPE is ignored) ends the run quietly, as SIGPIPE would.
int finish_stdout(int rc) {
  const int err = snapkv::cli::stdout_error();
  if (err == 0) return rc;
  if (err != EPIPE) fmt::print(stderr, "snapkv: error: cannot write the output to stdout: {}\n", std::strerror(err));
  return rc == 0 ? 1 : rc;
}

}  // namespace

int main(int argc, char** argv) {
  using snapkv::cli::printable;
  CLI::App app{"snapkv: LLM inference with SnapKV prompt KV-cache compression", "snapkv"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "snapkv " SNAPKV_PROJECT_VERSION);

  RunOptions run_opt;
  auto* run = app.add_subcommand("run", "generate text from a prompt");
  add_run_options(*run, run_opt);

  snapkv::cli::ServeOptions serve_opt;
  auto* serve = app.add_subcommand("serve", "an OpenAI-compatible HTTP server with per-request KV compression");
  add_serve_options(*serve, serve_opt);

  const auto model_check = snapkv::cli::non_empty("omit -m to use the default model");
  std::string inspect_model;
  bool inspect_json = false;
  auto* inspect = app.add_subcommand("inspect", "architecture, hyper-parameters, tensors, types and sizes of a GGUF");
  inspect->add_option("-m,--model", inspect_model, kModelHelp)->check(model_check);
  inspect->add_flag("--json", inspect_json, "JSON output");

  snapkv::cli::TokenizeOptions tok_opt;
  bool tok_no_bos = false;
  auto* tokenize = app.add_subcommand("tokenize", "token ids and pieces of a text");
  tokenize->add_option("-m,--model", tok_opt.model, kModelHelp)->check(model_check);
  auto* tok_p = tokenize->add_option_function<std::string>(
      "-p,--prompt", [&tok_opt](const std::string& t) { tok_opt.text = t, tok_opt.text_set = true; },
      "text to tokenize (or -f; exactly one of them)");
  auto* tok_f = tokenize
                    ->add_option("-f,--file", tok_opt.text_file,
                                 "read the text to tokenize from a file (any length; -p is capped by the command line)")
                    ->check(snapkv::cli::non_empty("-f FILE"));
  tok_p->excludes(tok_f);
  tokenize->add_flag("--json", tok_opt.json, "JSON output");
  tokenize->add_flag("--no-bos", tok_no_bos, "do not add BOS/EOS as the model's metadata asks");
  tokenize->add_flag("--parse-special", tok_opt.parse_special, "recognise special-token texts such as <start_of_turn>");

  snapkv::cli::ChatTemplateCommandOptions ct_opt;
  bool ct_no_gen = false;
  auto* chat_tmpl =
      app.add_subcommand("chat-template", "print the prompt the chat template renders for a conversation");
  chat_tmpl->add_option("-m,--model", ct_opt.model, kModelHelp)->check(model_check);
  auto* ct_p = chat_tmpl->add_option_function<std::string>(
      "-p,--prompt", [&ct_opt](const std::string& t) { ct_opt.prompt = t, ct_opt.prompt_set = true; },
      "a user message (after --messages, if given)");
  auto* ct_f = chat_tmpl->add_option("-f,--file", ct_opt.prompt_file, "read the user message from a file")
                   ->check(snapkv::cli::non_empty("-f FILE"));
  ct_p->excludes(ct_f);
  add_chat_flags(*chat_tmpl, ct_opt.chat_flags, false);
  chat_tmpl->add_flag("--no-generation-prompt", ct_no_gen, "do not open the assistant turn at the end");
  chat_tmpl->add_flag("--json", ct_opt.json, "JSON: text, n_tokens, ids, template, template_spans");

  snapkv::cli::EvalOptions eval_opt;
  auto* eval =
      app.add_subcommand("eval", "answer quality under KV-cache compression: RULER tasks, needle grid, fidelity");
  add_eval_options(*eval, eval_opt);

  if (const std::string bad = check_subcommand(argc, argv); !bad.empty()) {
    fmt::print(stderr, "snapkv: error: {}\n", bad);
    return 2;
  }
  try {
    app.parse(argc, argv);
    collect_press_flags(*run, run_opt);
    collect_press_flags(*serve, serve_opt.press);
    run_opt.kv_type_set = run->count("--kv-type") > 0;
    run_opt.press_set = run->count("--press") > 0;
  } catch (const CLI::CallForHelp& e) {
    return finish_stdout(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return finish_stdout(app.exit(e));
  } catch (const CLI::CallForVersion& e) {
    return finish_stdout(app.exit(e));
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "snapkv: error: {}\n", printable(e.what()));
    return 2;
  }

  int rc = 0;
  try {
    if (*run) {
      const auto& c = run_opt.chat_flags;
      if (!c.system.empty() || !c.messages_file.empty() || !c.template_flag.empty() || !c.tools_file.empty()) {
        run_opt.chat = true;
      }
      rc = snapkv::cli::run_command(run_opt);
    }
    if (*chat_tmpl) {
      ct_opt.chat_flags.add_generation_prompt = !ct_no_gen;
      rc = snapkv::cli::chat_template_command(ct_opt);
    }
    if (*serve) rc = snapkv::cli::serve_command(serve_opt);
    if (*inspect) rc = snapkv::cli::inspect_command(inspect_model, inspect_json);
    if (*eval) {
      // --budgets alone means a budget grid: the default --ratios apply only when no budgets are given.
      if (eval->count("--ratios") == 0 && !eval_opt.budgets.empty()) eval_opt.ratios.clear();
      rc = snapkv::cli::eval_command(eval_opt);
    }
    if (*tokenize) {
      tok_opt.add_special = !tok_no_bos;
      rc = snapkv::cli::tokenize_command(tok_opt);
    }
  } catch (const snapkv::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "snapkv: error: {}\n", printable(e.what()));
    return 1;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    fmt::print(stderr, "snapkv: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "snapkv: error: {}\n", printable(e.what()));
    return 1;
  }
  return finish_stdout(rc);
}
