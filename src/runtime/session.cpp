// snapkv runtime: saved sessions (snapkv/session.h; docs/follow-up.md, "Saved sessions").
//
// File layout (little-endian; version 1):
//   "SNAPKVSS"                     8 bytes, magic
//   u32 version, u32 0             format version, reserved
//   u64 header_bytes               then the header: UTF-8 JSON text (model identity, shapes,
//                                  stats, per-head entry counts, cold tier and its layers, logits
//                                  count, app data size); at most kMaxHeaderBytes
//   payload                        the app data bytes; per layer, per KV head: positions [n] i32, K [n x row], V
//                                  [n x row] (the hot cache's element type, as stored); then per
//                                  cold layer its encoded rows (ColdStore::encoded_layer); then
//                                  the logits [n_vocab] f32 if any
//   SHA-256 of all bytes above     32 bytes
#include "snapkv/session.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "chat/bounded_json.h"
#include "core/sha256.h"
#include "kv/presses/press.h"
#include "runtime/sequence_state.h"
#include "snapkv/cold_tier.h"
#include "snapkv/engine.h"
#include "snapkv/error.h"
#include "snapkv/sequence.h"

namespace snapkv {
namespace {

constexpr char kMagic[8] = {'S', 'N', 'A', 'P', 'K', 'V', 'S', 'S'};
// Version 2: values may be stored in another type than keys (header "kv_type_v"); written only
// for such sessions, so that builds that read version 1 still read every same-type session.
constexpr uint32_t kVersion = 1;
constexpr uint32_t kVersionMixedKV = 2;
constexpr size_t kPrefixBytes = 8 + 4 + 4 + 8;
constexpr size_t kDigestBytes = 32;
// A header is ~1.5 KB for SmolLM2 and grows with layers x KV heads (tens of KB for the largest
// models); nlohmann's DOM takes up to ~80x its text, so the bound is what a load may cost.
constexpr uint64_t kMaxHeaderBytes = uint64_t{4} << 20;
// The header nests 4 deep and its objects hold < 30 keys; a crafted one of nested brackets cost
// the parser ~80 bytes a level, so both are bounded before the parse (chat::parse_bounded_json).
constexpr int kMaxHeaderDepth = 32;
constexpr size_t kMaxHeaderKeys = 1000;

/// The temporary file a save writes before renaming it over the path: in the path's directory,
/// under a name of its own (not the target's: a 255-byte target name leaves no room for more).
std::string temp_name(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : std::string(".");
  return dir + "/.snapkv-session-XXXXXX";
}

/// What save_session refuses to replace: an empty path, a symbolic link (the rename would replace
/// the link, not the file it names), anything but a regular file (a directory, a device such as
/// /dev/null, a FIFO, a socket), and the engine's own model file.
void check_target_kind(const std::string& path, const std::string& model_path) {
  if (path.empty()) throw Error("session file: the path is empty");
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return;  // a new file (a missing directory fails at create)
    throw Error(fmt::format("session file '{}': cannot check it: {}", path, std::strerror(errno)));
  }
  if (S_ISLNK(st.st_mode))
    throw Error(
        fmt::format("session file '{}' is a symbolic link: a save would replace the link, not the file it "
                    "names; give that file's path",
                    path));
  if (!S_ISREG(st.st_mode))
    throw Error(fmt::format("session file '{}' exists and is not a regular file ({}): a save would replace it", path,
                            S_ISDIR(st.st_mode)    ? "a directory"
                            : S_ISFIFO(st.st_mode) ? "a FIFO"
                            : S_ISCHR(st.st_mode)  ? "a character device"
                            : S_ISBLK(st.st_mode)  ? "a block device"
                                                   : "a socket or other special file"));
  struct stat ms {};
  if (!model_path.empty() && ::stat(model_path.c_str(), &ms) == 0 && ms.st_dev == st.st_dev && ms.st_ino == st.st_ino)
    throw Error(fmt::format("session file '{}' is the model file: a save would replace the model", path));
}

/// Writes a file through a temporary name in the same directory, hashing everything written.
class SessionWriter {
 public:
  SessionWriter(const std::string& path, const std::string& model_path) : path_(path) {
    check_target_kind(path, model_path);
    tmp_ = temp_name(path);
    fd_ = ::mkostemp(tmp_.data(), O_CLOEXEC);
    if (fd_ < 0) throw Error(fmt::format("session file '{}': cannot create it: {}", path, std::strerror(errno)));
  }
  ~SessionWriter() {
    if (fd_ >= 0) {
      ::close(fd_);
      ::unlink(tmp_.c_str());
    }
  }
  SessionWriter(const SessionWriter&) = delete;
  SessionWriter& operator=(const SessionWriter&) = delete;

