// Saved sessions (issue 10, snapkv/session.h): a compressed document written to a file and
// restored answers follow-up questions exactly as the sequence that was saved — same cache bits,
// same cold rows, same logits, same greedy tokens — from RAM or a disk cold tier; a damaged file,
// a file of another model, a file that is not a session and misuse are clear errors — also files
// crafted with a valid checksum (it is not a MAC) whose header lies; a failed save keeps the file
// that was there.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "core/sha256.h"
#include "runtime/runtime_util.h"
#include "runtime/sequence_state.h"
#include "snapkv/cold_tier.h"
#include "snapkv/error.h"
#include "support/synthetic_model.h"

namespace snapkv {
namespace {

using rtest::prompt;
namespace fs = std::filesystem;

/// A fresh directory under the system temp dir, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("snapkv_session_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void write_all(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(s.data(), static_cast<std::streamsize>(s.size()));
}

/// Prefills `q` after what `s` holds (re-selecting if asked) and decodes `steps` greedy tokens:
/// every step's logits.
std::vector<std::vector<float>> answer(const Engine& e, Sequence& s, const std::vector<int32_t>& q, bool reselect,
                                       int steps, Workspace& ws) {
  PrefillOptions po;
  po.reselect = reselect;
  auto l = e.prefill(s, q, po, ws);
  std::vector<std::vector<float>> out{{l.begin(), l.end()}};
  for (int i = 0; i < steps; ++i) {
    const auto& last = out.back();
    const auto tok = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    Batch b;
    b.add(s, tok);
    e.step(b, ws);
    const auto lg = b.logits(0);
    out.emplace_back(lg.begin(), lg.end());
  }
  return out;
}

/// A document of 300 tokens compressed to 64 per head with an int8 (or f16) cold tier.
std::unique_ptr<Sequence> compressed_document(const Engine& e, const std::string& tier, Workspace& ws) {
  SequenceOptions so;
  so.kv_type = KVType::F16;
  so.cold_tier = parse_cold_tier(tier);
  auto s = e.new_sequence(so);
  PrefillOptions po;
  po.press = PressSpec::parse("snapkv:budget=64,window=16");
  e.prefill(*s, prompt(300, e.info().n_vocab, 21), po, ws);
  return s;
}

/// stories260K with a compressed document (int8 cold tier) saved to `name` in a fresh directory.
struct SavedDocument {
  std::shared_ptr<const Engine> e = rtest::stories();
  Workspace ws{*e};
  TempDir d;
  std::unique_ptr<Sequence> s = compressed_document(*e, "int8", ws);
  fs::path file;
  explicit SavedDocument(const std::string& name) : file(d.path / name) { save_session(*e, *s, file.string()); }
};

void expect_same_sequence(const Sequence& a, const Sequence& b) {
  rtest::expect_same_cache(a.kv_cache(), b.kv_cache(), "saved vs loaded");
  EXPECT_EQ(a.n_past(), b.n_past());
  EXPECT_EQ(a.n_ctx(), b.n_ctx());
  EXPECT_EQ(a.kv_type(), b.kv_type());
  EXPECT_EQ(a.stats().press, b.stats().press);
  EXPECT_EQ(a.stats().compressed, b.stats().compressed);
  EXPECT_EQ(a.stats().budget, b.stats().budget);
  EXPECT_EQ(a.stats().window, b.stats().window);
  EXPECT_EQ(a.stats().n_prompt_tokens, b.stats().n_prompt_tokens);
  EXPECT_EQ(a.stats().kv_cache_bytes, b.stats().kv_cache_bytes);
  EXPECT_EQ(a.stats().kv_cache_bytes_full, b.stats().kv_cache_bytes_full);
  EXPECT_EQ(a.stats().kv_cold_bytes, b.stats().kv_cold_bytes);
  const auto la = a.prefill_logits(), lb = b.prefill_logits();
  EXPECT_TRUE(std::equal(la.begin(), la.end(), lb.begin(), lb.end())) << "prefill logits";
  const auto& ca = a.state().cold;
  const auto& cb = b.state().cold;
  ASSERT_EQ(ca == nullptr, cb == nullptr);
  if (!ca) return;
  EXPECT_EQ(ca->format(), cb->format());
  for (int il = 0; il < ca->n_layer(); ++il) {
    const auto ea = ca->encoded_layer(il), eb = cb->encoded_layer(il);
    EXPECT_TRUE(std::equal(ea.begin(), ea.end(), eb.begin(), eb.end())) << "cold layer " << il;
  }
}

TEST(Session, LoadedSessionAnswersExactlyAsTheSavedSequence) {
  auto e = rtest::stories();
  Workspace ws(*e);
  TempDir d;
  for (const std::string tier : {"int8", "f16"}) {
    SCOPED_TRACE(tier);
    auto s = compressed_document(*e, tier, ws);
    ASSERT_TRUE(s->stats().compressed);
    ASSERT_GT(s->stats().kv_cold_bytes, 0u);
    const auto file = d.path / ("doc-" + tier + ".snkv");
    save_session(*e, *s, file.string(), "app bytes \x01\x02");
    LoadedSession ls = load_session(*e, file.string());
    EXPECT_EQ(ls.app_data, "app bytes \x01\x02");
    expect_same_sequence(*s, *ls.sequence);
    // Two follow-up questions, each re-selecting from the cold tier, on the saved sequence and on
    // the restored one: the same logits at every step, bit for bit.
    for (uint64_t qs : {31u, 32u}) {
      auto a = s->fork();
      auto b = ls.sequence->fork();
      const auto q = prompt(12, e->info().n_vocab, qs, -1);
      const auto ta = answer(*e, *a, q, true, 6, ws);
      const auto tb = answer(*e, *b, q, true, 6, ws);
      EXPECT_EQ(ta, tb) << "question seed " << qs;
      EXPECT_EQ(a->stats().n_reselections, 1);
      EXPECT_EQ(b->stats().n_reselections, 1);
      rtest::expect_same_cache(a->kv_cache(), b->kv_cache(), "after the question");
    }
  }
}

TEST(Session, DiskColdTierAndAPlainDecodedSequenceRoundTrip) {
  SavedDocument sd("doc.snkv");
  auto& [e, ws, d, s, file] = sd;
  SessionLoadOptions lo;
  lo.cold_dir = d.path.string();
  lo.n_ctx = 1000;
  LoadedSession ls = load_session(*e, file.string(), lo);
  EXPECT_EQ(ls.sequence->n_ctx(), 1000);
  EXPECT_EQ(ls.sequence->state().cold->ram_bytes(), 0u);  // the rows live in the file under cold_dir
  EXPECT_EQ(ls.sequence->state().cold->bytes(), s->state().cold->bytes());
  const auto q = prompt(10, e->info().n_vocab, 41, -1);
  EXPECT_EQ(answer(*e, *s->fork(), q, true, 4, ws), answer(*e, *ls.sequence, q, true, 4, ws));

  // No press, no cold tier, F32, a sequence that already decoded: the next tokens are the same.
  SequenceOptions so;
  so.kv_type = KVType::F32;
  auto p = e->new_sequence(so);
  answer(*e, *p, prompt(50, e->info().n_vocab, 42), false, 3, ws);
  save_session(*e, *p, file.string());  // replaces the previous file
  LoadedSession lp = load_session(*e, file.string());
  EXPECT_TRUE(lp.app_data.empty());
  EXPECT_EQ(lp.sequence->state().cold, nullptr);
  expect_same_sequence(*p, *lp.sequence);
  const auto q2 = prompt(5, e->info().n_vocab, 43, -1);
  EXPECT_EQ(answer(*e, *p, q2, false, 3, ws), answer(*e, *lp.sequence, q2, false, 3, ws));
}

TEST(Session, DamagedForeignAndMissingFilesAreClearErrors) {
  auto e = rtest::stories();
  Workspace ws(*e);
  TempDir d;
  auto s = compressed_document(*e, "int8", ws);
  const auto good = d.path / "good.snkv";
  save_session(*e, *s, good.string());
  const std::string bytes = read_all(good);
  ASSERT_GT(bytes.size(), 1000u);
  auto expect_error = [&](const std::string& body, const std::string& needle) {
    const auto bad = d.path / "bad.snkv";
    write_all(bad, body);
    try {
      load_session(*e, bad.string());
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(needle), std::string::npos) << err.what();
      EXPECT_NE(std::string(err.what()).find("bad.snkv"), std::string::npos) << err.what();
    }
  };
  expect_error(bytes.substr(0, bytes.size() / 2), "damaged");  // cut short
  expect_error(bytes.substr(0, 20), "too short");
  expect_error("", "too short");
  for (size_t at : {size_t{30}, bytes.size() / 2, bytes.size() - 40, bytes.size() - 1}) {
    std::string flipped = bytes;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x10);
    expect_error(flipped, "damaged");
  }
  std::string magic = bytes;
  magic[0] = 'X';
  expect_error(magic, "not a snapkv session");
  std::string version = bytes;
  version[8] = 7;
  expect_error(version, "format version 7");
  expect_error(bytes + "extra", "damaged");
  EXPECT_THROW(load_session(*e, (d.path / "missing.snkv").string()), Error);
  EXPECT_THROW(load_session(*e, d.path.string()), Error);  // a directory
  // A FIFO with no writer: refused at once (opening it blocked forever before).
  const std::string fifo = (d.path / "fifo.snkv").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    (void)load_session(*e, fifo);
    ADD_FAILURE() << "a FIFO loaded as a session";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("not a regular file"), std::string::npos) << err.what();
  }

  // Another model: a synthetic llama of other weights.
  SyntheticModelConfig cfg;
  cfg.n_layer = 2;
  cfg.n_embd = 64;
  cfg.n_head = 2;
  cfg.n_head_kv = 1;
  cfg.head_dim = 32;
  cfg.n_ff = 64;
  cfg.n_vocab = 300;
  cfg.n_ctx = 512;
  const auto other_path = d.path / "other.gguf";
  write_synthetic_model(cfg, other_path.string());
  auto other = Engine::load(other_path.string());
  try {
    load_session(*other, good.string());
    ADD_FAILURE() << "a session of another model loaded";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("another model"), std::string::npos) << err.what();
  }
  SessionLoadOptions lo;
  lo.n_ctx = 10;  // fewer positions than the session holds
  EXPECT_THROW(load_session(*e, good.string(), lo), Error);
}

