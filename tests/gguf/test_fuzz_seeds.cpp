// The committed fuzz seed corpus (fuzz/seeds, written by fuzz/make_seeds.cpp) must stay small and valid:
// a seed the parser rejects would only exercise the error paths.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "snapkv/gguf.h"
#include "test_util.h"

namespace snapkv {
namespace {

namespace fs = std::filesystem;

TEST(FuzzSeeds, AllParseAndAreSmall) {
  const fs::path dir = test::source_dir() / "fuzz" / "seeds";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".gguf") continue;
    SCOPED_TRACE(e.path().string());
    EXPECT_LT(e.file_size(), 8192u);
    const GGUFFile g = GGUFFile::open(e.path().string());
    const std::string name = e.path().filename().string();
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
      EXPECT_TRUE(g.metadata().empty());
      EXPECT_TRUE(g.tensors().empty());
    }
    ++n;
  }
  EXPECT_EQ(n, 6);
}

}  // namespace
}  // namespace snapkv