  void write(const void* data, size_t n) {
    hash_.update(data, n);
    raw(data, n);
  }
  /// Appends the checksum, flushes, and renames the file over the destination.
  void commit() {
    const auto d = hash_.digest();
    raw(d.data(), d.size());
    if (::fsync(fd_) != 0) fail("cannot flush it");
    if (::close(fd_) != 0) {
      fd_ = -1;
      ::unlink(tmp_.c_str());
      fail("cannot close it");
    }
    fd_ = -1;
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
      const int e = errno;
      ::unlink(tmp_.c_str());
      throw Error(
          fmt::format("session file '{}': cannot rename the written file over it: {}", path_, std::strerror(e)));
    }
    // The rename itself reaches the disk with the directory (best effort: not every file system
    // can sync a directory).
    const std::filesystem::path p(path_);
    const std::string dir = p.has_parent_path() ? p.parent_path().string() : std::string(".");
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      (void)::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw Error(fmt::format("session file '{}': {}: {}", path_, what, std::strerror(errno)));
  }
  void raw(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        if (w == 0) errno = ENOSPC;
        fail("cannot write it");
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  }

  std::string path_, tmp_;
  int fd_ = -1;
  Sha256 hash_;
};

/// A read-only mapping of a session file and a bounds-checked cursor over its payload.
class SessionReader {
 public:
  explicit SessionReader(const std::string& path) : path_(path) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever, before the
    // check below could refuse it (regular files ignore the flag).
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw Error(fmt::format("session file '{}': cannot open it: {}", path, std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw Error(fmt::format("session file '{}': not a regular file", path));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ < kPrefixBytes + kDigestBytes) {
      ::close(fd);
      throw Error(fmt::format("session file '{}': {} bytes, too short for a snapkv session", path, size_));
    }
    void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) throw Error(fmt::format("session file '{}': cannot map it: {}", path, std::strerror(errno)));
    base_ = static_cast<const unsigned char*>(m);
  }
  ~SessionReader() {
    if (base_) ::munmap(const_cast<unsigned char*>(base_), size_);
  }
  SessionReader(const SessionReader&) = delete;
  SessionReader& operator=(const SessionReader&) = delete;

  size_t size() const { return size_; }
  const unsigned char* at(size_t off) const { return base_ + off; }
  [[noreturn]] void damaged(const std::string& why) const {
    throw Error(fmt::format("session file '{}' is damaged: {}", path_, why));
  }
  /// The next n bytes of the payload (before the checksum); throws if the file ends first.
  const unsigned char* take(size_t n, const char* what) {
    if (n > size_ - kDigestBytes - pos_)
      damaged(
          fmt::format("{} needs {} bytes at offset {}, the payload ends at {}", what, n, pos_, size_ - kDigestBytes));
    const unsigned char* p = base_ + pos_;
    pos_ += n;
    return p;
  }
  void seek(size_t off) { pos_ = off; }
  size_t pos() const { return pos_; }

 private:
  std::string path_;
  const unsigned char* base_ = nullptr;
  size_t size_ = 0;
  size_t pos_ = 0;
};

nlohmann::json stats_json(const SequenceStats& s) {
  return {{"prefill_ms", s.prefill_ms},
          {"compression_ms", s.compression_ms},
          {"peak_kv_cache_bytes", s.peak_kv_cache_bytes},
          {"press", s.press},
          {"compressed", s.compressed},
          {"budget", s.budget},
          {"compression_note", s.compression_note},
          {"n_prompt_tokens", s.n_prompt_tokens},
          {"window", s.window},
          {"n_reselections", s.n_reselections},
          {"reselect_ms", s.reselect_ms},
          {"reselect_window", s.reselect_window}};
}