TEST(Session, MisuseIsAClearErrorAndAFailedSaveKeepsTheOldFile) {
  auto e = rtest::stories();
  Workspace ws(*e);
  TempDir d;
  auto s = compressed_document(*e, "int8", ws);
  const auto file = d.path / "keep.snkv";
  save_session(*e, *s, file.string(), "first");
  const std::string before = read_all(file);
  // A sequence with a pending prefill is refused, and the saved file is untouched.
  SequenceOptions so;
  auto p = e->new_sequence(so);
  p->begin_prefill(prompt(20, e->info().n_vocab, 5), PrefillOptions{});
  EXPECT_THROW(save_session(*e, *p, file.string()), Error);
  EXPECT_EQ(read_all(file), before);
  // A sequence of another engine's model.
  auto e2 = rtest::stories();
  EXPECT_THROW(save_session(*e2, *s, file.string()), Error);
  EXPECT_EQ(read_all(file), before);
  // A directory that does not exist.
  EXPECT_THROW(save_session(*e, *s, (d.path / "no" / "such" / "dir.snkv").string()), Error);
  // No temporary file is left behind by any of these.
  size_t n_files = 0;
  for (const auto& it : fs::directory_iterator(d.path)) n_files += it.is_regular_file() ? 1 : 0;
  EXPECT_EQ(n_files, 1u);
  EXPECT_EQ(load_session(*e, file.string()).app_data, "first");
}

