// snapkv tokenizer: building a Tokenizer from GGUF metadata (keys "tokenizer.ggml.*", gguf.md), with
// the defaults and token-attribute fix-ups of llama.cpp's llama_vocab::impl::load.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "gguf/gguf.h"
#include "snapkv/error.h"
#include "tokenizer/tokenizer_impl.h"

namespace snapkv {

namespace {

bool is_signed_type(GGUFValueType t) {
  return t == GGUFValueType::INT8 || t == GGUFValueType::INT16 || t == GGUFValueType::INT32 ||
         t == GGUFValueType::INT64;
}

/// An optional integer key (token ids may be stored as any integer type; -1 / 0xFFFFFFFF mean none).
std::optional<int64_t> read_int(const GGUFFile& f, std::string_view key) {
  const GGUFValue* v = f.find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_integer()) {
    throw Error(fmt::format("{}: metadata key '{}' has type {}, expected an integer", f.path(), key,
                            gguf_value_type_name(v->type)));
  }
  if (is_signed_type(v->type)) return v->i;
  return v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                           : static_cast<int64_t>(v->u);
}

uint32_t attr_from_type(int64_t t) {
  switch (t) {
    case 1:
      return kTokenAttrNormal;
    case 2:
      return kTokenAttrUnknown;
    case 3:
      return kTokenAttrControl;
    case 4:
      return kTokenAttrUserDefined;
    case 5:
      return kTokenAttrUnused;
    case 6:
      return kTokenAttrByte;
    default:
      return kTokenAttrUndefined;
  }
}

/// First token (in list order) whose text is one of `texts`, or -1.
int32_t find_any(const tok::Vocab& v, std::initializer_list<std::string_view> texts) {
  for (auto t : texts) {
    const int32_t id = v.find(t);
    if (id >= 0) return id;
  }
  return -1;
}

}  // namespace

