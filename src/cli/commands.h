// snapkv CLI: the sub-commands and their options (filled by CLI11 in main.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/chat_prompt.h"
#include "kv/presses/press.h"
#include "snapkv/press_spec.h"

namespace snapkv::cli {

/// `snapkv run`: generate text from a prompt, optionally with a compressed prompt KV cache.
struct RunOptions {
  std::string model;        ///< -m (empty: default model)
  std::string prompt;       ///< -p
  std::string prompt_file;  ///< -f
  int n_predict = 128;      ///< -n: tokens to generate
  int threads = 0;          ///< -t (0: all cores)
  int64_t n_ctx = 0;        ///< -c (0: model's training context)
  float temp = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  uint64_t seed = 0;
  bool seed_set = false;
  bool chat = false;  ///< --chat (also implied by --system, --messages, --chat-template)
  ChatFlags chat_flags;
  bool ignore_eos = false;
  std::string kv_type = "f16";
  bool kv_type_set = false;            ///< --kv-type given (a loaded session's types are its own)
  bool press_set = false;              ///< --press given (even "none": a loaded session's press is its own)
  std::string kv_type_v;               ///< --kv-type-v ("": kv_type)
  std::string prefill_attn = "exact";  ///< --prefill-attn exact|bf16|int8
  bool json = false;
  // Compression (issue 3).
  PressConfig press;
  bool budget_set = false;
  bool ratio_set = false;
  std::string press_spec;                ///< --press given as a whole spec (name:key=value,...), else ""
  std::vector<std::string> press_flags;  ///< the press flags given (--budget, --window, ...)
  /// --question (repeatable): each asked after the context (-p/-f) was prefilled and compressed,
  /// each from the same compressed document (a fork of it).
  std::vector<std::string> questions;
  std::string cold_tier;     ///< --cold-tier int8|f16|disk:DIR: questions re-select from it (issue 10)
  std::string save_session;  ///< --save-session FILE: write the prefilled, compressed context there (issue 10)
  std::string load_session;  ///< --load-session FILE: the context comes from that file; only --question is asked
  std::string dump_kept;     ///< --dump-kept FILE
  bool profile = false;      ///< --profile: time and bytes per operation (snapkv/op_profile.h)
};

int run_command(const RunOptions& opt);

/// The press spec the press flags of `opt` describe (--press NAME with --budget, ... or a whole
/// --press spec; budget 1024 when a press is given without budget or ratio). Throws
/// snapkv::Error for contradictory or invalid settings, as `run` does.
PressSpec press_from_flags(const RunOptions& opt);

/// `snapkv serve`: the OpenAI-compatible server (src/server/).
struct ServeOptions {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;
  int threads = 0;
  int64_t n_ctx = 0;
  int n_predict = 512;  ///< max_tokens of a request that gives none
  std::string kv_memory_budget = "0";
  std::string session_budget = "1GiB";     ///< --session-budget (issue 10)
  std::string session_cold_tier = "int8";  ///< --session-cold-tier int8|f16|disk:DIR
  int64_t max_queue = 64;
  int64_t max_batch_rows = 512;
  int64_t max_running = 64;
  int64_t prefill_rows = 4096;
  std::string kv_type = "f16";
  std::string kv_type_v;               ///< --kv-type-v ("": kv_type)
  std::string prefill_attn = "exact";  ///< --prefill-attn exact|bf16|int8
  float temp = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  std::string api_key;
  bool metrics = false;  ///< --metrics: serve GET /metrics
  int64_t max_body = 8 << 20;
  int http_threads = 1024;   ///< --http-threads: HTTP threads (open connections served at once) at most
  double read_timeout = 10;  ///< --read-timeout: seconds a client may stay silent while sending a request
  double shutdown_grace = 10;
  int debug_step_delay_ms = 0;  ///< tests only
  RunOptions press;             ///< only its press fields (--press, --budget, ...)
};

int serve_command(const ServeOptions& opt);

/// `snapkv inspect`: architecture, hyper-parameters, metadata and tensors of a GGUF.
int inspect_command(const std::string& model, bool json);

/// `snapkv tokenize`: ids and pieces of a text.
struct TokenizeOptions {
  std::string model;      ///< -m (empty: default model)
  std::string text;       ///< -p
  std::string text_file;  ///< -f: read the text from this file instead (exactly one of -p, -f)
  bool text_set = false;  ///< -p was given (its text may be empty)
  bool json = false;
  bool add_special = true;  ///< add BOS/EOS as the model's metadata asks (off: --no-bos)
  bool parse_special = false;
};

/// Prints the ids and pieces (or JSON with --json). Throws snapkv::Error when neither -p nor
/// -f was given, or naming the -f file when it cannot be read.
int tokenize_command(const TokenizeOptions& opt);

/// `snapkv eval`: quality under compression (docs/design.md, "Eval").
struct EvalOptions {
  std::string model;  ///< -m (empty: default model)
  std::string tasks = "ruler";
  std::string lengths = "2K,4K,8K";
  std::string presses;  ///< --presses SPEC,SPEC,... (exclusive with --press-grid)
  /// Not in the default grid (both run by name): h2o scores with every prompt query, so each of
  /// its ratios needs its own prefill per protocol (no fork), which alone would double the
  /// default suite's time; random is a control. Six presses x 3 ratios + none = 19 forks decode
  /// in 3 groups of <= 7 rows (22 would take 4), which keeps the default suite near 40 minutes.
  std::string press_grid = "snapkv,pyramidkv,adakv,streamingllm,tova,knorm";
  std::string ratios = "0.5,0.75,0.9";
  std::string budgets;
  std::string protocol = "both";
  int samples = 1;
  uint64_t seed = 42;
  std::string out;
  int threads = 0;
  bool resume = false;
  std::string depths = "0,10,20,30,40,50,60,70,80,90,100";
  std::string chat = "auto";
  std::string answer_prefix = "on";  ///< --answer-prefix on|off
  int gen_tokens = 0;
  int fidelity_chunk = 64;
  std::string kv_type = "f16";
  std::string kv_type_v;               ///< --kv-type-v ("": kv_type)
  std::string reference_kv_type;       ///< --reference-kv-type: fidelity's full-cache reference ("": kv_type)
  std::string prefill_attn = "exact";  ///< --prefill-attn exact|bf16|int8 (fidelity's reference stays exact)
  std::string cold_tier = "int8";      ///< --cold-tier: the reselect protocol's
  bool no_plots = false;
  bool no_fork = false;
  bool quiet = false;
};

/// Runs the suite into opt.out and draws the pictures; prints the path of index.html.
int eval_command(const EvalOptions& opt);

/// `snapkv chat-template`: the prompt the chat template renders (to check it by eye).
struct ChatTemplateCommandOptions {
  std::string model;        ///< -m (empty: default model)
  std::string prompt;       ///< -p: a user message after the others
  std::string prompt_file;  ///< -f: the same from a file
  bool prompt_set = false;
  ChatFlags chat_flags;
  bool json = false;  ///< JSON: text, token count and ids, template name, template spans
};

/// Prints the rendered prompt (raw bytes, nothing added), or JSON with --json.
int chat_template_command(const ChatTemplateCommandOptions& opt);

}  // namespace snapkv::cli
