#include "cli/cli_common.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "snapkv/error.h"

namespace snapkv::cli {

namespace fs = std::filesystem;

namespace {

struct NamedModel {
  const char* name;  // what -m accepts
  const char* file;  // its file in the model cache (scripts/get-model.sh NAME puts it there)
};

// The first one is the default model.
constexpr NamedModel kNamedModels[] = {
    {"gemma3", "gemma-3-270m-q4_k_m.gguf"},
    {"smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"},
};

fs::path model_cache_dir() {
  if (const char* e = std::getenv("SNAPKV_MODELS")) return e;
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : ".") / ".cache" / "snapkv" / "models";
}

std::string known_names() {
  std::string s;
  for (const NamedModel& m : kNamedModels) s += std::string(s.empty() ? "" : ", ") + m.name;
  return s;
}

}  // namespace

KVType parse_kv_type(const std::string& s, const char* flag) {
  if (const std::optional<KVType> t = kv_type_from_name(s)) return *t;
  throw Error(fmt::format("{} must be f16, f32, q8_0 or q4_0, got '{}'", flag, s));
}

std::optional<KVType> parse_kv_type_v(const std::string& s, KVType k) {
  if (s.empty()) return std::nullopt;
  const KVType v = parse_kv_type(s, "--kv-type-v");
  if (!kv_types_combine(k, v))
    throw Error(
        fmt::format("--kv-type {} with --kv-type-v {}: mixed key / value types must both be quantized (q8_0 / "
                    "q4_0)",
                    kv_type_name(k), kv_type_name(v)));
  return v;
}

void check_kv_types(KVType k, std::optional<KVType> v, int head_dim) {
  if (const std::string why = kv_types_problem(k, v.value_or(k), head_dim); !why.empty())
    throw Error(v ? fmt::format("--kv-type {} / --kv-type-v {}: {}", kv_type_name(k), kv_type_name(*v), why)
                  : fmt::format("--kv-type {}: {}", kv_type_name(k), why));
}

PrefillAttention parse_prefill_attention(const std::string& s) {
  if (const std::optional<PrefillAttention> a = prefill_attention_from_name(s)) return *a;
  throw Error(fmt::format("--prefill-attn must be exact, bf16 or int8, got '{}'", s));
}

std::string resolve_model_path(const std::string& flag) {
  // A path that exists wins over a name (a file called "smollm2" in the working directory); when
  // such a file is no GGUF file, the error says that it hid the cached model.
  if (!flag.empty() && fs::exists(flag)) {
    for (const NamedModel& m : kNamedModels) {
      if (flag != m.name) continue;
      char magic[4] = {};
      std::ifstream in(flag, std::ios::binary);
      if (!in.read(magic, sizeof(magic)) || std::string_view(magic, sizeof(magic)) != "GGUF")
        throw Error(
            fmt::format("-m {}: '{}' in the working directory is not a GGUF file and hides the cached model "
                        "{} (a path that exists wins over a model name); rename it, or pass the cached "
                        "model's path",
                        flag, flag, m.name));
    }
    return flag;
  }
  const NamedModel* named = flag.empty() ? &kNamedModels[0] : nullptr;
  for (const NamedModel& m : kNamedModels) {
    if (flag == m.name) named = &m;
  }
  if (named == nullptr) {
    throw Error(
        fmt::format("model file '{}' does not exist (-m takes a GGUF file or a model name: {})", flag, known_names()));
  }
  const fs::path p = model_cache_dir() / named->file;
  if (fs::exists(p)) return p.string();
  if (flag.empty()) {
    throw Error(
        fmt::format("no -m given and the default model {} is missing; fetch it with scripts/get-model.sh "
                    "(or pass -m MODEL.gguf)",
                    p.string()));
  }
  throw Error(fmt::format("model '{}' is not in the model cache ({} is missing); fetch it with scripts/get-model.sh {}",
                          flag, p.string(), named->name));
}

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw Error(fmt::format("prompt file '{}' does not exist or is not a file (-f)", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot open prompt file '{}' (-f)", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("error reading prompt file '{}' (-f)", path));
  return ss.str();
}

namespace {
int g_stdout_errno = 0;  // first stdout failure
}  // namespace

bool write_stdout(std::string_view bytes) {
  if (g_stdout_errno != 0) return false;
  errno = 0;
  if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() || std::fflush(stdout) != 0) {
    g_stdout_errno = errno != 0 ? errno : EIO;
    return false;
  }
  return true;
}

int stdout_error() {
  if (g_stdout_errno == 0) {
    errno = 0;
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) g_stdout_errno = errno != 0 ? errno : EIO;
  }
  return g_stdout_errno;
}

size_t peak_rss_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<size_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

bool stderr_is_tty() { return isatty(STDERR_FILENO) == 1; }

void draw_progress(const char* what, int done, int total) {
  const int width = 30;
  const int filled = total > 0 ? done * width / total : width;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '-');
  fmt::print(stderr, "\r{} [{}] {}/{} layers", what, bar, done, total);
  if (done >= total) fmt::print(stderr, "\r{:<{}}\r", "", width + 40);
  std::fflush(stderr);
}

}  // namespace snapkv::cli