// A cold tier directory that cannot take the restored rows (a full disk: RLIMIT_FSIZE 0) fails
// the load with the directory's error, not with "damaged": the file read is fine and loads
// without the directory.
TEST(Session, AFullColdTierDiskAtLoadDoesNotCallTheFileDamaged) {
  SavedDocument sd("doc.snkv");
  auto& [e, ws, d, s, file] = sd;
  SessionLoadOptions lo;
  lo.cold_dir = d.path.string();
  std::string what;
  try {
    rtest::NoFileWrites full;
    (void)load_session(*e, file.string(), lo);
  } catch (const ColdTierIOError& err) {
    what = err.what();
  } catch (const Error& err) {
    ADD_FAILURE() << "not a ColdTierIOError: " << err.what();
  }
  EXPECT_NE(what.find("cold tier file in " + d.path.string()), std::string::npos) << what;
  EXPECT_EQ(what.find("damaged"), std::string::npos) << what;
  EXPECT_NO_THROW(load_session(*e, file.string()));
}

// save_session refuses what it must not replace (check_session_target): an empty path, a
// symbolic link, a FIFO, the model file; nothing there is touched.
TEST(Session, SaveRefusesPathsItMustNotReplace) {
  auto e = rtest::stories();
  Workspace ws(*e);
  TempDir d;
  auto s = compressed_document(*e, "int8", ws);
  auto refused = [&](const std::string& path, const std::string& needle) {
    try {
      save_session(*e, *s, path);
      ADD_FAILURE() << path << ": saved";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(needle), std::string::npos) << err.what();
    }
    EXPECT_THROW(check_session_target(*e, path), Error) << path;
  };
  refused("", "the path is empty");
  const auto fifo = d.path / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  refused(fifo.string(), "not a regular file (a FIFO)");
  EXPECT_TRUE(fs::is_fifo(fifo));
  const auto target = d.path / "target.txt";
  write_all(target, "keep me");
  fs::create_symlink(target, d.path / "link.snkv");
  refused((d.path / "link.snkv").string(), "is a symbolic link");
  EXPECT_EQ(read_all(target), "keep me");
  refused(d.path.string(), "not a regular file (a directory)");
  {  // the model file, on a copy of the model (were the check to fail, only the copy is replaced)
    const auto copy = d.path / "model-copy.gguf";
    fs::copy_file(e->info().path, copy);
    auto ec = Engine::load(copy.string(), EngineOptions{});
    auto sc = ec->new_sequence({});
    Workspace wsc(*ec);
    ec->prefill(*sc, prompt(20, ec->info().n_vocab, 9), PrefillOptions{}, wsc);
    try {
      save_session(*ec, *sc, copy.string());
      ADD_FAILURE() << "saved over the model";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("is the model file"), std::string::npos) << err.what();
    }
    EXPECT_THROW(check_session_target(*ec, copy.string()), Error);
    EXPECT_EQ(fs::file_size(copy), fs::file_size(e->info().path));
    fs::remove(copy);
  }
  EXPECT_NO_THROW(check_session_target(*e, (d.path / "new.snkv").string()));
  size_t n_entries = 0;
  for (const auto& it : fs::directory_iterator(d.path)) n_entries += it.path().filename().string()[0] == '.' ? 1 : 0;
  EXPECT_EQ(n_entries, 0u);  // no temporary file left by the checks
}

