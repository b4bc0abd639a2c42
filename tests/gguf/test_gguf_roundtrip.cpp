// GGUFWriter -> GGUFFile round trips (every value type, nested arrays, tensors, alignment),
// typed getters and their errors, open() on disk, and the Q8_0 quantizer.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "gguf/gguf.h"
#include "snapkv/error.h"
#include "support/gguf_writer.h"

namespace snapkv {
namespace {

using V = GGUFWriterValue;
using T = GGUFValueType;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// A writer exercising every value type; the tests below check each value read back.
GGUFWriter full_writer(uint32_t alignment) {
  GGUFWriter w(alignment);
  w.add_u8("v.u8", 255);
  w.add_i8("v.i8", -128);
  w.add_u16("v.u16", 65535);
  w.add_i16("v.i16", -32768);
  w.add_u32("v.u32", 4294967295u);
  w.add_i32("v.i32", std::numeric_limits<int32_t>::min());
  w.add_u64("v.u64", std::numeric_limits<uint64_t>::max());
  w.add_i64("v.i64", std::numeric_limits<int64_t>::min());
  w.add_f32("v.f32", 0.1f);
  w.add_f64("v.f64", -1e300);
  w.add_bool("v.true", true);
  w.add_bool("v.false", false);
  w.add_string("v.str", std::string("h\xc3\xa9llo\0world", 12));
  w.add_string("v.empty", "");
  w.add_string_array("a.str", {"<unk>", "", "\xe2\x96\x81the", std::string(300, 'x')});
  w.add_f32_array("a.f32", {0.0f, -1.5f, 3.25e-7f});
  w.add_i32_array("a.i32", {-7, 0, 2147483647});
  w.add_u32_array("a.u32", {1, 2, 4000000000u});
  w.add("a.u64", V::array(T::UINT64, {V::u64(1), V::u64(std::numeric_limits<uint64_t>::max())}));
  w.add("a.f64", V::array(T::FLOAT64, {V::f64(0.5), V::f64(-2.0)}));
  w.add("a.bool", V::array(T::BOOL, {V::boolean(true), V::boolean(false), V::boolean(true)}));
  w.add("a.i8", V::array(T::INT8, {V::i8(-1), V::i8(127)}));
  w.add("a.empty", V::array(T::UINT16, {}));
  // [[1, 2], [], [[ "deep" ]]] — an array of arrays whose inner arrays have different element types.
  w.add("a.nested", V::array(T::ARRAY, {V::array(T::INT16, {V::i16(1), V::i16(2)}), V::array(T::UINT8, {}),
                                        V::array(T::ARRAY, {V::array(T::STRING, {V::string("deep")})})}));
  // Tensors: F32 1-D, F16 3-D, Q8_0 2-D (quantized), Q4_K 4-D raw bytes.
  const std::vector<float> f32 = {1.0f, -2.0f, 3.5f, 0.0f, 7.0f};
  w.add_tensor_f32("t.f32", {5}, f32);
  std::vector<uint8_t> f16(2 * 3 * 4 * 2);
  for (size_t k = 0; k < f16.size(); ++k) f16[k] = static_cast<uint8_t>(k * 3);
  w.add_tensor("t.f16", GGMLType::F16, {2, 3, 4}, f16);
  std::vector<float> q(64 * 3);
  for (size_t k = 0; k < q.size(); ++k) q[k] = std::sin(static_cast<float>(k));
  w.add_tensor("t.q8", GGMLType::Q8_0, {64, 3}, quantize_q8_0(q.data(), static_cast<int64_t>(q.size())));
  std::vector<uint8_t> q4k(144 * 2 * 1 * 1 * 2);
  for (size_t k = 0; k < q4k.size(); ++k) q4k[k] = static_cast<uint8_t>(k);
  w.add_tensor("t.q4k", GGMLType::Q4_K, {256, 2, 1, 2}, q4k);
  return w;
}

void check_full(const GGUFFile& g, uint32_t alignment) {
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), alignment);
  EXPECT_EQ(g.get_u64("v.u8"), 255u);
  EXPECT_EQ(g.find("v.u8")->type, T::UINT8);
  EXPECT_EQ(g.get_i64("v.i8"), -128);
  EXPECT_EQ(g.find("v.i8")->type, T::INT8);
  EXPECT_EQ(g.get_u64("v.u16"), 65535u);
  EXPECT_EQ(g.get_i64("v.i16"), -32768);
  EXPECT_EQ(g.get_u64("v.u32"), 4294967295u);
  EXPECT_EQ(g.get_i64("v.i32"), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(g.get_u64("v.u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(g.get_i64("v.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(g.find("v.f32")->type, T::FLOAT32);
  EXPECT_EQ(g.get_f64("v.f32"), static_cast<double>(0.1f));
  EXPECT_EQ(g.get_f64("v.f64"), -1e300);
  EXPECT_TRUE(g.get_bool("v.true"));
  EXPECT_FALSE(g.get_bool("v.false"));
  EXPECT_EQ(g.get_string("v.str"), std::string_view("h\xc3\xa9llo\0world", 12));
  EXPECT_EQ(g.get_string("v.empty"), "");
  const auto strs = g.get_string_array("a.str");
  ASSERT_EQ(strs.size(), 4u);
  EXPECT_EQ(strs[0], "<unk>");
  EXPECT_EQ(strs[1], "");
  EXPECT_EQ(strs[2], "\xe2\x96\x81the");
  EXPECT_EQ(strs[3], std::string(300, 'x'));
  EXPECT_EQ(g.get_f32_array("a.f32"), (std::vector<float>{0.0f, -1.5f, 3.25e-7f}));
  EXPECT_EQ(g.get_i64_array("a.i32"), (std::vector<int64_t>{-7, 0, 2147483647}));
  EXPECT_EQ(g.get_i64_array("a.u32"), (std::vector<int64_t>{1, 2, 4000000000}));
  EXPECT_EQ(g.get_f32_array("a.i32"), (std::vector<float>{-7.0f, 0.0f, 2147483647.0f}));
  EXPECT_EQ(g.get_f32_array("a.f64"), (std::vector<float>{0.5f, -2.0f}));
  EXPECT_EQ(g.get_i64_array("a.bool"), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(g.get_i64_array("a.i8"), (std::vector<int64_t>{-1, 127}));
  EXPECT_EQ(g.find("a.u64")->arr.at(1).u, std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(g.get_i64_array("a.empty").empty());
  EXPECT_EQ(g.find("a.empty")->elem_type, T::UINT16);

  const GGUFValue* n = g.find("a.nested");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->type, T::ARRAY);
  EXPECT_EQ(n->elem_type, T::ARRAY);
  ASSERT_EQ(n->arr.size(), 3u);
  EXPECT_EQ(n->arr[0].elem_type, T::INT16);
  ASSERT_EQ(n->arr[0].arr.size(), 2u);
  EXPECT_EQ(n->arr[0].arr[1].i, 2);
  EXPECT_EQ(n->arr[1].elem_type, T::UINT8);
  EXPECT_TRUE(n->arr[1].arr.empty());
  ASSERT_EQ(n->arr[2].arr.size(), 1u);
  EXPECT_EQ(n->arr[2].arr[0].elem_type, T::STRING);
  EXPECT_EQ(n->arr[2].arr[0].arr.at(0).str, "deep");

  // Metadata in insertion order (general.alignment first when written).
  const auto& md = g.metadata();
  const size_t first = alignment != 32 ? 1 : 0;
  if (first == 1) {
    EXPECT_EQ(md[0].first, "general.alignment");
  }
  EXPECT_EQ(md[first].first, "v.u8");
  EXPECT_EQ(md.back().first, "a.nested");

  ASSERT_EQ(g.tensors().size(), 4u);
  EXPECT_EQ(g.tensors()[0].name, "t.f32");
  EXPECT_EQ(g.tensors()[3].name, "t.q4k");
  const auto& tf = g.tensor("t.f32");
  EXPECT_EQ(tf.ggml_type(), GGMLType::F32);
  EXPECT_EQ(tf.dims, (std::vector<int64_t>{5}));
  EXPECT_EQ(tf.nbytes, 20u);
  float back[5];
  std::memcpy(back, tf.data, 20);
  EXPECT_EQ(back[2], 3.5f);
  EXPECT_EQ(back[4], 7.0f);
  const auto& th = g.tensor("t.f16");
  EXPECT_EQ(th.dims, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(th.n_elements(), 24);
  EXPECT_EQ(th.nbytes, 48u);
  EXPECT_EQ(th.data[47], static_cast<uint8_t>(47 * 3));
  const auto& tq = g.tensor("t.q8");
  EXPECT_EQ(tq.ggml_type(), GGMLType::Q8_0);
  EXPECT_EQ(tq.nbytes, 6u * 34u);
  const auto& t4 = g.tensor("t.q4k");
  EXPECT_EQ(t4.dims, (std::vector<int64_t>{256, 2, 1, 2}));
  EXPECT_EQ(t4.nbytes, 576u);
  EXPECT_EQ(t4.data[575], static_cast<uint8_t>(575 % 256));
  for (const auto& t : g.tensors()) {
    EXPECT_EQ(t.offset % alignment, 0u) << t.name;
    EXPECT_EQ(t.data - tf.data, static_cast<std::ptrdiff_t>(t.offset)) << t.name;
  }
  EXPECT_EQ(g.data_offset() % alignment, 0u);
}

TEST(GGUFRoundTrip, EveryValueTypeDefaultAlignment) {
  const auto bytes = full_writer(32).to_bytes();
  const GGUFFile g = GGUFFile::from_memory(bytes, "rt.gguf");
  EXPECT_EQ(g.path(), "rt.gguf");
  EXPECT_EQ(g.file_size(), bytes.size());
  EXPECT_FALSE(g.has("general.alignment"));
  check_full(g, 32);
}

TEST(GGUFRoundTrip, CustomAlignments) {
  for (uint32_t a : {1u, 8u, 64u, 4096u}) {
    SCOPED_TRACE(a);
    const auto bytes = full_writer(a).to_bytes();
    const GGUFFile g = GGUFFile::from_memory(bytes);
    if (a != 32) {
      EXPECT_EQ(g.get_u64("general.alignment"), a);
    }
    check_full(g, a);
  }
}

TEST(GGUFRoundTrip, WriteAndOpenFromDisk) {
  const auto dir = std::filesystem::temp_directory_path() / ("snapkv_gguf_rt_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "full.gguf").string();
  const GGUFWriter w = full_writer(64);
  const uint64_t n = w.write(path);
  EXPECT_EQ(n, std::filesystem::file_size(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  {
    GGUFFile g = GGUFFile::open(path);
    EXPECT_EQ(g.path(), path);
    check_full(g, 64);
    // Identical to the in-memory image.
    const auto bytes = w.to_bytes();
    ASSERT_EQ(bytes.size(), n);
    EXPECT_EQ(std::memcmp(g.tensors()[0].data - g.data_offset() - g.tensors()[0].offset, bytes.data(), n), 0);
    // Moving keeps views valid.
    GGUFFile moved = std::move(g);
    EXPECT_EQ(moved.get_string_array("a.str")[0], "<unk>");
  }
  std::filesystem::remove_all(dir);
}

TEST(GGUFRoundTrip, OpenErrors) {
  const std::string missing = "/nonexistent/dir/model.gguf";
  std::string msg = error_of([&] { (void)GGUFFile::open(missing); });
  EXPECT_EQ(msg.rfind(missing + ": cannot open", 0), 0u) << msg;
  msg = error_of([] { (void)GGUFFile::open(std::filesystem::temp_directory_path().string()); });
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
  // A FIFO with no writer: refused at once (opening it blocked forever before).
  const auto fifo = std::filesystem::temp_directory_path() / ("snapkv_fifo_" + std::to_string(::getpid()) + ".gguf");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  msg = error_of([&] { (void)GGUFFile::open(fifo.string()); });
  std::filesystem::remove(fifo);
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
  const auto empty = std::filesystem::temp_directory_path() / ("snapkv_empty_" + std::to_string(::getpid()) + ".gguf");
  {
    std::FILE* f = std::fopen(empty.c_str(), "wb");
    std::fclose(f);
  }
  msg = error_of([&] { (void)GGUFFile::open(empty.string()); });
  EXPECT_NE(msg.find("magic"), std::string::npos) << msg;
  std::filesystem::remove(empty);
  msg = error_of([] { full_writer(32).write("/nonexistent/dir/out.gguf"); });
  EXPECT_NE(msg.find("/nonexistent/dir/out.gguf.tmp: cannot create"), std::string::npos) << msg;
}

TEST(GGUFGetters, ErrorsNameKeyTypeAndValue) {
  GGUFWriter w;
  w.add_i32("neg", -1);
  w.add_u64("big", std::numeric_limits<uint64_t>::max());
  w.add_string("s", "text");
  w.add_u8("byte", 1);
  w.add_f32("f", 2.5f);
  w.add_i32_array("ints", {1, 2});
  w.add("bigs", V::array(T::UINT64, {V::u64(1), V::u64(std::numeric_limits<uint64_t>::max())}));
  w.add("nested", V::array(T::ARRAY, {V::array(T::INT32, {})}));
  const auto bytes = w.to_bytes();
  const GGUFFile g = GGUFFile::from_memory(bytes, "m.gguf");

  EXPECT_EQ(error_of([&] { g.get_u64("nope"); }), "m.gguf: metadata key 'nope' is missing");
  EXPECT_EQ(error_of([&] { g.get_u64("neg"); }), "m.gguf: metadata key 'neg' value -1 out of range");
  EXPECT_EQ(error_of([&] { g.get_i64("big"); }), "m.gguf: metadata key 'big' value 18446744073709551615 out of range");
  EXPECT_EQ(error_of([&] { g.get_u64("s"); }), "m.gguf: metadata key 's' has type string, expected an integer");
  EXPECT_EQ(error_of([&] { g.get_u64("f"); }), "m.gguf: metadata key 'f' has type float32, expected an integer");
  EXPECT_EQ(error_of([&] { g.get_f64("s"); }), "m.gguf: metadata key 's' has type string, expected a number");
  EXPECT_EQ(error_of([&] { g.get_bool("byte"); }), "m.gguf: metadata key 'byte' has type uint8, expected a bool");
  EXPECT_EQ(error_of([&] { g.get_string("byte"); }), "m.gguf: metadata key 'byte' has type uint8, expected a string");
  EXPECT_EQ(error_of([&] { g.get_string_array("ints"); }),
            "m.gguf: metadata key 'ints' has type array of int32, expected an array of string");
  EXPECT_EQ(error_of([&] { g.get_i64_array("s"); }),
            "m.gguf: metadata key 's' has type string, expected an array of integers");
  EXPECT_EQ(error_of([&] { g.get_f32_array("nested"); }),
            "m.gguf: metadata key 'nested' has type array of array, expected an array of numbers");
  EXPECT_EQ(error_of([&] { g.get_i64_array("bigs"); }),
            "m.gguf: metadata key 'bigs' element 1 value 18446744073709551615 out of range");
  EXPECT_EQ(error_of([&] { g.tensor("w"); }), "m.gguf: tensor 'w' is missing");

  EXPECT_EQ(g.get_i64("neg"), -1);
  EXPECT_EQ(g.get_f64("neg"), -1.0);
  EXPECT_EQ(g.get_f64("byte"), 1.0);
  EXPECT_EQ(g.get_u64("byte"), 1u);
  EXPECT_EQ(g.get_f64("f"), 2.5);
  EXPECT_FALSE(g.get_u64_opt("nope").has_value());
  EXPECT_FALSE(g.get_f64_opt("nope").has_value());
  EXPECT_FALSE(g.get_bool_opt("nope").has_value());
  EXPECT_FALSE(g.get_string_opt("nope").has_value());
  EXPECT_EQ(g.get_u64_opt("byte"), 1u);
  EXPECT_EQ(g.get_string_opt("s"), "text");
  EXPECT_NE(error_of([&] { g.get_u64_opt("s"); }), "");  // present with the wrong type still throws
  EXPECT_EQ(g.find_tensor("w"), nullptr);
  EXPECT_TRUE(g.tensors().empty());
  EXPECT_TRUE(g.find("ints")->is_integer() == false);
  EXPECT_TRUE(g.find("byte")->is_integer());
  EXPECT_TRUE(g.find("f")->is_float());
  EXPECT_STREQ(gguf_value_type_name(T::FLOAT64), "float64");
}

TEST(GGUFWriter, RejectsBadInput) {
  EXPECT_NE(error_of([] { GGUFWriter w(0); }).find("alignment=0"), std::string::npos);
  EXPECT_NE(error_of([] { GGUFWriter w(24); }).find("alignment=24"), std::string::npos);
  GGUFWriter w;
  w.add_u32("k", 1);
  EXPECT_NE(error_of([&] { w.add_u32("k", 2); }).find("duplicate metadata key (key=k)"), std::string::npos);
  EXPECT_NE(error_of([&] { w.add_u32("general.alignment", 64); }), "");
  EXPECT_NE(error_of([&] { w.add_u32(std::string(65536, 'k'), 1); }).find("key length=65536"), std::string::npos);
  EXPECT_NE(error_of([] {
              V::array(T::INT32, {V::i32(1), V::u32(2)});
            }).find("element 1 has type uint32"),
            std::string::npos);
  const std::vector<float> x(32, 1.0f);
  w.add_tensor_f32("x", {32}, x);
  EXPECT_NE(error_of([&] { w.add_tensor_f32("x", {32}, x); }).find("duplicate tensor (name=x)"), std::string::npos);
  EXPECT_NE(error_of([&] { w.add_tensor_f32("y", {31}, x); }).find("expected 124"), std::string::npos);
  EXPECT_NE(error_of([&] { w.add_tensor_f32("y", {32, 0}, x); }).find("dims[1]=0"), std::string::npos);
  EXPECT_NE(error_of([&] { w.add_tensor_f32("y", {}, x); }).find("n_dims=0"), std::string::npos);
  EXPECT_NE(error_of([&] { w.add_tensor("y", GGMLType::Q8_0, {16}, std::vector<uint8_t>(17)); }).find("block size"),
            std::string::npos);
}

TEST(Q8_0, MatchesTheGgmlReferenceFormula) {
  std::vector<float> x(64);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16) * 0.25f;  // amax 4.0 at j = 0
  for (int j = 32; j < 64; ++j) x[j] = 0.0f;                               // all-zero block
  const auto q = quantize_q8_0(x.data(), 64);
  ASSERT_EQ(q.size(), 68u);
  uint16_t dh;
  std::memcpy(&dh, q.data(), 2);
  EXPECT_EQ(dh, fp32_to_fp16(4.0f / 127.0f));
  const float d = fp16_to_fp32(dh);
  for (int j = 0; j < 32; ++j) {
    const auto qj = static_cast<int8_t>(q[2 + j]);
    EXPECT_EQ(qj, static_cast<int8_t>(std::lround(x[j] * (127.0f / 4.0f)))) << j;
    EXPECT_NEAR(qj * d, x[j], 4.0f / 127.0f * 0.5f + 4.0f * 1e-3f) << j;
  }
  EXPECT_EQ(static_cast<int8_t>(q[2]), -127);  // the extreme maps to -127 exactly
  std::memcpy(&dh, q.data() + 34, 2);
  EXPECT_EQ(dh, 0u);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(q[36 + j], 0u);
  EXPECT_NE(error_of([&] { quantize_q8_0(x.data(), 40); }).find("n=40"), std::string::npos);
}

TEST(Q8_0, BitExactWithGgufPy) {
  // Reference bytes from gguf-py's Q8_0.quantize_blocks (bit-exact port of ggml's quantize_row_q8_0_ref)
  // for x[k] = ((k * 37) % 101 - 50) / 7.3f, with x[64..79] scaled by 0.001f.
  std::vector<float> x(96);
  for (int k = 0; k < 96; ++k) {
    x[k] = static_cast<float>((k * 37) % 101 - 50) / 7.3f;
    if (k >= 64 && k < 80) x[k] *= 0.001f;
  }
  const std::string expect =
      "e72a81df3d9af856b41270cd2b89e745a2005ebb1977d53390ee4caa0866c3217fdcc42a3c96f656b0106fca2984e3439efd5db71777d1"
      "318beb4ba50565bf1f7fd93993a12a00000000000000000000000000000000ce3086e84aa10365bb1d7fd6388ef052";
  const auto q = quantize_q8_0(x.data(), 96);
  std::string hex;
  for (uint8_t b : q) hex += fmt::format("{:02x}", b);
  EXPECT_EQ(hex, expect);
}

}  // namespace
}  // namespace snapkv
