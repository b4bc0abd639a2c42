// Corrupted GGUF images: each must throw snapkv::Error with a message naming the file and the
// offending field and value — never crash or read out of bounds (this suite also runs under ASan).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "raw_gguf.h"
#include "support/gguf_writer.h"

namespace snapkv::test {
namespace {

/// Expects parsing to fail with a message starting "bad.gguf: " and containing every `parts` entry.
void expect_error(const RawFile& f, std::initializer_list<std::string> parts) {
  const std::string msg = parse_error(f.encode());
  ASSERT_FALSE(msg.empty()) << "parsed although corrupt";
  EXPECT_EQ(msg.rfind("bad.gguf: ", 0), 0u) << msg;
  for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

TEST(GGUFCorrupt, TinyValidFileParses) {
  const RawFile f = tiny_valid_file();
  const auto bytes = f.encode();
  const GGUFFile g = GGUFFile::from_memory(bytes, "tiny.gguf");
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.metadata().size(), f.kvs.size());
  EXPECT_EQ(g.get_u64("t.u8"), 200u);
  EXPECT_EQ(g.get_i64("t.i16"), -30000);
  const GGUFValue* nested = g.find("t.nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->arr.size(), 2u);
  EXPECT_EQ(nested->elem_type, GGUFValueType::ARRAY);
  ASSERT_EQ(nested->arr[0].arr.size(), 2u);
  EXPECT_EQ(nested->arr[0].arr[0].str, "ab");
  EXPECT_EQ(nested->arr[0].arr[1].str, "c");
  EXPECT_EQ(nested->arr[1].arr.size(), 0u);
  EXPECT_EQ(g.get_i64_array("t.arr_i32"), (std::vector<int64_t>{1, -2, 3}));
  ASSERT_EQ(g.tensors().size(), 2u);
  EXPECT_EQ(g.tensor("a").nbytes, 68u);
  EXPECT_EQ(g.tensor("b").nbytes, 16u);
  EXPECT_EQ(g.data_offset() % 32, 0u);
  EXPECT_EQ(g.data_offset() + 96 + 16, bytes.size());
  EXPECT_EQ(g.tensor("b").data, g.tensor("a").data + 96);
  EXPECT_EQ(g.tensor("a").data[0], 1);  // pattern byte 0
}

TEST(GGUFCorrupt, EveryTruncationThrows) {
  const auto bytes = tiny_valid_file().encode();
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    const std::string msg = parse_error(cut);
    ASSERT_FALSE(msg.empty()) << "prefix of " << n << " bytes parsed";
    EXPECT_EQ(msg.rfind("bad.gguf: ", 0), 0u) << msg;
    const bool names_cause = msg.find("unexpected end of file") != std::string::npos ||
                             msg.find("past end of file") != std::string::npos ||
                             msg.find("exceeds the rest of the file") != std::string::npos ||
                             msg.find("too large for the file size") != std::string::npos;
    EXPECT_TRUE(names_cause) << n << ": " << msg;
  }
}

TEST(GGUFCorrupt, EveryTruncationOfAWriterFileThrows) {
  GGUFWriter w(64);
  w.add_string("general.architecture", "llama");
  w.add("nested", GGUFWriterValue::array(GGUFValueType::ARRAY,
                                         {GGUFWriterValue::array(GGUFValueType::FLOAT64, {GGUFWriterValue::f64(1.0)}),
                                          GGUFWriterValue::array(GGUFValueType::UINT16, {GGUFWriterValue::u16(3)})}));
  w.add_string_array("words", {"x", "yy", ""});
  const std::vector<float> v(64, 0.5f);
  w.add_tensor_f32("w", {64}, v);
  const auto bytes = w.to_bytes();
  const GGUFFile g = GGUFFile::from_memory(bytes);
  const uint64_t end = g.data_offset() + g.tensor("w").offset + g.tensor("w").nbytes;
  ASSERT_LE(end, bytes.size());
  for (size_t n = 0; n < end; ++n) {
    const std::string msg = parse_error(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(n)));
    EXPECT_FALSE(msg.empty()) << "prefix of " << n << " bytes parsed";
  }
}

TEST(GGUFCorrupt, EmptyInput) {
  const std::string msg = parse_error({});
  EXPECT_NE(msg.find("magic"), std::string::npos) << msg;
}

TEST(GGUFCorrupt, BadMagic) {
  RawFile f = tiny_valid_file();
  f.magic = 0x58554747u;  // "GGUX"
  expect_error(f, {"bad magic", "magic=0x58554747", "GGUX"});
}

TEST(GGUFCorrupt, UnsupportedVersions) {
  RawFile f = tiny_valid_file();
  f.version = 1;
  expect_error(f, {"unsupported GGUF version 1", "version=1"});
  f.version = 4;
  expect_error(f, {"unsupported GGUF version 4", "version=4"});
  f.version = 0x03000000u;  // a big-endian v3 file read as little-endian
  expect_error(f, {"big-endian", "version=0x03000000"});
  f.version = 2;  // v2 has the same layout as v3
  EXPECT_EQ(parse_error(f.encode()), "");
}

TEST(GGUFCorrupt, HugeCounts) {
  RawFile f = tiny_valid_file();
  f.n_kv = 1ull << 62;
  expect_error(f, {"kv_count=4611686018427387904"});
  f = tiny_valid_file();
  f.n_tensors = ~0ull;
  expect_error(f, {"tensor_count=18446744073709551615"});
  f = tiny_valid_file();
  f.n_tensors = 1000;  // small enough to pass the size bound? no: 1000 * 32 bytes > file
  expect_error(f, {"tensor_count=1000"});
  f = tiny_valid_file();
  f.n_kv = f.kvs.size() + 1;  // one entry more than present: runs into the tensor infos
  const std::string msg = parse_error(f.encode());
  EXPECT_FALSE(msg.empty());
}

TEST(GGUFCorrupt, HugeStringLengths) {
  Bytes b;  // one metadata entry whose key claims 2^60 bytes
  b.u32(0x46554747u).u32(3).u64(0).u64(1).u64(1ull << 60).u64(0).u64(0);
  EXPECT_NE(parse_error(b.b).find("length=1152921504606846976"), std::string::npos) << parse_error(b.b);

  RawFile f = tiny_valid_file();
  f.kvs[0].payload = Bytes().u64(~0ull).b;  // value string length 2^64 - 1
  expect_error(f, {"general.architecture", "length=18446744073709551615"});

  f = tiny_valid_file();
  f.kvs[1].key = std::string(70000, 'k');
  expect_error(f, {"key length=70000"});

  f = tiny_valid_file();
  f.kvs[1].key = "";
  expect_error(f, {"empty key", "key length=0"});
}

TEST(GGUFCorrupt, UnknownValueTypes) {
  RawFile f = tiny_valid_file();
  f.kvs[1].type = 13;
  expect_error(f, {"t.u8", "unknown value type", "type=13"});
  f = tiny_valid_file();
  f.kvs[1].type = 0xffffffffu;
  expect_error(f, {"type=4294967295"});
  f = tiny_valid_file();
  f.kvs.back().payload = Bytes().u32(42).u64(0).b;
  expect_error(f, {"t.arr_i32", "elem_type=42"});
}

TEST(GGUFCorrupt, ArrayLengthAndDepth) {
  RawFile f = tiny_valid_file();
  f.kvs.back().payload = Bytes().u32(5).u64(1ull << 40).b;
  expect_error(f, {"t.arr_i32", "length=1099511627776"});
  f = tiny_valid_file();
  f.kvs.back().payload = Bytes().u32(8).u64(~0ull / 2).b;
  expect_error(f, {"t.arr_i32", "length=9223372036854775807"});

  // 8 nested levels parse, 9 do not.
  const auto nested = [](int levels) {
    Bytes b;
    for (int k = 0; k < levels - 1; ++k) b.u32(9).u64(1);
    b.u32(0).u64(1).u8(7);
    return b.b;
  };
  f = tiny_valid_file();
  f.kvs.back().payload = nested(8);
  ASSERT_EQ(parse_error(f.encode()), "");
  const GGUFFile g = GGUFFile::from_memory(f.encode());
  const GGUFValue* v = g.find("t.arr_i32");
  for (int k = 0; k < 7; ++k) v = &v->arr.at(0);
  EXPECT_EQ(v->elem_type, GGUFValueType::UINT8);
  EXPECT_EQ(v->arr.at(0).u, 7u);
  f.kvs.back().payload = nested(9);
  expect_error(f, {"t.arr_i32", "depth=9"});
}

TEST(GGUFCorrupt, BadBool) {
  RawFile f = tiny_valid_file();
  f.kvs[8].payload = Bytes().u8(2).b;
  expect_error(f, {"t.bool", "value=2"});
}

TEST(GGUFCorrupt, DuplicateKeyAndTensor) {
  RawFile f = tiny_valid_file();
  f.kvs[2].key = "t.u8";
  expect_error(f, {"duplicate metadata key 't.u8'", "key=t.u8"});
  f = tiny_valid_file();
  f.tensors[1].name = "a";
  expect_error(f, {"duplicate tensor name 'a'", "name=a"});
}

TEST(GGUFCorrupt, TensorInfoFields) {
  RawFile f = tiny_valid_file();
  f.tensors[0].name = "";
  expect_error(f, {"empty name", "name length=0"});

  for (uint32_t nd : {0u, 5u, 1000u}) {
    f = tiny_valid_file();
    f.tensors[0].n_dims = nd;
    expect_error(f, {"tensor 'a'", "n_dims=" + std::to_string(nd)});
  }
  f = tiny_valid_file();
  f.tensors[0].dims = {32, 0};
  expect_error(f, {"tensor 'a'", "dims[1]=0"});
  f = tiny_valid_file();
  f.tensors[0].dims = {1ull << 63, 1};
  expect_error(f, {"tensor 'a'", "dims[0]=9223372036854775808"});
  f = tiny_valid_file();
  f.tensors[0].n_dims = 3;
  f.tensors[0].dims = {1ull << 32, 1ull << 32, 1ull << 32};
  expect_error(f, {"tensor 'a'", "element count overflows", "dims=[4294967296, 4294967296]"});
  f = tiny_valid_file();
  f.tensors[1].dims = {1ull << 62};  // 2^62 F32 elements = 2^64 bytes
  expect_error(f, {"tensor 'b'", "byte size overflows"});
  f = tiny_valid_file();
  f.tensors[0].dims = {33, 2};
  expect_error(f, {"tensor 'a'", "Q8_0 block size 32", "dims[0]=33"});
}

TEST(GGUFCorrupt, UnknownTensorType) {
  for (uint32_t t : {4u, 5u, 31u, 99u, 0xffffffffu}) {
    RawFile f = tiny_valid_file();
    f.tensors[0].type = t;
    expect_error(f, {"tensor 'a'", "unknown tensor type", "type=" + std::to_string(t)});
  }
}

TEST(GGUFCorrupt, OffsetsAndRanges) {
  RawFile f = tiny_valid_file();
  f.tensors[1].offset = 100;
  expect_error(f, {"tensor 'b'", "not a multiple of the alignment 32", "offset=100"});
  f = tiny_valid_file();
  f.tensors[1].offset = 128;  // aligned, but 128 + 16 > 112 data bytes
  const auto bytes = f.encode();
  const std::string msg = parse_error(bytes);
  EXPECT_NE(msg.find("tensor 'b' data [offset "), std::string::npos) << msg;
  EXPECT_NE(msg.find("16 bytes] extends past end of file (size " + std::to_string(bytes.size()) + ")"),
            std::string::npos)
      << msg;
  f = tiny_valid_file();
  f.tensors[1].offset = ~0ull - 31;  // aligned, offset + size overflows
  expect_error(f, {"tensor 'b'", "past end of file", "offset=18446744073709551584"});
  f = tiny_valid_file();
  f.data_bytes = 96 + 15;  // last tensor one byte short
  expect_error(f, {"tensor 'b'", "extends past end of file"});
}

TEST(GGUFCorrupt, Alignment) {
  const auto with_alignment = [](uint32_t type, std::vector<uint8_t> payload) {
    RawFile f = tiny_valid_file();
    f.kvs.insert(f.kvs.begin(), RawKV{"general.alignment", type, std::move(payload)});
    return f;
  };
  expect_error(with_alignment(4, payload_u32(0)), {"general.alignment=0"});
  expect_error(with_alignment(4, payload_u32(48)), {"power of two", "general.alignment=48"});
  expect_error(with_alignment(10, Bytes().u64(32).b), {"general.alignment", "type=uint64"});
  expect_error(with_alignment(8, payload_str("32")), {"general.alignment", "type=string"});
  // A valid larger alignment moves the data section and is enforced on the offsets.
  RawFile f = with_alignment(4, payload_u32(64));
  f.alignment = 64;
  expect_error(f, {"tensor 'b'", "alignment 64", "offset=96"});
  f.tensors[1].offset = 128;
  f.data_bytes = 128 + 16;
  const auto bytes = f.encode();
  const GGUFFile g = GGUFFile::from_memory(bytes);
  EXPECT_EQ(g.alignment(), 64u);
  EXPECT_EQ(g.data_offset() % 64, 0u);
  EXPECT_EQ(g.data_offset() + 128 + 16, bytes.size());
}

TEST(GGUFCorrupt, SingleByteFlipsNeverCrash) {
  // Not every flip is invalid (e.g. inside a string), but none may crash; run under ASan in CI.
  const auto bytes = tiny_valid_file().encode();
  int errors = 0;
  for (size_t k = 0; k < bytes.size(); ++k) {
    for (uint8_t x : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
      auto b = bytes;
      b[k] ^= x;
      errors += parse_error(b).empty() ? 0 : 1;
    }
  }
  EXPECT_GT(errors, 100);
}

}  // namespace
}  // namespace snapkv::test
