// snapkv: JSON text from users (chat messages, tools lists) parsed with bounds: nesting depth and
// keys per object (ordered_json finds a key by a scan, so an object's insertions are quadratic in
// its keys). Checked by a SAX pass first, then parsed without a callback: nlohmann's callback
// parser scans the enclosing array at the end of every object, quadratic in the array's length
// (600,000 messages did not finish in 70 s).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string_view>

namespace snapkv::chat {

/// `text` parsed, in time linear in its size. Throws snapkv::Error with `what` at the start of
/// the message when the text is not JSON ("WHAT is not valid JSON: ..."), nests deeper than
/// `max_depth` arrays and objects ("WHAT nests deeper than N levels") or holds an object with
/// more than `max_keys` keys ("WHAT has a JSON object with more than N keys").
nlohmann::ordered_json parse_bounded_json(std::string_view text, int max_depth, size_t max_keys, std::string_view what);

}  // namespace snapkv::chat
