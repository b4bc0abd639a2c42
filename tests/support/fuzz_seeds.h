// snapkv: the small writer-made GGUF files that seed the GGUF parser fuzzer (fuzz/run.sh). They are
// generated at fuzz (and test) time, not committed: tools/make_fuzz_seeds is the command line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace snapkv {

/// One seed: its file name (e.g. "all_types.gguf") and its complete GGUF bytes.
struct FuzzSeed {
  std::string name;
  std::vector<uint8_t> bytes;
};

/// The six seeds, each a valid GGUF file under 8 KiB, in a fixed order:
///   empty.gguf         v3, no metadata, no tensors;
///   all_types.gguf     v3, one key "t.<type>" of every scalar type, string/f32/i32 arrays, a nested
///                      array "t.nested" (2 inner arrays), tensors "f32" (F32 8x8) and "q8" (Q8_0 32x2);
///   all_types_v2.gguf  the same bytes with version 2;
///   alignment64.gguf   general.alignment 64, tensors "f16" {4,2,2}, "q4k" {256}, "i32" {3,1,1,2};
///   vocab.gguf         a 64-token "gpt2" tokenizer (tokens, scores, types, merges), no tensors;
///   tiny_llama.gguf    a llama-shaped model: n_embd 32, 1 layer, 2 heads, 7 tensors (F32 and Q8_0).
/// Deterministic: the same bytes on every call.
std::vector<FuzzSeed> make_fuzz_seeds();

/// Writes make_fuzz_seeds() into the existing directory `dir` (overwriting files of the same names) and
/// returns the paths written, in the same order. Throws snapkv::Error naming the path if `dir` is not
/// a directory or a file cannot be written.
std::vector<std::string> write_fuzz_seeds(const std::string& dir);

}  // namespace snapkv
