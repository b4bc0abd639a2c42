// The fuzz seed corpus (snapkv::write_fuzz_seeds, run by fuzz/run.sh through tools/make_fuzz_seeds) must
// stay small and valid: a seed the parser rejects would only exercise the error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "snapkv/error.h"
#include "support/fuzz_seeds.h"

namespace snapkv {
namespace {

namespace fs = std::filesystem;

/// A fresh, empty directory under the system temp dir, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("snapkv-fuzz-seeds-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

TEST(FuzzSeeds, AllParseAndAreSmall) {
  TempDir tmp;
  const std::vector<std::string> written = write_fuzz_seeds(tmp.path.string());
  EXPECT_EQ(written.size(), 6u);
  int n = 0;
  std::vector<std::string> seen;
  for (const auto& e : fs::directory_iterator(tmp.path)) {
    ASSERT_EQ(e.path().extension(), ".gguf") << e.path();
    SCOPED_TRACE(e.path().string());
    EXPECT_LT(e.file_size(), 8192u);
    const GGUFFile g = GGUFFile::open(e.path().string());
    const std::string name = e.path().filename().string();
    seen.push_back(name);
    if (name == "all_types.gguf" || name == "all_types_v2.gguf") {
      EXPECT_EQ(g.version(), name == "all_types.gguf" ? 3u : 2u);
      EXPECT_EQ(g.get_i64("t.i64"), -(int64_t{1} << 40));
      EXPECT_EQ(g.find("t.nested")->arr.size(), 2u);
      EXPECT_EQ(g.tensor("q8").ggml_type(), GGMLType::Q8_0);
    } else if (name == "alignment64.gguf") {
      EXPECT_EQ(g.alignment(), 64u);
      EXPECT_EQ(g.tensor("i32").dims, (std::vector<int64_t>{3, 1, 1, 2}));
    } else if (name == "vocab.gguf") {
      EXPECT_EQ(g.get_string_array("tokenizer.ggml.tokens").size(), 64u);
      EXPECT_TRUE(g.tensors().empty());
    } else if (name == "tiny_llama.gguf") {
      EXPECT_EQ(g.get_string("general.architecture"), "llama");
      EXPECT_EQ(g.tensors().size(), 7u);
    } else if (name == "empty.gguf") {
      EXPECT_EQ(g.version(), 3u);
      EXPECT_TRUE(g.metadata().empty());
      EXPECT_TRUE(g.tensors().empty());
    } else {
      ADD_FAILURE() << "unexpected seed " << name;
    }
    ++n;
  }
  EXPECT_EQ(n, 6);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"alignment64.gguf", "all_types.gguf", "all_types_v2.gguf", "empty.gguf",
                                            "tiny_llama.gguf", "vocab.gguf"}));
}

TEST(FuzzSeeds, Deterministic) {
  const std::vector<FuzzSeed> a = make_fuzz_seeds();
  const std::vector<FuzzSeed> b = make_fuzz_seeds();
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].name, b[k].name);
    EXPECT_EQ(a[k].bytes, b[k].bytes) << a[k].name;
  }
  EXPECT_EQ(a[0].name, "empty.gguf");
  EXPECT_EQ(a[0].bytes.size(), 32u);  // magic, version, tensor count, metadata count; padded to 32
}

TEST(FuzzSeeds, MissingDirectoryThrows) {
  TempDir tmp;
  const std::string missing = (tmp.path / "no-such-dir").string();
  try {
    write_fuzz_seeds(missing);
    FAIL() << "expected snapkv::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace snapkv
