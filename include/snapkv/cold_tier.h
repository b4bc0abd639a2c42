// snapkv: cold tier settings (issue 10). A sequence with a cold tier keeps, for every layer its
// press compresses, a copy of all the prompt's keys and values in a cheaper format (RAM or a
// file), so that a follow-up question can re-select which prompt entries are hot
// (PrefillOptions::reselect; docs/follow-up.md).
#pragma once

#include <cstddef>
#include <string>

#include "snapkv/error.h"

namespace snapkv {

/// Thrown when a cold tier on disk cannot create, write or map its file (a missing or read-only
/// directory, a full disk): a fault of the place the rows go to, not of the input, so a server
/// answers it as its own error and a session load does not call the file it reads damaged.
class ColdTierIOError : public Error {
 public:
  using Error::Error;
};

/// Element format of the cold tier. Int8: symmetric per-row absmax quantization (scale =
/// max|x| / 127 in f32; error <= max|x| / 254 per element; a row with inf or NaN decodes as NaN,
/// one with max|x| < 127 FLT_MIN as zeros), head_dim + 4 bytes per row. F16: IEEE half, 2
/// head_dim bytes per row (exact for an F16 KV cache).
enum class ColdFormat { Int8, F16 };

/// Where and how a sequence keeps its cold tier.
struct ColdTierOptions {
  bool enabled = false;
  ColdFormat format = ColdFormat::Int8;
  /// Empty: RAM. Otherwise a directory: the store writes its rows to a new file there (created
  /// with a unique name and unlinked at once, so nothing is left behind) and reads them back
  /// through a read-only memory mapping, so cold bytes are page cache, not the process's
  /// anonymous memory.
  std::string dir;
};

/// Parses "int8", "f16" or "disk:DIR" (int8 rows in a file under the directory DIR). Throws
/// snapkv::Error naming the value otherwise (the directory is checked when a sequence with this
/// cold tier starts its prefill, or by check_cold_tier_dir).
ColdTierOptions parse_cold_tier(const std::string& value);
/// Checks that a cold tier on disk can create its file in o.dir (creates one and removes it at
/// once); nothing for a cold tier in RAM. Throws ColdTierIOError naming the directory and why.
void check_cold_tier_dir(const ColdTierOptions& o);
/// A name for reports: "off", "int8", "f16", "disk:DIR" (int8 on disk; parse_cold_tier's syntax),
/// "f16,disk:DIR" (f16 on disk, settable only through the struct).
std::string cold_tier_name(const ColdTierOptions& o);
/// Bytes of one stored row of head_dim elements (K or V): Int8 head_dim + 4, F16 2 head_dim.
size_t cold_row_bytes(ColdFormat format, int head_dim);

}  // namespace snapkv
