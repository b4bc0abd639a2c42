// snapkv eval: the natural text every Debian machine has (the licence texts under
// /usr/share/common-licenses), used as RULER uses Paul Graham's essays (the haystack of
// niah_single_2/3, niah_multikey_1, niah_multivalue, niah_multiquery and the depth grid) and as
// the real document of the fidelity measure; plus a sentence splitter.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace snapkv::eval {

struct TextSource {
  std::string dir;                  ///< where the files were read
  std::vector<std::string> files;   ///< file names, sorted (regular files only; symlinks skipped)
  std::string raw;                  ///< the files concatenated, each followed by "\n\n" (fidelity)
  std::vector<size_t> file_starts;  ///< byte offset of each file in `raw`
  std::string collapsed;            ///< `raw` with every whitespace run turned into one space, trimmed (haystack)
  std::vector<size_t> word_starts;  ///< byte offsets of the words of `collapsed`
  std::string sha256;               ///< of `raw`
};

/// Reads every regular file of `dir` (not symlinks, not subdirectories), sorted by name. Throws
/// snapkv::Error when the directory cannot be read or holds less than `min_bytes`.
TextSource load_text_source(const std::string& dir, size_t min_bytes = 64 * 1024);

/// The natural text: $SNAPKV_EVAL_TEXT_DIR or /usr/share/common-licenses, loaded once.
const TextSource& natural_text();

/// Byte offsets where sentences of `text` start (0 first): after '.', '!' or '?' (and any closing
/// quotes or brackets) followed by a space and then an upper-case letter, a digit, a quote or an
/// opening bracket, unless the word before the stop is an abbreviation (a single letter, "e.g",
/// "i.e", "etc", "Inc", "Mr", "Dr", "No", "vs", "Ltd", "Co"). Never returns text.size().
std::vector<size_t> sentence_starts(std::string_view text);

/// Lower-case words of `text` (runs of ASCII letters), distinct and sorted.
std::vector<std::string> distinct_words(std::string_view text);

}  // namespace snapkv::eval
