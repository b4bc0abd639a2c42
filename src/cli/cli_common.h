// snapkv CLI: helpers shared by the sub-commands.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "snapkv/kv_type.h"
#include "snapkv/prefill_attention.h"

namespace snapkv::cli {

/// The model to use for -m `flag`: an existing path as given; else a model name ("gemma3",
/// "smollm2") or, when `flag` is empty, the default model (gemma3), each resolved to its file in
/// the model cache ($SNAPKV_MODELS or ~/.cache/snapkv/models). Throws snapkv::Error telling how to
/// fetch a missing cached model (scripts/get-model.sh NAME), or naming a missing -m file.
std::string resolve_model_path(const std::string& flag);

/// The KVType a --kv-type value names (`flag`: the flag, for the message). Throws snapkv::Error
/// naming the flag and the accepted values for anything else.
KVType parse_kv_type(const std::string& s, const char* flag = "--kv-type");

/// The values' type of --kv-type-v `s` ("": nullopt, the keys' type), checked against the keys'
/// type `k` (kv_types_combine). Throws snapkv::Error naming both flags.
std::optional<KVType> parse_kv_type_v(const std::string& s, KVType k);

/// Throws snapkv::Error naming --kv-type (and --kv-type-v when `v` is set) when keys of type `k`
/// and values of type `v` (or `k`) cannot be stored for the model's head_dim (kv_types_problem).
void check_kv_types(KVType k, std::optional<KVType> v, int head_dim);

/// The PrefillAttention a --prefill-attn value names (exact, bf16, int8). Throws snapkv::Error naming
/// the flag and the accepted values for anything else. Whether this build runs it is the
/// engine's check (Engine::load).
PrefillAttention parse_prefill_attention(const std::string& s);

/// Whole file as bytes. Throws snapkv::Error naming the file on failure.
std::string read_text_file(const std::string& path);

/// Writes `bytes` to stdout and flushes (text streams as it is generated). Returns false once
/// stdout has failed (reader gone, disk full); stdout_error() then tells why.
bool write_stdout(std::string_view bytes);

/// errno of the first failed write or flush of stdout, flushing what is still buffered; 0 if
/// all output went out.
int stdout_error();

/// Peak resident set size of this process in bytes (getrusage ru_maxrss).
size_t peak_rss_bytes();

/// True if stderr is a terminal (progress bars only then).
bool stderr_is_tty();

/// Draws "prefill [#####-----] 12/18 layers" on stderr (\r, no newline until done).
void draw_progress(const char* what, int done, int total);

}  // namespace snapkv::cli