void Tokenizer::Impl::check_id(int32_t id) const {
  if (id < 0 || id >= vocab.size()) {
    throw Error(fmt::format("{}: token id {} out of range [0, {})", path, id, vocab.size()));
  }
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GGUFFile& f) {
  auto im = std::make_unique<Impl>();
  im->path = f.path();
  const std::string& path = im->path;

  // --- model kind and its defaults
  const std::string_view model = f.get_string("tokenizer.ggml.model");
  tok::PreTokenizerSpec spec;
  if (model == "llama") {
    im->type = VocabType::SPM;
    im->bos = 1, im->eos = 2, im->unk = 0;
    im->add_space_prefix = true;
    im->add_bos = true;
    im->add_eos = false;
  } else if (model == "gpt2") {
    im->type = VocabType::BPE;
    im->bos = 11, im->eos = 11, im->unk = -1;
    im->pre = std::string(f.get_string_opt("tokenizer.ggml.pre").value_or("default"));
    if (!tok::pre_tokenizer_spec(im->pre, spec)) {
      throw Error(fmt::format("{}: unsupported BPE pre-tokenizer '{}' (tokenizer.ggml.pre)", path, im->pre));
    }
    if (im->pre.empty()) im->pre = "default";
    im->add_bos = spec.add_bos;
    im->ignore_merges = spec.ignore_merges;
  } else {
    throw Error(fmt::format("{}: unsupported tokenizer model '{}' (tokenizer.ggml.model; supported: llama, gpt2)", path,
                            model));
  }
  if (auto b = f.get_bool_opt("tokenizer.ggml.add_space_prefix")) im->add_space_prefix = *b;

  // --- tokens, scores, types
  const std::vector<std::string_view> tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (tokens.empty()) throw Error(fmt::format("{}: metadata key 'tokenizer.ggml.tokens' is empty", path));
  if (tokens.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw Error(fmt::format("{}: tokenizer.ggml.tokens has {} entries, too many", path, tokens.size()));
  }
  const size_t n = tokens.size();
  std::vector<float> scores;
  if (f.has("tokenizer.ggml.scores")) {
    scores = f.get_f32_array("tokenizer.ggml.scores");
    if (scores.size() < n) {
      throw Error(fmt::format("{}: tokenizer.ggml.scores has {} entries for {} tokens", path, scores.size(), n));
    }
    scores.resize(n);
  } else {
    scores.assign(n, 0.0f);
  }
  std::vector<int64_t> types;
  if (f.has("tokenizer.ggml.token_type")) {
    types = f.get_i64_array("tokenizer.ggml.token_type");
    if (types.size() < n) {
      throw Error(fmt::format("{}: tokenizer.ggml.token_type has {} entries for {} tokens", path, types.size(), n));
    }
  }

  tok::Vocab& v = im->vocab;
  size_t total = 0;
  for (auto t : tokens) total += t.size();
  v.arena.reserve(total);
  v.offsets.reserve(n + 1);
  v.attrs.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    v.offsets.push_back(static_cast<uint32_t>(v.arena.size()));
    v.arena.append(tokens[i]);
    v.attrs.push_back(types.empty() ? kTokenAttrNormal : attr_from_type(types[i]));
  }
  if (v.arena.size() > std::numeric_limits<uint32_t>::max()) {
    throw Error(fmt::format("{}: tokenizer.ggml.tokens holds too many bytes", path));
  }
  v.offsets.push_back(static_cast<uint32_t>(v.arena.size()));
  v.scores = std::move(scores);
  v.by_text.reserve(n);
  for (size_t i = 0; i < n; ++i) v.by_text.emplace(v.text(static_cast<int32_t>(i)), static_cast<int32_t>(i));

  // --- special token ids (out-of-range values are ignored, as llama.cpp does)
  const auto nv = static_cast<int64_t>(n);
  int32_t fim_pad = -1, fim_rep = -1, fim_sep = -1;
  const std::pair<const char*, int32_t*> id_keys[] = {
      {"tokenizer.ggml.bos_token_id", &im->bos},     {"tokenizer.ggml.eos_token_id", &im->eos},
      {"tokenizer.ggml.eot_token_id", &im->eot},     {"tokenizer.ggml.eom_token_id", &im->eom},
      {"tokenizer.ggml.unknown_token_id", &im->unk}, {"tokenizer.ggml.padding_token_id", &im->pad},
      {"tokenizer.ggml.fim_pad_token_id", &fim_pad}, {"tokenizer.ggml.fim_rep_token_id", &fim_rep},
      {"tokenizer.ggml.fim_sep_token_id", &fim_sep},
  };
  for (const auto& [key, dst] : id_keys) {
    if (*dst >= nv) *dst = -1;  // a default outside this vocabulary
    if (auto val = read_int(f, key); val && *val >= 0 && *val < nv) *dst = static_cast<int32_t>(*val);
  }
  if (auto b = f.get_bool_opt("tokenizer.ggml.add_bos_token")) im->add_bos = *b;
  if (auto b = f.get_bool_opt("tokenizer.ggml.add_eos_token")) im->add_eos = *b;
  if (im->add_bos && im->bos < 0) {
    throw Error(fmt::format("{}: tokenizer.ggml.add_bos_token is true but there is no valid bos_token_id", path));
  }
  if (im->add_eos && im->eos < 0) {
    throw Error(fmt::format("{}: tokenizer.ggml.add_eos_token is true but there is no valid eos_token_id", path));
  }

  // --- llama.cpp's fix-ups by token text: end-of-turn / FIM tokens become control tokens.
  auto make_control = [&](int32_t id) {
    if (id >= 0) v.attrs[id] |= kTokenAttrControl;
  };
  if (im->eot < 0) {
    im->eot = find_any(v, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>",
                           "<｜end▁of▁sentence｜>", "<|end_of_text|>", "<end_of_utterance>"});
    make_control(im->eot);
  }
  if (im->eom < 0) {
    im->eom = v.find("<|eom_id|>");
    make_control(im->eom);
  }
  make_control(find_any(v, {"<|fim_prefix|>", "<fim-prefix>", "<｜fim▁begin｜>", "<PRE>"}));
  make_control(find_any(v, {"<|fim_suffix|>", "<fim-suffix>", "<｜fim▁hole｜>", "<SUF>"}));
  make_control(find_any(v, {"<|fim_middle|>", "<fim-middle>", "<｜fim▁end｜>", "<MID>"}));
  if (fim_pad < 0) fim_pad = find_any(v, {"<|fim_pad|>", "<fim-pad>", "<PAD>"});
  if (fim_rep < 0) fim_rep = find_any(v, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"});
  if (fim_sep < 0) fim_sep = find_any(v, {"<|file_sep|>"});
  make_control(fim_pad);
  make_control(fim_rep);
  make_control(fim_sep);

  // --- end-of-generation set
  std::vector<int32_t>& eog = im->eog;
  for (std::string_view t : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
                             "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>"}) {
    const int32_t id = v.find(t);
    if (id >= 0) {
      eog.push_back(id);
      make_control(id);
    }
  }
  for (int32_t id : {im->eos, im->eot, im->eom, fim_pad, fim_rep, fim_sep}) {
    if (id >= 0) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());

  // --- per-model strip attributes (llama.cpp sets these by model / pre-tokenizer name)
  std::string name(f.get_string_opt("general.name").value_or(""));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  if (im->pre == "jina-v2-de" || im->pre == "jina-v2-es" || im->pre == "jina-v2-code") {
    if (int32_t id = v.find("<mask>"); id >= 0) v.attrs[id] |= kTokenAttrLstrip;
  } else if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id = 0; id < v.size(); ++id) {
      if (v.attrs[id] & (kTokenAttrControl | kTokenAttrUserDefined | kTokenAttrUnknown))
        v.attrs[id] |= kTokenAttrRstrip;
    }
    if (int32_t id = v.find("</s>"); id >= 0) v.attrs[id] |= kTokenAttrRstrip;
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (int32_t id = v.find(t); id >= 0) v.attrs[id] &= ~static_cast<uint32_t>(kTokenAttrRstrip);
    }
  }

  // --- algorithm state
  if (im->type == VocabType::SPM) {
    static const char* kHex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      const char name_buf[7] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>', 0};
      int32_t id = v.find(name_buf);
      if (id < 0) {
        const char c = static_cast<char>(b);
        id = v.find(std::string_view(&c, 1));
      }
      im->byte_tokens[b] = id >= 0 ? id : im->unk;
    }
  } else {
    im->byte_tokens.fill(-1);
    const std::vector<std::string_view> merges = f.get_string_array("tokenizer.ggml.merges");
    for (size_t i = 0; i < merges.size(); ++i) im->ranks.add(merges[i], static_cast<int32_t>(i));
    im->pretok = std::make_unique<tok::PreTokenizer>(spec.regexes);
  }
  im->splitter = std::make_unique<tok::SpecialSplitter>(im->vocab);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(im)));
}

}  // namespace snapkv