/// An integer field in [lo, hi]; throws std::domain_error (reported as damage) otherwise.
int64_t int_in(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)))
    throw std::domain_error(fmt::format("'{}' is not an integer in [{}, {}]", key, lo, hi));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) throw std::domain_error(fmt::format("'{}' = {} is outside [{}, {}]", key, x, lo, hi));
  return x;
}

double number(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number()) throw std::domain_error(fmt::format("'{}' is not a number", key));
  return v.get<double>();
}

constexpr int64_t kMaxCount = int64_t{1} << 40;

void stats_from_json(const nlohmann::json& j, SequenceStats& s, int64_t n_past) {
  s.prefill_ms = number(j, "prefill_ms");
  s.compression_ms = number(j, "compression_ms");
  s.peak_kv_cache_bytes = static_cast<size_t>(int_in(j, "peak_kv_cache_bytes", 0, kMaxCount));
  s.press = j.at("press").get<std::string>();
  s.compressed = j.at("compressed").get<bool>();
  s.budget = int_in(j, "budget", 0, n_past);
  s.compression_note = j.at("compression_note").get<std::string>();
  s.n_prompt_tokens = int_in(j, "n_prompt_tokens", 0, n_past);
  s.window = static_cast<int>(int_in(j, "window", 0, n_past));
  s.n_reselections = static_cast<int>(int_in(j, "n_reselections", 0, 1 << 30));
  s.reselect_ms = number(j, "reselect_ms");
  s.reselect_window = static_cast<int>(int_in(j, "reselect_window", 0, n_past));
}

}  // namespace

void check_session_target(const Engine& engine, const std::string& path) {
  check_target_kind(path, engine.info().path);
  std::string tmp = temp_name(path);
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("session file '{}': cannot create it: {}", path, std::strerror(errno)));
  ::unlink(tmp.c_str());
  ::close(fd);
}

void save_session(const Engine& engine, const Sequence& seq, const std::string& path, std::string_view app_data) {
  const Sequence::State& st = seq.state();
  if (st.job) throw Error("save_session: the sequence has a pending prefill");
  if (st.model.get() != &engine.model()) throw Error("save_session: the sequence belongs to another engine's model");
  const ModelInfo& mi = engine.info();
  const KVCache& cache = st.cache;

  nlohmann::json heads = nlohmann::json::array();
  for (int il = 0; il < cache.n_layer(); ++il) {
    nlohmann::json row = nlohmann::json::array();
    for (const KVHeadCache& h : cache.layer(il).heads) row.push_back(h.size());
    heads.push_back(std::move(row));
  }
  // The cold tier's settings are saved even when nothing went cold (a prompt the press kept
  // whole): the restored sequence re-selects (plainly) as the saved one would.
  nlohmann::json cold = nullptr;
  if (st.opt.cold_tier.enabled) {
    nlohmann::json layers = nlohmann::json::array();
    if (st.cold)
      for (int il = 0; il < st.cold->n_layer(); ++il)
        if (st.cold->has_layer(il)) layers.push_back({il, st.cold->n_tokens(il)});
    cold = {{"format", st.opt.cold_tier.format == ColdFormat::F16 ? "f16" : "int8"}, {"layers", layers}};
  }
  const nlohmann::json header = {{"format", "snapkv-session"},
                                 {"model",
                                  {{"sha256", engine.model_sha256()},
                                   {"arch", mi.arch},
                                   {"name", mi.name},
                                   {"n_layer", mi.n_layer},
                                   {"n_head_kv", mi.n_head_kv},
                                   {"head_dim", mi.head_dim},
                                   {"n_vocab", mi.n_vocab},
                                   {"layer_window", mi.layer_window}}},
                                 {"kv_type", kv_type_name(cache.k_type())},
                                 {"kv_type_v", kv_type_name(cache.v_type())},
                                 {"n_ctx", st.n_ctx},
                                 {"n_past", st.n_past},
                                 {"compressed_once", st.compressed_once},
                                 {"stats", stats_json(st.stats)},
                                 {"heads", heads},
                                 {"cold", cold},
                                 {"n_logits", st.last_logits.size()},
                                 {"app_data_bytes", app_data.size()}};
  const std::string hb = header.dump();
  if (hb.size() > kMaxHeaderBytes) throw Error("save_session: the session header is too large");

  SessionWriter w(path, engine.info().path);
  w.write(kMagic, sizeof(kMagic));
  const uint32_t ver[2] = {cache.k_type() == cache.v_type() ? kVersion : kVersionMixedKV, 0};
  w.write(ver, sizeof(ver));
  const uint64_t hn = hb.size();
  w.write(&hn, sizeof(hn));
  w.write(hb.data(), hb.size());
  w.write(app_data.data(), app_data.size());
  for (int il = 0; il < cache.n_layer(); ++il)
    for (const KVHeadCache& h : cache.layer(il).heads) {
      const auto n = static_cast<size_t>(h.size());
      w.write(h.pos_data(), n * sizeof(int32_t));
      w.write(h.k_data(), n * h.k_row_bytes());
      w.write(h.v_data(), n * h.v_row_bytes());
    }
  if (st.cold)
    for (int il = 0; il < st.cold->n_layer(); ++il)
      if (st.cold->has_layer(il)) {
        const auto b = st.cold->encoded_layer(il);
        w.write(b.data(), b.size());
      }
  w.write(st.last_logits.data(), st.last_logits.size() * sizeof(float));
  w.commit();
}

