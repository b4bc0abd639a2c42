// snapkv CLI: strict flag-value checks (CLI11 validators) and safe printing of error text.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace snapkv::cli {

/// Accepts a decimal integer (optional leading '-') in [lo, hi], nothing else: no hex, no
/// trailing text, no silent clamping of out-of-range values. The error (printed by CLI11 as
/// "--flag: ...") reads "must be an integer in [lo, hi], got 'VALUE'".
CLI::Validator int_in(int64_t lo, int64_t hi);

/// Accepts a decimal unsigned 64-bit integer (the whole of [0, 2^64-1]); rejects negative,
/// overflowing or non-numeric values instead of wrapping or clamping them.
CLI::Validator uint64_any();

/// Accepts a finite decimal floating-point number in [lo, hi] (lo_open / hi_open: excludes that
/// end). Rejects nan, inf and trailing text. Error: "must be a number in [lo, hi], got 'VALUE'".
CLI::Validator real_in(double lo, double hi, bool lo_open = false, bool hi_open = false);

/// Accepts exactly one of `names` (case-sensitive). Error: "must be one of a|b|c, got 'VALUE'".
CLI::Validator one_of(const std::vector<std::string>& names);

/// one_of the KV cache element types snapkv::kv_type_from_name accepts: f16, f32, q8_0, q4_0.
CLI::Validator kv_type_arg();

/// one_of the prefill attention arithmetics snapkv::prefill_attention_from_name accepts: exact, bf16,
/// int8.
CLI::Validator prefill_attention_arg();

/// Accepts a press name (press_names()) or a whole press spec "name:key=value,..." that
/// validate_press_spec() accepts; the error names the bad name, key or value.
CLI::Validator press_arg();

/// Rejects the empty string: "must not be empty (WHAT)".
CLI::Validator non_empty(const std::string& what);

/// `text` made safe for a one-line terminal message: bytes that are not valid UTF-8, control
/// characters (newlines included) and DEL are written as \xNN, so an error naming a value read
/// from a hostile file cannot break the line or emit terminal escape sequences.
std::string printable(std::string_view text);

}  // namespace snapkv::cli
