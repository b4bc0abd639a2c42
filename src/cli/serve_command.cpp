// snapkv CLI: `snapkv serve` — flags to ServerOptions, then the server (src/server/server.h).
#include <fmt/format.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "core/thread_context.h"
#include "server/server.h"
#include "snapkv/cold_tier.h"
#include "snapkv/error.h"

namespace snapkv::cli {

int serve_command(const ServeOptions& o) {
  server::ServerOptions so;
  so.defaults.press = press_from_flags(o.press);  // checked before the model is loaded
  validate_press_spec(so.defaults.press);
  so.model_path = resolve_model_path(o.model);
  so.host = o.host;
  so.port = o.port;
  so.n_threads = o.threads > 0 ? o.threads : available_cores();
  so.api_key = o.api_key;
  so.metrics = o.metrics;
  so.max_body_bytes = static_cast<size_t>(o.max_body);
  so.shutdown_grace_s = o.shutdown_grace;
  so.http_threads = o.http_threads;
  so.read_timeout_s = o.read_timeout;
  so.defaults.max_tokens = o.n_predict;
  so.defaults.sampling = {.temp = o.temp, .top_k = o.top_k, .top_p = o.top_p, .seed = 0};
  server::SchedulerOptions& sc = so.scheduler;
  try {
    sc.kv_budget_bytes = server::parse_byte_size(o.kv_memory_budget);
  } catch (const Error& e) {
    throw Error(fmt::format("--kv-memory-budget: {}", e.what()));
  }
  sc.max_queue = static_cast<size_t>(o.max_queue);
  sc.max_batch_rows = o.max_batch_rows;
  sc.max_running = o.max_running;
  if (sc.max_running >= sc.max_batch_rows)
    throw Error(fmt::format("--max-running {} must be below --max-batch-rows {}", sc.max_running, sc.max_batch_rows));
  sc.prefill_rows_per_step = o.prefill_rows;
  sc.n_ctx = o.n_ctx;
  sc.kv_type = parse_kv_type(o.kv_type);
  sc.kv_type_v = parse_kv_type_v(o.kv_type_v, sc.kv_type);
  so.prefill_attention = parse_prefill_attention(o.prefill_attn);
  sc.n_threads = so.n_threads;
  sc.debug_step_delay_ms = o.debug_step_delay_ms;
  try {
    sc.session_budget_bytes = server::parse_byte_size(o.session_budget);
  } catch (const Error& e) {
    throw Error(fmt::format("--session-budget: {}", e.what()));
  }
  sc.session_cold_tier = parse_cold_tier(o.session_cold_tier);
  try {
    check_cold_tier_dir(sc.session_cold_tier);  // at start-up, not at the first session request
  } catch (const Error& e) {
    throw Error(fmt::format("--session-cold-tier: {}", e.what()));
  }
  return server::run_server(so);
}

}  // namespace snapkv::cli