LoadedSession load_session(const Engine& engine, const std::string& path, const SessionLoadOptions& opt) {
  SessionReader r(path);
  if (std::memcmp(r.at(0), kMagic, sizeof(kMagic)) != 0)
    throw Error(fmt::format("session file '{}': not a snapkv session (bad magic)", path));
  uint32_t ver = 0;
  std::memcpy(&ver, r.at(8), sizeof(ver));
  if (ver != kVersion && ver != kVersionMixedKV)
    throw Error(fmt::format("session file '{}': format version {}, this build reads versions {} and {}", path, ver,
                            kVersion, kVersionMixedKV));
  {
    Sha256 h;
    h.update(r.at(0), r.size() - kDigestBytes);
    const auto d = h.digest();
    if (std::memcmp(d.data(), r.at(r.size() - kDigestBytes), kDigestBytes) != 0)
      r.damaged("checksum mismatch (the file was changed or cut short)");
  }
  uint64_t hn = 0;
  std::memcpy(&hn, r.at(16), sizeof(hn));
  if (hn > kMaxHeaderBytes) r.damaged(fmt::format("a header of {} bytes", hn));
  r.seek(kPrefixBytes);
  const unsigned char* hp = r.take(static_cast<size_t>(hn), "the header");
  nlohmann::json hd;
  try {
    hd = chat::parse_bounded_json(std::string_view(reinterpret_cast<const char*>(hp), static_cast<size_t>(hn)),
                                  kMaxHeaderDepth, kMaxHeaderKeys, "the header");
  } catch (const Error& e) {
    r.damaged(e.what());  // "the header is not valid JSON ...", "... nests deeper than 32 levels"
  }
  if (!hd.is_object()) r.damaged("unreadable header");

  const ModelInfo& mi = engine.info();
  try {
    if (hd.at("format") != "snapkv-session") r.damaged("header format is not snapkv-session");
    const auto& m = hd.at("model");
    const std::string sha = m.at("sha256").get<std::string>();
    if (sha != engine.model_sha256())
      throw Error(
          fmt::format("session file '{}' was saved with another model ({} '{}', sha256 {}); this engine has "
                      "{} '{}', sha256 {}",
                      path, m.at("arch").get<std::string>(), m.at("name").get<std::string>(), sha, mi.arch, mi.name,
                      engine.model_sha256()));
    if (m.at("n_layer") != mi.n_layer || m.at("n_head_kv") != mi.n_head_kv || m.at("head_dim") != mi.head_dim ||
        m.at("n_vocab") != mi.n_vocab || m.at("layer_window").get<std::vector<int>>() != mi.layer_window)
      r.damaged("the model shapes in the header differ from the model's");

    const std::string kvt = hd.at("kv_type").get<std::string>();
    const std::optional<KVType> kv_type = kv_type_from_name(kvt);
    if (!kv_type || !kv_type_supports(*kv_type, mi.head_dim)) r.damaged(fmt::format("KV type '{}'", kvt));
    // Version 1 files have one type; version 2 name the values' type too.
    if (ver == kVersionMixedKV && !hd.contains("kv_type_v")) r.damaged("format version 2 without kv_type_v");
    const std::string kvt_v = ver == kVersionMixedKV ? hd.at("kv_type_v").get<std::string>() : kvt;
    const std::optional<KVType> kv_type_v = kv_type_from_name(kvt_v);
    if (!kv_type_v) r.damaged(fmt::format("values' KV type '{}'", kvt_v));
    if (const std::string why = kv_types_problem(*kv_type, *kv_type_v, mi.head_dim); !why.empty())
      r.damaged(fmt::format("KV types '{}' (keys) and '{}' (values): {}", kvt, kvt_v, why));
    SequenceOptions so;
    so.kv_type = *kv_type;
    so.kv_type_v = *kv_type_v;
    const int64_t saved_ctx = int_in(hd, "n_ctx", 1, int64_t{1} << 30);
    const int64_t n_past = int_in(hd, "n_past", 0, saved_ctx);
    if (opt.n_ctx < 0 || (opt.n_ctx > 0 && opt.n_ctx < n_past))
      throw Error(
          fmt::format("load_session: context of {} tokens cannot hold the session's {} positions", opt.n_ctx, n_past));
    so.n_ctx = opt.n_ctx > 0 ? opt.n_ctx : saved_ctx;
    const auto& cold = hd.at("cold");
    if (!cold.is_null()) {
      so.cold_tier.enabled = true;
      const std::string f = cold.at("format").get<std::string>();
      if (f != "int8" && f != "f16") r.damaged(fmt::format("cold format '{}'", f));
      so.cold_tier.format = f == "f16" ? ColdFormat::F16 : ColdFormat::Int8;
      so.cold_tier.dir = opt.cold_dir;
    }
    std::unique_ptr<Sequence> seq = engine.new_sequence(so);
    Sequence::State& st = seq->state();
    st.n_past = n_past;
    st.compressed_once = hd.at("compressed_once").get<bool>();
    stats_from_json(hd.at("stats"), st.stats, n_past);
    if (st.stats.press != "none") {
      try {
        (void)make_press(PressSpec::parse(st.stats.press));  // a spec the presses accept, as re-selection reads it
      } catch (const Error& e) {
        r.damaged(fmt::format("press '{}': {}", st.stats.press, e.what()));
      }
    }
    const auto app_n = static_cast<size_t>(int_in(hd, "app_data_bytes", 0, kMaxCount));
    const unsigned char* app_p = r.take(app_n, "the app data");
    std::string app_data(reinterpret_cast<const char*>(app_p), app_n);

    const auto& heads = hd.at("heads");
    if (!heads.is_array() || static_cast<int>(heads.size()) != mi.n_layer) r.damaged("per-layer entry counts");
    const size_t krb = kv_row_bytes(*kv_type, mi.head_dim);
    const size_t vrb = kv_row_bytes(*kv_type_v, mi.head_dim);
    std::vector<int32_t> pos;
    for (int il = 0; il < mi.n_layer; ++il) {
      const auto& row = heads.at(static_cast<size_t>(il));
      if (!row.is_array() || static_cast<int>(row.size()) != mi.n_head_kv) r.damaged("per-head entry counts");
      for (int h = 0; h < mi.n_head_kv; ++h) {
        const nlohmann::json& nj = row.at(static_cast<size_t>(h));
        if (!nj.is_number_integer() || nj.get<int64_t>() < 0 || nj.get<int64_t>() > n_past)
          r.damaged(fmt::format("layer {} head {}: entry count outside [0, {}]", il, h, n_past));
        const int64_t n = nj.get<int64_t>();
        const int win = mi.layer_window[static_cast<size_t>(il)];
        if (win > 0 && n > win + mi.window_slack)
          r.damaged(
              fmt::format("sliding-window layer {} head {} holds {} entries, more than its window {}", il, h, n, win));
        const auto un = static_cast<size_t>(n);
        const unsigned char* pp = r.take(un * sizeof(int32_t), "positions");  // before any allocation
        pos.resize(un);
        if (un > 0) std::memcpy(pos.data(), pp, un * sizeof(int32_t));
        if (n > 0 && pos.back() >= n_past) r.damaged(fmt::format("layer {} head {}: a position >= {}", il, h, n_past));
        const unsigned char* k = r.take(un * krb, "K rows");
        const unsigned char* v = r.take(un * vrb, "V rows");
        try {
          st.cache.layer(il).heads[static_cast<size_t>(h)].assign(n, pos.data(), k, v);
        } catch (const Error& e) {
          r.damaged(fmt::format("layer {} head {}: {}", il, h, e.what()));
        }
      }
    }
    const nlohmann::json cold_layers = cold.is_null() ? nlohmann::json::array() : cold.at("layers");
    if (!cold_layers.is_array()) r.damaged("cold layers");
    if (!cold_layers.empty()) {
      if (!st.stats.compressed || st.stats.press == "none")
        r.damaged("cold layers of a prompt that was not compressed");
      st.cold = std::make_shared<ColdStore>(mi.n_layer, mi.n_head_kv, mi.head_dim, so.cold_tier);
      const size_t crb = cold_row_bytes(so.cold_tier.format, mi.head_dim);
      const int64_t L = st.stats.n_prompt_tokens;
      for (const auto& l : cold_layers) {
        if (!l.is_array() || l.size() != 2 || !l[0].is_number_integer() || !l[1].is_number_integer())
          r.damaged("a cold layer record");
        const int64_t il = l[0].get<int64_t>();
        const int64_t n = l[1].get<int64_t>();
        if (il < 0 || il >= mi.n_layer || mi.layer_window[static_cast<size_t>(il)] > 0 || n != L || n < 1)
          r.damaged(fmt::format("cold layer {} of {} rows (the compressed prompt has {} tokens)", il, n, L));
        // Re-selection needs every entry after the prompt hot in a cold layer's heads.
        for (const KVHeadCache& hc : st.cache.layer(static_cast<int>(il)).heads) {
          const auto p = hc.positions();
          const auto after =
              static_cast<int64_t>(p.end() - std::lower_bound(p.begin(), p.end(), static_cast<int32_t>(L)));
          if (after != n_past - L)
            r.damaged(fmt::format("cold layer {}: a head holds {} entries after the prompt, expected {}", il, after,
                                  n_past - L));
        }
        const size_t bytes = static_cast<size_t>(mi.n_head_kv) * 2 * static_cast<size_t>(n) * crb;
        const unsigned char* p = r.take(bytes, "cold rows");
        try {
          st.cold->put_encoded(static_cast<int>(il), n, {p, bytes});
        } catch (const ColdTierIOError&) {
          throw;  // the cold tier's directory failed (a full disk): the file read is not damaged
        } catch (const Error& e) {
          r.damaged(e.what());
        }
      }
    }
    const auto n_logits = static_cast<size_t>(int_in(hd, "n_logits", 0, mi.n_vocab));
    if (n_logits != 0 && n_logits != static_cast<size_t>(mi.n_vocab)) r.damaged("logits count");
    st.last_logits.resize(n_logits);
    const unsigned char* lp = r.take(n_logits * sizeof(float), "logits");
    if (n_logits > 0) std::memcpy(st.last_logits.data(), lp, n_logits * sizeof(float));  // data() may be null
    if (r.pos() != r.size() - kDigestBytes)
      r.damaged(fmt::format("{} bytes after the payload", r.size() - kDigestBytes - r.pos()));
    st.update_stats();
    return {std::move(seq), std::move(app_data)};
  } catch (const nlohmann::json::exception& e) {
    r.damaged(fmt::format("header: {}", e.what()));
  } catch (const std::domain_error& e) {
    r.damaged(fmt::format("header: {}", e.what()));
  }
}

}  // namespace snapkv