/// A session file taken apart: the header JSON and the bytes after it (payload without checksum).
struct SessionParts {
  nlohmann::json header;
  std::string header_text;
  std::string payload;
};
SessionParts split(const std::string& bytes) {
  uint64_t hn = 0;
  std::memcpy(&hn, bytes.data() + 16, 8);
  SessionParts p;
  p.header_text = bytes.substr(24, hn);
  p.header = nlohmann::json::parse(p.header_text);
  p.payload = bytes.substr(24 + hn, bytes.size() - 32 - 24 - hn);
  return p;
}
/// Reassembles a session file around `header_text`, with a correct checksum.
std::string assemble(const std::string& original, const std::string& header_text, const std::string& payload) {
  std::string out = original.substr(0, 16);
  const uint64_t hn = header_text.size();
  out.append(reinterpret_cast<const char*>(&hn), 8);
  out += header_text;
  out += payload;
  Sha256 h;
  h.update(out.data(), out.size());
  const auto d = h.digest();
  out.append(reinterpret_cast<const char*>(d.data()), d.size());
  return out;
}

TEST(Session, CraftedFilesWithAValidChecksumAreClearErrors) {
  auto e = rtest::stories();
  Workspace ws(*e);
  TempDir d;
  auto s = compressed_document(*e, "int8", ws);
  const auto good = d.path / "good.snkv";
  save_session(*e, *s, good.string());
  const std::string bytes = read_all(good);
  const SessionParts parts = split(bytes);
  const auto bad = d.path / "crafted.snkv";
  auto expect_damaged = [&](const std::string& header_text, const std::string& payload, const std::string& what) {
    write_all(bad, assemble(bytes, header_text, payload));
    try {
      load_session(*e, bad.string());
      ADD_FAILURE() << "loaded: " << what;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("damaged"), std::string::npos) << what << ": " << err.what();
    }
  };
  auto with = [&](const std::function<void(nlohmann::json&)>& f) {
    nlohmann::json h = parts.header;
    f(h);
    return h.dump();
  };
  // The assembly itself is right: the unchanged parts load.
  write_all(bad, assemble(bytes, parts.header_text, parts.payload));
  EXPECT_NO_THROW(load_session(*e, bad.string()));

  // Headers that would cost the parser far more than their text: nested 33 deep (a real one
  // nests 4; a strings' brackets do not count), or past the 4 MiB bound.
  std::string deep = std::string(33, '[') + std::string(33, ']');
  expect_damaged(deep, parts.payload, "nested 33 deep");
  try {
    write_all(bad, assemble(bytes, deep, parts.payload));
    load_session(*e, bad.string());
    ADD_FAILURE() << "a header nested 33 deep loaded";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("nests deeper than 32"), std::string::npos) << err.what();
  }
  // Brackets inside a string are text: a name of 200 '[' (and an escaped quote) still loads.
  write_all(bad,
            assemble(bytes, with([](auto& h) { h["model"]["name"] = std::string(200, '[') + "\"{"; }), parts.payload));
  EXPECT_NO_THROW(load_session(*e, bad.string()));
  expect_damaged(with([](auto& h) { h["pad"] = std::string((4u << 20) + 1, 'x'); }), parts.payload, "a 4 MiB header");

  expect_damaged(with([](auto& h) { h["stats"]["press"] = "snapkv:budget=64,window=16,sinks=-10000000"; }),
                 parts.payload, "negative sinks");
  expect_damaged(with([](auto& h) { h["stats"]["press"] = "snapkv:window=question,window_min=10,window_max=5"; }),
                 parts.payload, "reversed window bounds");
  expect_damaged(with([](auto& h) { h["stats"]["press"] = "nopress"; }), parts.payload, "unknown press");
  // Counts far beyond the file: refused before anything of that size is allocated.
  expect_damaged(with([](auto& h) {
                   h["n_ctx"] = int64_t{1} << 30;
                   h["n_past"] = int64_t{1} << 30;
                   h["heads"][0][0] = int64_t{1} << 30;
                 }),
                 parts.payload, "huge entry count");
  expect_damaged(with([](auto& h) { h["n_past"] = 1e300; }), parts.payload, "a float count");
  expect_damaged(with([](auto& h) { h["n_past"] = -1; }), parts.payload, "negative positions");
  expect_damaged(with([](auto& h) { h["stats"]["budget"] = -5; }), parts.payload, "negative budget");
  expect_damaged(with([](auto& h) { h["stats"]["compressed"] = false; }), parts.payload, "cold layers uncompressed");
  expect_damaged(with([](auto& h) { h["app_data_bytes"] = 1u << 30; }), parts.payload, "app data past the end");
  // A cold layer shorter than the prompt: re-selection would fail on it.
  expect_damaged(with([](auto& h) { h["cold"]["layers"][0][1] = 50; }), parts.payload, "short cold layer");
  // A hot head missing an entry after the prompt (count and payload unchanged otherwise): the
  // counts no longer match the payload.
  expect_damaged(with([](nlohmann::json& h) { h["heads"][0][0] = h["heads"][0][0].get<int64_t>() - 1; }), parts.payload,
                 "a count that does not match the payload");
  // A header nested a million levels deep, and one that is not JSON: no crash.
  expect_damaged(std::string(1000000, '[') + std::string(1000000, ']'), parts.payload, "deep nesting");
  expect_damaged("{not json", parts.payload, "not JSON");
  expect_damaged("[]", parts.payload, "not an object");

  // Values of their own type (format version 2, "kv_type_v"). A version 1 file without the field
  // (as builds before it wrote them) loads; version 2 needs a known type that combines.
  write_all(bad, assemble(bytes, with([](nlohmann::json& h) { h.erase("kv_type_v"); }), parts.payload));
  EXPECT_EQ(load_session(*e, bad.string()).sequence->kv_type_v(), KVType::F16);
  std::string v2 = bytes;
  v2[8] = 2;
  auto expect_damaged_v2 = [&](const std::string& header_text, const std::string& what, const std::string& words) {
    write_all(bad, assemble(v2, header_text, parts.payload));
    try {
      load_session(*e, bad.string());
      ADD_FAILURE() << "loaded: " << what;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("damaged"), std::string::npos) << what << ": " << err.what();
      EXPECT_NE(std::string(err.what()).find(words), std::string::npos) << what << ": " << err.what();
    }
  };
  expect_damaged_v2(with([](nlohmann::json& h) { h.erase("kv_type_v"); }), "version 2 without the field",
                    "without kv_type_v");
  expect_damaged_v2(with([](nlohmann::json& h) { h["kv_type_v"] = "q5_1"; }), "an unknown type", "q5_1");
  expect_damaged_v2(with([](nlohmann::json& h) { h["kv_type_v"] = 3; }), "a number", "damaged");
  expect_damaged_v2(with([](nlohmann::json& h) { h["kv_type_v"] = "f32"; }), "f16 keys with f32 values",
                    "both be quantized");
  write_all(bad, assemble(v2, parts.header_text, parts.payload));  // version 2 naming one type: fine
  EXPECT_EQ(load_session(*e, bad.string()).sequence->kv_type_v(), KVType::F16);
}

TEST(Session, AColdTierSequenceThePressKeptWholeStaysOne) {
  auto e = rtest::stories();
  Workspace ws(*e);
  TempDir d;
  SequenceOptions so;
  so.cold_tier = parse_cold_tier("f16");
  auto s = e->new_sequence(so);
  PrefillOptions po;
  po.press = PressSpec::parse("snapkv:budget=1000,window=16");  // the prompt fits: nothing goes cold
  e->prefill(*s, prompt(100, e->info().n_vocab, 51), po, ws);
  ASSERT_FALSE(s->stats().compressed);
  save_session(*e, *s, (d.path / "whole.snkv").string());
  LoadedSession ls = load_session(*e, (d.path / "whole.snkv").string());
  EXPECT_TRUE(ls.sequence->cold_tier().enabled);
  EXPECT_EQ(ls.sequence->cold_tier().format, ColdFormat::F16);
  const auto q = prompt(8, e->info().n_vocab, 52, -1);
  EXPECT_EQ(answer(*e, *s, q, true, 3, ws), answer(*e, *ls.sequence, q, true, 3, ws));
}

}  // namespace
}  // namespace snapkv
