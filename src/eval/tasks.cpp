#include "eval/tasks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <numbers>
#include <set>
#include <string>
#include <utility>

#include "eval/haystack.h"
#include "eval/rng.h"
#include "eval/words.h"
#include "snapkv/error.h"

namespace snapkv::eval {

// ---------------------------------------------------------------------------------------------
// Task table

namespace {

enum class Hay { Noise, Essay, Needle };
enum class Kind { Words, Numbers, Uuids };

struct NiahDef {
  Hay hay;
  Kind key, value;
  int num_k, num_v, num_q;
};

const std::map<std::string, NiahDef, std::less<>>& niah_defs() {
  static const std::map<std::string, NiahDef, std::less<>> d = {
      {"niah_single_1", {Hay::Noise, Kind::Words, Kind::Numbers, 1, 1, 1}},
      {"niah_single_2", {Hay::Essay, Kind::Words, Kind::Numbers, 1, 1, 1}},
      {"niah_single_3", {Hay::Essay, Kind::Words, Kind::Uuids, 1, 1, 1}},
      {"niah_multikey_1", {Hay::Essay, Kind::Words, Kind::Numbers, 4, 1, 1}},
      {"niah_multikey_2", {Hay::Needle, Kind::Words, Kind::Numbers, 1, 1, 1}},
      {"niah_multikey_3", {Hay::Needle, Kind::Uuids, Kind::Uuids, 1, 1, 1}},
      {"niah_multivalue", {Hay::Essay, Kind::Words, Kind::Numbers, 1, 4, 1}},
      {"niah_multiquery", {Hay::Essay, Kind::Words, Kind::Numbers, 1, 1, 4}},
      {"niah_followup", {Hay::Essay, Kind::Words, Kind::Numbers, 2, 1, 1}},
  };
  return d;
}

}  // namespace

const std::vector<TaskInfo>& all_tasks() {
  static const std::vector<TaskInfo> t = {
      {"niah_single_1", TaskKind::Niah, 128, "one needle (word key, 7-digit number) in the repeated noise haystack"},
      {"niah_single_2", TaskKind::Niah, 128, "one needle (word key, 7-digit number) in natural text"},
      {"niah_single_3", TaskKind::Niah, 128, "one needle (word key, UUID value) in natural text"},
      {"niah_multikey_1", TaskKind::Niah, 128, "4 needles with different keys in natural text, one asked"},
      {"niah_multikey_2", TaskKind::Niah, 128, "a haystack made of needles (word keys, numbers), one asked"},
      {"niah_multikey_3", TaskKind::Niah, 128, "a haystack made of needles (UUID keys and values), one asked"},
      {"niah_multivalue", TaskKind::Niah, 128, "4 values for one key in natural text, all asked"},
      {"niah_multiquery", TaskKind::Niah, 128, "4 needles in natural text, all 4 keys asked at once"},
      {"vt", TaskKind::VariableTracking, 30, "variable tracking: one chain of 4 hops (5 variables) in noise"},
      {"cwe", TaskKind::CommonWords, 120, "common words: the 10 words repeated 30x among words repeated 3x"},
      {"fwe", TaskKind::FrequentWords, 50, "frequent words: the 3 most frequent 6-letter coded words (Zipf alpha 2)"},
      {"niah_followup", TaskKind::NiahFollowUp, 128,
       "2 needles with different keys in natural text, one asked; the multi-question protocols ask each (issue 10)"},
      {"niah_grid", TaskKind::NiahGrid, 32, "one needle in natural text at a given depth (depth x length grid)"},
      {"fidelity", TaskKind::Fidelity, 256,
       "real text: KL, top-1 agreement and perplexity over 256 teacher-forced tokens"},
  };
  return t;
}

const TaskInfo& task_info(std::string_view name) {
  for (const auto& t : all_tasks())
    if (t.name == name) return t;
  std::string names;
  for (const auto& t : all_tasks()) names += (names.empty() ? "" : ", ") + t.name;
  throw Error(fmt::format("unknown task '{}' (tasks: {})", name, names));
}

std::vector<std::string> ruler_task_names() {
  std::vector<std::string> r;
  for (const auto& t : all_tasks())
    if (t.kind != TaskKind::NiahGrid && t.kind != TaskKind::Fidelity && t.kind != TaskKind::NiahFollowUp)
      r.push_back(t.name);
  return r;
}

std::string sample_id(const SampleRequest& r) {
  std::string id = fmt::format("{}/{}/{}", r.task, r.length, r.index);
  if (r.depth >= 0) {
    // Percent to 0.01 (parse_depths' precision): "d33", "d33.5", "d33.25".
    const int64_t h = std::llround(r.depth * 10000);
    id += h % 100 == 0 ? fmt::format("/d{}", h / 100) : fmt::format("/d{}", fmt::format("{:.2f}", h / 100.0));
    if (h % 100 != 0 && id.back() == '0') id.pop_back();
  }
  return id;
}

// ---------------------------------------------------------------------------------------------
// Helpers

namespace {

// The longest prefix of s[0, c) that does not cut a UTF-8 character.
std::string_view utf8_prefix(std::string_view s, size_t c) {
  c = std::min(c, s.size());
  while (c > 0 && c < s.size() && (static_cast<unsigned char>(s[c]) & 0xC0) == 0x80) --c;
  return s.substr(0, c);
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

std::string format_template(std::string t, const std::vector<std::pair<std::string_view, std::string>>& vars) {
  for (const auto& [k, v] : vars) replace_all(t, k, v);
  return t;
}

// Sizing: the largest prompt of n coarse units that fits `target`, then the first c bytes of the
// pad text to reach it exactly. count(n, c) must be (nearly) increasing in n and in c.
struct Size {
  int64_t n = 0;
  size_t c = 0;
  int64_t tokens = 0;
};

Size size_prompt(const std::function<int64_t(int64_t, size_t)>& count_fn, const std::function<size_t(int64_t)>& pad_len,
                 int64_t min_n, int64_t max_n, int64_t target, bool exact, std::string_view what) {
  std::map<std::pair<int64_t, size_t>, int64_t> memo;
  auto count = [&](int64_t n, size_t c) {
    const auto key = std::make_pair(n, c);
    auto it = memo.find(key);
    if (it != memo.end()) return it->second;
    return memo[key] = count_fn(n, c);
  };
  const int64_t smallest = count(min_n, 0);
  if (smallest > target)
    throw Error(fmt::format("{}: a prompt of {} tokens is too short for this task (its smallest prompt has {} tokens)",
                            what, target, smallest));
  // Bracket the answer near an estimate from the tokens per unit of a small probe (tokenising a
  // prompt far longer than the target is what costs), then bisect: lo fits, hi does not (or is
  // max_n + 1 when max_n fits).
  auto fits = [&](int64_t n) { return count(n, 0) <= target; };
  int64_t lo = min_n, hi = max_n + 1;
  const int64_t probe = std::min(max_n, min_n + 64);
  if (probe > min_n && !fits(probe)) {
    hi = probe;
  } else if (probe > min_n) {
    lo = probe;
    const double rate =
        std::max(1e-3, static_cast<double>(count(probe, 0) - smallest) / static_cast<double>(probe - min_n));
    const auto est =
        std::clamp<int64_t>(min_n + static_cast<int64_t>(static_cast<double>(target - smallest) / rate), lo, max_n);
    int64_t step = std::max<int64_t>(4, est / 64);
    if (fits(est)) {
      lo = est;
      for (int64_t b = est + step;; b += step, step *= 2) {
        if (b >= max_n) {
          (fits(max_n) ? lo : hi) = max_n;
          break;
        }
        if (!fits(b)) {
          hi = b;
          break;
        }
        lo = b;
      }
    } else {
      hi = est;
      for (int64_t b = est - step; b > lo; b -= step, step *= 2) {
        if (fits(b)) {
          lo = b;
          break;
        }
        hi = b;
      }
    }
  }
  while (hi - lo > 1 && lo < max_n) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  if (!exact || count(lo, 0) == target) return {lo, 0, count(lo, 0)};
  for (int64_t back = 0; back < 4 && lo - back >= min_n; ++back) {
    const int64_t m = lo - back;
    const size_t len = pad_len(m);
    if (len == 0 || count(m, len) < target) continue;
    size_t clo = 0, chi = len;  // count(m, clo) < target <= count(m, chi)
    while (chi - clo > 1) {
      const size_t mid = clo + (chi - clo) / 2;
      (count(m, mid) >= target ? chi : clo) = mid;
    }
    if (count(m, chi) == target) return {m, chi, target};
    for (size_t c = chi > 8 ? chi - 8 : 1; c <= std::min(len, chi + 8); ++c)
      if (count(m, c) == target) return {m, c, target};
  }
  throw Error(fmt::format("{}: cannot size the prompt to exactly {} tokens", what, target));
}

std::string random_number(Rng& rng, int digits) {
  int64_t lo = 1;
  for (int i = 1; i < digits; ++i) lo *= 10;
  return std::to_string(rng.range(lo, lo * 10 - 1));
}

std::string random_uuid(Rng& rng) {
  uint64_t hi = rng.next(), lo = rng.next();
  hi = (hi & ~uint64_t{0xF000}) | uint64_t{0x4000};            // version 4
  lo = (lo & ~(uint64_t{0xC} << 60)) | (uint64_t{0x8} << 60);  // RFC 4122 variant
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", hi >> 32, (hi >> 16) & 0xFFFF, hi & 0xFFFF, lo >> 48,
                     lo & 0xFFFFFFFFFFFFull);
}

std::string random_letters(Rng& rng, int k, char base) {
  std::string s;
  for (int i = 0; i < k; ++i) s += static_cast<char>(base + static_cast<char>(rng.below(26)));
  return s;
}

std::string random_of(Rng& rng, Kind k) {
  switch (k) {
    case Kind::Words:
      return rng.choice(key_words());
    case Kind::Numbers:
      return random_number(rng, 7);
    case Kind::Uuids:
      return random_uuid(rng);
  }
  return "";
}

const char* kind_plural(Kind k) { return k == Kind::Numbers ? "numbers" : k == Kind::Uuids ? "uuids" : "words"; }

constexpr std::string_view kNoise =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

// The natural-text haystack: the collapsed licence texts, twice (so long prompts never run out),
// with the start of every word.
struct Essay {
  std::string text;
  std::vector<size_t> word_starts;  // plus text.size() + 1 at the end
};

const Essay& essay() {
  static const Essay e = [] {
    Essay x;
    const TextSource& t = natural_text();
    x.text = t.collapsed + " " + t.collapsed;
    x.word_starts = t.word_starts;
    for (size_t w : t.word_starts) x.word_starts.push_back(w + t.collapsed.size() + 1);
    x.word_starts.push_back(x.text.size() + 1);
    return x;
  }();
  return e;
}

// End of the first n words of the essay (0 for none).
size_t essay_end(int64_t n) {
  const auto& ws = essay().word_starts;
  return n <= 0 ? 0 : ws[static_cast<size_t>(n)] - 1;
}

// `hay` with `needles[i]` inserted at byte offset `at[i]` (ascending, each a sentence start or
// hay.size()), separated by single spaces.
std::string insert_needles(std::string_view hay, const std::vector<size_t>& at, const std::vector<std::string>& needles,
                           std::vector<size_t>* needle_offsets = nullptr) {
  std::string out;
  size_t prev = 0;
  for (size_t i = 0; i < needles.size(); ++i) {
    out += hay.substr(prev, at[i] - prev);
    prev = at[i];
    if (!out.empty() && out.back() != ' ') out += ' ';
    if (needle_offsets) needle_offsets->push_back(out.size());
    out += needles[i];
    if (prev < hay.size()) out += ' ';
  }
  out += hay.substr(prev);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Generator

struct Generator::Impl {
  const PromptFormat* fmt;
  uint64_t run_seed = 0;  // of the current request (the vt example is one per run)
  std::vector<std::string> cwe_vocab;
  std::vector<std::vector<std::string>> file_lines;  // fidelity: each licence file's lines ("\n" kept)

  int64_t count(const TaskText& t) const { return static_cast<int64_t>(fmt->tokenize(t).size()); }

  void finish(Sample& s, const TaskText& t) const {
    s.ids = fmt->tokenize(t);
    auto [c, q] = fmt->render(t);
    s.context_text = std::move(c);
    s.question_text = std::move(q);
  }

  Question question_for(const TaskText& t, std::vector<std::string> expected) const {
    TaskText q = t;
    q.context = "Text.";  // the question's ids do not depend on the context (tokenised on their own)
    return {fmt->tokenize(q).question, std::move(expected), {}};
  }

  void niah(Sample& s, const NiahDef& d, int64_t target, double grid_depth);
  void vt(Sample& s, int64_t target);
  void cwe(Sample& s, int64_t target);
  void fwe(Sample& s, int64_t target);
  void fidelity(Sample& s, int64_t target);
};

Generator::Generator(const PromptFormat& format) : fmt_(&format), impl_(std::make_unique<Impl>()) { impl_->fmt = fmt_; }
Generator::~Generator() = default;

Sample Generator::make(const SampleRequest& r) {
  const TaskInfo& info = task_info(r.task);
  if (r.depth >= 0 && info.kind != TaskKind::NiahGrid)
    throw Error(fmt::format("a needle depth is only for niah_grid, not {}", r.task));
  if (info.kind == TaskKind::NiahGrid && !(r.depth >= 0 && r.depth <= 1))
    throw Error(fmt::format("niah_grid needs a depth in [0, 1], got {}", r.depth));
  if (r.length <= info.gen_tokens)
    throw Error(
        fmt::format("{}: length {} is not longer than the {} tokens it generates", r.task, r.length, info.gen_tokens));
  Sample s;
  s.id = sample_id(r);
  s.task = r.task;
  s.length = r.length;
  s.index = r.index;
  s.seed = derive_seed(r.seed, s.id);
  s.depth = r.depth;
  s.gen_tokens = info.gen_tokens;
  const int64_t target = r.length - info.gen_tokens;
  impl_->run_seed = r.seed;
  switch (info.kind) {
    case TaskKind::Niah:
    case TaskKind::NiahFollowUp:
      impl_->niah(s, niah_defs().find(r.task)->second, target, -1);
      break;
    case TaskKind::NiahGrid:
      impl_->niah(s, {Hay::Essay, Kind::Words, Kind::Numbers, 1, 1, 1}, target, r.depth);
      break;
    case TaskKind::VariableTracking:
      impl_->vt(s, target);
      break;
    case TaskKind::CommonWords:
      impl_->cwe(s, target);
      break;
    case TaskKind::FrequentWords:
      impl_->fwe(s, target);
      break;
    case TaskKind::Fidelity:
      impl_->fidelity(s, target);
      break;
  }
  if (static_cast<int64_t>(s.ids.size()) != target)
    throw Error(fmt::format("{}: sized to {} tokens instead of {}", s.id, s.ids.size(), target));
  if (s.questions.empty()) s.questions.push_back({s.ids.question, s.expected, {}});
  return s;
}

// niah_*: RULER's niah.py. Needles "One of the special magic {numbers|uuids} for {key} is:
// {value}." in a haystack of noise blocks, natural text or other needles.
void Generator::Impl::niah(Sample& s, const NiahDef& d, int64_t target, double grid_depth) {
  Rng rng(s.seed);
  const int num_k = std::max(d.num_k, d.num_q);
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> values;
  std::vector<std::string> all_values;
  while (static_cast<int>(keys.size()) < num_k) {
    std::string k = random_of(rng, d.key);
    if (std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
    keys.push_back(k);
  }
  const std::string tv = kind_plural(d.value);
  std::vector<std::string> needles;
  for (int i = 0; i < num_k; ++i) {
    values.emplace_back();
    while (static_cast<int>(values.back().size()) < d.num_v) {
      std::string v = random_of(rng, d.value);
      if (std::find(all_values.begin(), all_values.end(), v) != all_values.end()) continue;
      all_values.push_back(v);
      values.back().push_back(v);
      needles.push_back(fmt::format("One of the special magic {} for {} is: {}.", tv, keys.back(), v));
    }
  }
  rng.shuffle(needles);
  // Where the needles go, as fractions of the haystack (independent of its size).
  std::vector<double> depth;
  if (grid_depth >= 0) {
    depth.push_back(grid_depth);
  } else if (d.hay == Hay::Essay) {
    // RULER: depths drawn without replacement from round(linspace(0, 100, 40)).
    for (size_t i : rng.sample(40, needles.size()))
      depth.push_back(static_cast<double>(std::lround(static_cast<double>(i) * 100.0 / 39.0)) / 100.0);
  } else {
    for (size_t i = 0; i < needles.size(); ++i) depth.push_back(rng.uniform());
  }
  const std::vector<size_t> queried = rng.sample(static_cast<size_t>(num_k), static_cast<size_t>(d.num_q));
  // Distractor needles (haystack "needle"), drawn lazily from their own stream.
  std::vector<std::string> distractors;
  Rng drng(derive_seed(s.seed, "distractors"));
  auto distractor = [&](int64_t n) -> std::string {  // by value: the list grows under it
    const auto i = static_cast<size_t>(n);
    while (distractors.size() <= i) {
      std::string k = random_of(drng, d.key), v = random_of(drng, d.value);
      if (std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
      if (std::find(all_values.begin(), all_values.end(), v) != all_values.end()) continue;
      distractors.push_back(fmt::format("One of the special magic {} for {} is: {}.", tv, k, v));
    }
    return distractors[i];
  };

  // The template, singular when one value of one key is asked (RULER's replacements).
  auto parts = [&](const std::string& query, bool singular) {
    std::string instr =
        "Some special magic {type_needle_v} are hidden within the following text. Make sure to memorize it. I will "
        "quiz you about the {type_needle_v} afterwards.\n";
    std::string question =
        "\nWhat are all the special magic {type_needle_v} for {query} mentioned in the provided text?";
    std::string prefix = " The special magic {type_needle_v} for {query} mentioned in the provided text are";
    std::string v = tv;
    if (singular) {
      for (std::string* t : {&instr, &question, &prefix}) {
        replace_all(*t, "Some", "A");
        replace_all(*t, "are all", "is");
        replace_all(*t, "are", "is");
        replace_all(*t, "answers", "answer");
      }
      v.pop_back();
    }
    TaskText t;
    t.context = format_template(instr, {{"{type_needle_v}", v}});
    t.question = format_template(question, {{"{type_needle_v}", v}, {"{query}", query}});
    t.answer_prefix = format_template(prefix, {{"{type_needle_v}", v}, {"{query}", query}});
    return t;
  };
  std::vector<std::string> qkeys;
  for (size_t i : queried) qkeys.push_back(keys[i]);
  std::string query = qkeys.back();
  if (qkeys.size() > 1) {
    query.clear();
    for (size_t i = 0; i + 1 < qkeys.size(); ++i) query += qkeys[i] + ", ";
    query += "and " + qkeys.back();
  }
  const TaskText head = parts(query, d.num_q * d.num_v == 1);

  std::vector<size_t> needle_at;  // offsets of the needles in the context (grid: for the depth)
  auto haystack = [&](int64_t n, size_t c, std::vector<size_t>* offsets) -> std::string {
    if (d.hay == Hay::Essay) {
      const std::string_view hay = utf8_prefix(essay().text, essay_end(n) + c);
      const std::vector<size_t> starts = sentence_starts(hay);
      std::vector<size_t> at;
      if (grid_depth >= 0) {
        // The sentence start nearest to the requested share of the haystack's bytes.
        std::vector<size_t> cand = starts;
        cand.push_back(hay.size());
        const double want = grid_depth * static_cast<double>(hay.size());
        size_t best = cand[0];
        for (size_t b : cand)
          if (std::abs(static_cast<double>(b) - want) < std::abs(static_cast<double>(best) - want)) best = b;
        at.push_back(best);
      } else {
        for (double f : depth) {
          const auto i = static_cast<size_t>(static_cast<double>(starts.size()) * f);
          at.push_back(i < starts.size() ? starts[i] : hay.size());
        }
      }
      std::sort(at.begin(), at.end());
      return insert_needles(hay, at, needles, offsets);
    }
    std::vector<std::string> units;
    for (int64_t i = 0; i < n; ++i) units.push_back(d.hay == Hay::Noise ? std::string(kNoise) : distractor(i));
    std::vector<size_t> idx;
    for (double f : depth) idx.push_back(static_cast<size_t>(std::floor(f * static_cast<double>(n))));
    std::sort(idx.rbegin(), idx.rend());  // RULER: inserted at descending indices, in needle order
    for (size_t i = 0; i < idx.size(); ++i)
      units.insert(units.begin() + static_cast<std::ptrdiff_t>(std::min(idx[i], units.size())), needles[i]);
    std::string text;
    for (size_t i = 0; i < units.size(); ++i) text += (i ? "\n" : "") + units[i];
    if (c > 0) {
      const std::string u1 = d.hay == Hay::Noise ? std::string(kNoise) : distractor(n);
      const std::string u2 = d.hay == Hay::Noise ? std::string(kNoise) : distractor(n + 1);
      text += utf8_prefix("\n" + u1 + "\n" + u2, c);
    }
    return text;
  };
  auto build = [&](int64_t n, size_t c) {
    TaskText t = head;
    t.context += haystack(n, c, nullptr);
    return t;
  };
  auto pad_len = [&](int64_t n) -> size_t {
    if (d.hay == Hay::Essay) return essay_end(n + 8) - essay_end(n);
    if (d.hay == Hay::Noise) return 2 * (kNoise.size() + 1);
    const size_t a = distractor(n).size();
    return a + distractor(n + 1).size() + 2;
  };
  const int64_t max_n = d.hay == Hay::Essay ? static_cast<int64_t>(essay().word_starts.size()) - 10 : target;
  const Size sz =
      size_prompt([&](int64_t n, size_t c) { return count(build(n, c)); }, pad_len, 0, max_n, target, true, s.id);
  TaskText t = head;
  const std::string hay = haystack(sz.n, sz.c, &needle_at);
  t.context += hay;
  finish(s, t);
  for (size_t i : queried) s.expected.insert(s.expected.end(), values[i].begin(), values[i].end());
  for (int i = 0; i < num_k; ++i)
    s.questions.push_back(
        question_for(parts(keys[static_cast<size_t>(i)], d.num_v == 1), values[static_cast<size_t>(i)]));
  // The followup protocol: question 0 answered (its expected values), then each other key asked.
  std::string answer0;
  for (const std::string& v : values[0]) answer0 += (answer0.empty() ? "" : ", ") + v;
  TaskText first = parts(keys[0], d.num_v == 1);
  first.context = "Text.";
  // A template that cannot render the follow-up leaves the ids empty: only the followup protocol
  // needs them, and it reports the sample as an error then.
  try {
    for (int i = 1; i < num_k; ++i)
      s.questions[static_cast<size_t>(i)].follow_up =
          fmt->follow_up(first, answer0 + ".", parts(keys[static_cast<size_t>(i)], d.num_v == 1));
  } catch (const Error&) {
    for (Question& q : s.questions) q.follow_up.clear();
  }
  if (grid_depth >= 0) {
    const Tokenizer& tok = fmt->tokenizer();
    const size_t at = needle_at.at(0);
    const auto before = static_cast<double>(tok.encode(hay.substr(0, at), false, false).size());
    const auto after = static_cast<double>(tok.encode(hay.substr(at + needles[0].size()), false, false).size());
    s.depth_actual = before + after > 0 ? before / (before + after) : 0.0;
  }
}

// vt: RULER's variable_tracking.py (one chain, 4 hops: five variables of 5 upper-case letters),
// with its in-context example (3-letter variables, about 500 tokens) as an example turn.
void Generator::Impl::vt(Sample& s, int64_t target) {
  constexpr int kHops = 4;
  const std::string noise = std::string(kNoise) + "\n";
  struct Chain {
    std::vector<std::string> vars;
    std::string value;
    std::vector<std::string> lines;
    std::vector<double> where;
  };
  auto make_chain = [&](Rng& rng, int letters) {
    Chain c;
    while (static_cast<int>(c.vars.size()) < kHops + 1) {
      std::string v = random_letters(rng, letters, 'A');
      if (std::find(c.vars.begin(), c.vars.end(), v) == c.vars.end()) c.vars.push_back(v);
    }
    c.value = std::to_string(rng.range(10000, 99998));
    c.lines.push_back(fmt::format("VAR {} = {}", c.vars[0], c.value));
    for (int j = 0; j < kHops; ++j)
      c.lines.push_back(
          fmt::format("VAR {} = VAR {} ", c.vars[static_cast<size_t>(j) + 1], c.vars[static_cast<size_t>(j)]));
    for (size_t j = 0; j < c.lines.size(); ++j) c.where.push_back(rng.uniform());
    std::sort(c.where.begin(), c.where.end());
    return c;
  };
  auto text_of = [&](const Chain& ch, int64_t n, size_t c) {
    TaskText t;
    std::vector<std::string> items(static_cast<size_t>(n), noise);
    for (size_t j = 0; j < ch.lines.size(); ++j) {
      const auto p = static_cast<size_t>(std::floor(ch.where[j] * static_cast<double>(n)));
      items.insert(items.begin() + static_cast<std::ptrdiff_t>(std::min(p + j, items.size())), ch.lines[j]);
    }
    std::string ctx;
    for (size_t i = 0; i < items.size(); ++i) ctx += (i ? " " : "") + items[i];
    replace_all(ctx, ". \n", ".\n");
    ctx += utf8_prefix(noise + noise, c);
    t.context = "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n" + ctx;
    t.question =
        fmt::format("\nQuestion: Find all variables that are assigned the value {} in the text above.", ch.value);
    t.answer_prefix = fmt::format(
        " Answer: According to the chain(s) of variable assignment in the text above, {} variables are assgined the "
        "value {}, they are: ",
        kHops + 1, ch.value);
    return t;
  };
  // The example: the same for every sample of a run (RULER makes one), sized to <= 470 tokens.
  Rng irng(derive_seed(run_seed, "vt/icl"));
  const Chain icl = make_chain(irng, 3);
  const Tokenizer& tok = fmt->tokenizer();
  auto icl_count = [&](int64_t n, size_t) {
    const TaskText t = text_of(icl, n, 0);
    return static_cast<int64_t>(tok.encode(t.context + t.question + t.answer_prefix, false, false).size());
  };
  const Size isz = size_prompt(
      icl_count, [](int64_t) { return size_t{0}; }, 1, 200, 470, false, "vt example");
  const TaskText ex = text_of(icl, isz.n, 0);
  Shot shot{ex.context + ex.question, ex.answer_prefix.substr(1)};
  for (size_t i = 0; i < icl.vars.size(); ++i) shot.assistant += (i ? " " : "") + icl.vars[i];

  Rng rng(s.seed);
  const Chain ch = make_chain(rng, 5);
  auto build = [&](int64_t n, size_t c) {
    TaskText t = text_of(ch, n, c);
    t.shots = {shot};
    return t;
  };
  const Size sz = size_prompt([&](int64_t n, size_t c) { return count(build(n, c)); },
                              [&](int64_t) { return 2 * noise.size(); }, 1, target, target, true, s.id);
  finish(s, build(sz.n, sz.c));
  s.expected = ch.vars;
}

// cwe: RULER's common_words_extraction.py: a numbered list where 10 words appear freq_cw times
// and the others freq_ucw times (30 / 3 from 4K on, 6 / 1 below), after one example exchange.
void Generator::Impl::cwe(Sample& s, int64_t target) {
  if (cwe_vocab.empty()) cwe_vocab = word_vocabulary(distinct_words(natural_text().collapsed));
  const bool small = s.length < 4096;
  const int freq_cw = small ? 6 : 30, freq_ucw = small ? 1 : 3, num_cw = 10;
  const int ex_words = small ? 20 : 40, ex_cw = small ? 3 : 10, ex_ucw = small ? 1 : 3;
  Rng rng(s.seed);
  std::vector<std::string> perm = cwe_vocab;
  rng.shuffle(perm);
  const auto nv = static_cast<int64_t>(perm.size());
  constexpr int kPadWords = 8;
  auto numbered = [](const std::vector<std::string>& list, size_t first) {
    std::string out;
    for (size_t i = 0; i < list.size(); ++i) out += fmt::format("{}{}. {}", i ? " " : "", first + i + 1, list[i]);
    return out;
  };
  // words[0, num_cw) common, the rest uncommon; the list shuffled by its own stream per size.
  auto list_of = [&](const std::vector<std::string>& words, int cw, int ucw, uint64_t seed) {
    std::vector<std::string> list;
    for (size_t i = 0; i < words.size(); ++i)
      for (int r = 0; r < (static_cast<int>(i) < num_cw ? cw : ucw); ++r) list.push_back(words[i]);
    Rng lr(seed);
    lr.shuffle(list);
    return list;
  };
  auto head = [](std::string ctx) {
    TaskText t;
    t.context =
        "Below is a numbered list of words. In these words, some appear more often than others. Memorize the ones that "
        "appear most often.\n" +
        ctx;
    t.question = "\nQuestion: What are the 10 most common words in the above list?";
    t.answer_prefix = " Answer: The top 10 words that appear most often in the list are:";
    return t;
  };
  // The example: the last ex_words words of the permutation (never in the list itself).
  const std::vector<std::string> ex(perm.end() - ex_words, perm.end());
  const TaskText ext = head(numbered(list_of(ex, ex_cw, ex_ucw, derive_seed(s.seed, "example")), 0));
  Shot shot{ext.context + ext.question,
            ext.answer_prefix.substr(1) + " " + numbered(std::vector<std::string>(ex.begin(), ex.begin() + num_cw), 0)};
  auto build = [&](int64_t n, size_t c) {
    const std::vector<std::string> words(perm.begin(), perm.begin() + n);
    const std::vector<std::string> list = list_of(words, freq_cw, freq_ucw, derive_seed(s.seed, std::to_string(n)));
    std::string ctx = numbered(list, 0);
    if (c > 0) {
      const std::vector<std::string> pad(perm.begin() + n, perm.begin() + n + kPadWords);
      ctx += utf8_prefix(" " + numbered(pad, list.size()), c);
    }
    TaskText t = head(ctx);
    t.shots = {shot};
    return t;
  };
  auto pad_len = [&](int64_t n) {
    const std::vector<std::string> pad(perm.begin() + n, perm.begin() + n + kPadWords);
    return numbered(pad, 100000).size() + 1;
  };
  const int64_t max_n = nv - ex_words - kPadWords;
  const Size sz =
      size_prompt([&](int64_t n, size_t c) { return count(build(n, c)); }, pad_len, num_cw, max_n, target, true, s.id);
  finish(s, build(sz.n, sz.c));
  s.expected.assign(perm.begin(), perm.begin() + num_cw);
}

// fwe: RULER's freq_words_extraction.py: coded words (6 lower-case letters) with Zipf counts
// floor(n k^-alpha / zeta(alpha)), alpha = 2, the most frequent one replaced by "..." (noise); the
// answer is the next three.
void Generator::Impl::fwe(Sample& s, int64_t target) {
  constexpr double kAlpha = 2.0;
  const double zeta = std::numbers::pi * std::numbers::pi / 6.0;  // zeta(2)
  const int64_t vocab_size = std::max<int64_t>(s.length / 50, 8);
  Rng rng(s.seed);
  std::vector<std::string> vocab;
  while (static_cast<int64_t>(vocab.size()) < vocab_size) {
    std::string w = random_letters(rng, 6, 'a');
    if (std::find(vocab.begin(), vocab.end(), w) == vocab.end()) vocab.push_back(w);
  }
  std::sort(vocab.begin(), vocab.end());
  rng.shuffle(vocab);
  vocab[0] = "...";
  std::vector<std::string> pad_words;  // coded words outside the vocabulary
  while (pad_words.size() < 12) {
    std::string w = random_letters(rng, 6, 'a');
    if (std::find(vocab.begin(), vocab.end(), w) == vocab.end()) pad_words.push_back(w);
  }
  std::string pad;
  for (const auto& w : pad_words) pad += " " + w;
  auto build = [&](int64_t n, size_t c) {
    std::vector<std::string> words;
    for (int64_t k = 1; k <= vocab_size; ++k) {
      const auto cnt = static_cast<int64_t>(static_cast<double>(n) * std::pow(static_cast<double>(k), -kAlpha) / zeta);
      for (int64_t r = 0; r < cnt; ++r) words.push_back(vocab[static_cast<size_t>(k - 1)]);
    }
    Rng wr(derive_seed(s.seed, std::to_string(n)));
    wr.shuffle(words);
    std::string ctx;
    for (size_t i = 0; i < words.size(); ++i) ctx += (i ? " " : "") + words[i];
    ctx += utf8_prefix(pad, c);
    TaskText t;
    t.context =
        "Read the following coded text and track the frequency of each coded word. Find the three most frequently "
        "appeared coded words. " +
        ctx;
    t.question =
        "\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are the three most frequently "
        "appeared words in the above coded text?";
    t.answer_prefix = " Answer: According to the coded text above, the three most frequently appeared words are:";
    return t;
  };
  const Size sz = size_prompt([&](int64_t n, size_t c) { return count(build(n, c)); },
                              [&](int64_t) { return pad.size(); }, 1, 4 * target + 64, target, true, s.id);
  finish(s, build(sz.n, sz.c));
  s.expected.assign(vocab.begin() + 1, vocab.begin() + 4);
}

// fidelity: the licence text from a seeded file start, files in order (cyclically), every line
// whose text (whitespace collapsed) is already in the document dropped: the Debian licences
// include near-copies (GFDL-1.2 / 1.3, LGPL-2 / 2.1, GPL-1 / 2 / 3), and a continuation that
// repeats its context measures copying, not language (full-cache perplexity ~1.04 before).
// Tokenised file by file; target context ids (BOS first when the model adds one), then
// gen_tokens + 1 continuation ids.
void Generator::Impl::fidelity(Sample& s, int64_t target) {
  const Tokenizer& tok = fmt->tokenizer();
  const TextSource& t = natural_text();
  if (file_lines.empty()) {
    for (size_t i = 0; i < t.files.size(); ++i) {
      const size_t end = i + 1 < t.file_starts.size() ? t.file_starts[i + 1] : t.raw.size();
      const std::string_view text = std::string_view(t.raw).substr(t.file_starts[i], end - t.file_starts[i]);
      std::vector<std::string>& lines = file_lines.emplace_back();
      for (size_t a = 0; a < text.size();) {
        const size_t nl = text.find('\n', a);
        const size_t b = nl == std::string_view::npos ? text.size() : nl + 1;
        lines.emplace_back(text.substr(a, b - a));
        a = b;
      }
    }
  }
  const auto key = [](const std::string& line) {
    std::string k;
    for (char c : line) {
      if (std::isspace(static_cast<unsigned char>(c))) {
        if (!k.empty() && k.back() != ' ') k += ' ';
      } else {
        k += c;
      }
    }
    while (!k.empty() && k.back() == ' ') k.pop_back();
    return k;
  };
  Rng rng(s.seed);
  const size_t first = static_cast<size_t>(rng.below(file_lines.size()));
  const size_t need = static_cast<size_t>(target) + static_cast<size_t>(s.gen_tokens) + 1;
  std::vector<int32_t> ids;
  if (tok.add_bos() && tok.bos() >= 0) ids.push_back(tok.bos());
  std::set<std::string> seen;
  for (size_t n = 0; ids.size() < need; ++n) {
    if (n == file_lines.size())
      throw Error(
          fmt::format("fidelity: the natural text ({}) holds {} tokens of distinct lines, fewer than the {} a "
                      "sample of {} tokens needs",
                      t.dir, ids.size(), need, target + s.gen_tokens));
    std::string text;
    for (const std::string& line : file_lines[(first + n) % file_lines.size()]) {
      const std::string k = key(line);
      if (!k.empty() && !seen.insert(k).second) continue;  // a line the document already holds
      text += line;
    }
    const std::vector<int32_t> f = tok.encode(text, false, false);
    ids.insert(ids.end(), f.begin(), f.end());
  }
  s.ids.context.assign(ids.begin(), ids.begin() + target);
  s.continuation.assign(ids.begin() + target, ids.begin() + static_cast<std::ptrdiff_t>(need));
  s.context_text = fmt::format("{} ... (licence text from {}, repeated lines dropped)", t.files[first], t.dir);
}

}  // namespace snapkv::eval
