#include "eval/haystack.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/sha256.h"
#include "snapkv/error.h"

namespace snapkv::eval {

namespace fs = std::filesystem;

TextSource load_text_source(const std::string& dir, size_t min_bytes) {
  TextSource t;
  t.dir = dir;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) throw Error(fmt::format("cannot read the text directory '{}': {}", dir, ec.message()));
  for (const auto& e : it) {
    if (e.is_symlink(ec) || !e.is_regular_file(ec)) continue;
    t.files.push_back(e.path().filename().string());
  }
  std::sort(t.files.begin(), t.files.end());
  for (const auto& f : t.files) {
    std::ifstream in(fs::path(dir) / f, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    if (!in && !in.eof()) throw Error(fmt::format("cannot read '{}'", (fs::path(dir) / f).string()));
    t.file_starts.push_back(t.raw.size());
    t.raw += ss.str();
    t.raw += "\n\n";
  }
  if (t.raw.size() < min_bytes)
    throw Error(fmt::format("the text directory '{}' holds {} bytes of text; the eval needs at least {}", dir,
                            t.raw.size(), min_bytes));
  bool space = true;  // collapse whitespace runs, trim both ends
  for (char c : t.raw) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = true;
      continue;
    }
    if (space && !t.collapsed.empty()) t.collapsed += ' ';
    if (space) t.word_starts.push_back(t.collapsed.size());
    space = false;
    t.collapsed += c;
  }
  t.sha256 = sha256_hex(t.raw);
  return t;
}

const TextSource& natural_text() {
  static const TextSource t = [] {
    const char* e = std::getenv("SNAPKV_EVAL_TEXT_DIR");
    return load_text_source(e != nullptr && *e != '\0' ? e : "/usr/share/common-licenses");
  }();
  return t;
}

namespace {

bool is_abbreviation(std::string_view word) {
  while (!word.empty() && (word.front() == '(' || word.front() == '"' || word.front() == '\'')) word.remove_prefix(1);
  if (word.size() == 1 && std::isalpha(static_cast<unsigned char>(word[0]))) return true;
  for (const char* a : {"e.g", "i.e", "etc", "Inc", "Mr", "Mrs", "Dr", "No", "no", "vs", "Ltd", "Co", "U.S", "cf"})
    if (word == a) return true;
  return false;
}

}  // namespace

std::vector<size_t> sentence_starts(std::string_view text) {
  std::vector<size_t> starts = {0};
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c != '.' && c != '!' && c != '?') continue;
    size_t j = i + 1;
    while (j < text.size() && (text[j] == '"' || text[j] == '\'' || text[j] == ')' || text[j] == ']')) ++j;
    if (j >= text.size() || text[j] != ' ') continue;
    const size_t k = j + 1;
    if (k >= text.size()) continue;
    const auto n = static_cast<unsigned char>(text[k]);
    if (!(std::isupper(n) || std::isdigit(n) || n == '"' || n == '\'' || n == '(' || n == '[')) continue;
    size_t w = i;  // the word before the stop
    while (w > 0 && text[w - 1] != ' ') --w;
    if (c == '.' && is_abbreviation(text.substr(w, i - w))) continue;
    starts.push_back(k);
    i = k - 1;
  }
  return starts;
}

std::vector<std::string> distinct_words(std::string_view text) {
  std::vector<std::string> w;
  std::string cur;
  for (size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ' ';
    if (std::isalpha(static_cast<unsigned char>(c)) && static_cast<unsigned char>(c) < 128) {
      cur += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!cur.empty()) {
      w.push_back(cur);
      cur.clear();
    }
  }
  std::sort(w.begin(), w.end());
  w.erase(std::unique(w.begin(), w.end()), w.end());
  return w;
}

}  // namespace snapkv::eval
