// snapkv: saved sessions (issue 10; prompt caching) — a prefilled, compressed sequence written to
// a file and restored later, so that new questions about a long document need no second read of
// it. What a file holds (docs/follow-up.md, "Saved sessions"): the model's SHA-256, the KV element
// type, positions held, the hot KV cache as stored (every (layer, KV head) entry: position, K
// row, V row, bit for bit), the cold tier's encoded rows (int8 or f16, as stored: nothing is
// re-quantized), the press statistics (press spec, budget, window, prompt tokens), the last
// prefill's logits, opaque application data, and a SHA-256 of everything before it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace snapkv {

class Engine;
class Sequence;

/// Settings of load_session.
struct SessionLoadOptions {
  /// Where the restored cold tier lives: "" = RAM, else a directory for its file (as
  /// ColdTierOptions::dir, "disk:DIR"). Its format (int8 or f16) is the saved one.
  std::string cold_dir;
  /// Positions the restored sequence may hold; 0 = the saved sequence's n_ctx. Must be >= the
  /// positions it holds.
  int64_t n_ctx = 0;
};

/// A restored session: the sequence and the application data saved with it.
struct LoadedSession {
  std::unique_ptr<Sequence> sequence;
  std::string app_data;
};

/// Writes `seq` (not prefilling) to `path`. `app_data`: bytes the caller wants back from
/// load_session (the CLI keeps the prompt rendering there). The file is written next to `path`
/// under a temporary name, flushed and renamed over `path`, so an existing file is replaced only
/// by a complete one; the file is readable by its owner only (mode 0600: it holds the document's
/// keys and values). The loader maps the file: do not truncate it while a load runs. Not saved: the kept-positions log
/// and retained window queries (a restored sequence cannot be compress()ed). Size: the hot KV bytes + 4 B per entry +
/// the cold bytes + n_vocab x 4 B of logits + a small JSON header. Format version 1, or 2 when the values' KV type
/// differs from the keys' (SequenceOptions::kv_type_v; builds that read only version 1 refuse such files with a
/// clear error). Throws snapkv::Error for a sequence with a pending
/// prefill or of another engine's model, a path check_session_target refuses, or a file that
/// cannot be written (naming it and why).
void save_session(const Engine& engine, const Sequence& seq, const std::string& path, std::string_view app_data = {});

/// The checks save_session makes before it writes, without writing: `path` is not empty, not a
/// symbolic link (the rename would replace the link), not an existing non-regular file (a
/// directory, a device such as /dev/null, a FIFO), not the engine's model file, and a file can be
/// created in its directory (one is created and removed at once). For callers that save after
/// long work (the CLI checks --save-session before its prefill). Throws snapkv::Error naming the
/// path and why.
void check_session_target(const Engine& engine, const std::string& path);

/// Restores a session written by save_session with the same model: the sequence equals the saved
/// one (same cache bits, positions, cold rows, statistics), so that the same tokens decode to the
/// same logits. Reads the file through a read-only mapping (costs: one SHA-256 pass over the
/// file plus a copy of its KV bytes; the engine hashes its model once, on the first call).
/// Throws snapkv::Error, naming the file, for: a missing or unreadable file, not a session file,
/// another format version, a damaged file (checksum or structure), a session of another model
/// (its SHA-256 differs from model_sha256()), or bad options; ColdTierIOError, naming the
/// directory, when opt.cold_dir cannot take the cold rows (the file read is not damaged then).
LoadedSession load_session(const Engine& engine, const std::string& path, const SessionLoadOptions& opt = {});

}  // namespace snapkv
