// make_synthetic_gguf: writes a Llama-architecture GGUF with random (seeded) Q8_0 weights and a byte-level
// vocabulary. Default shapes = SmolLM2-135M with a 32K context. The generator is
// snapkv::write_synthetic_model (include/support/synthetic_model.h); this is only its command line.
//
//   make_synthetic_gguf -o synthetic.gguf [--seed 1234] [--n-layer 30] [--n-embd 576] ...
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

#include "snapkv/error.h"
#include "support/synthetic_model.h"

int main(int argc, char** argv) {
  snapkv::SyntheticModelConfig cfg;
  std::string out = "synthetic-smollm2-135m-q8_0.gguf";
  CLI::App app{"Write a synthetic Llama GGUF (random Q8_0 weights; default shapes: SmolLM2-135M, 32K context)"};
  app.add_option("-o,--output", out, "output GGUF file")->capture_default_str();
  app.add_option("--seed", cfg.seed, "random seed for the weights")->capture_default_str();
  app.add_option("--n-layer", cfg.n_layer, "transformer blocks")->capture_default_str();
  app.add_option("--n-head", cfg.n_head, "query heads")->capture_default_str();
  app.add_option("--n-head-kv", cfg.n_head_kv, "key/value heads (must divide --n-head)")->capture_default_str();
  app.add_option("--head-dim", cfg.head_dim, "size of one attention head")->capture_default_str();
  app.add_option("--n-embd", cfg.n_embd, "model width (multiple of 32)")->capture_default_str();
  app.add_option("--n-ff", cfg.n_ff, "feed-forward hidden size (multiple of 32)")->capture_default_str();
  app.add_option("--n-vocab", cfg.n_vocab, "vocabulary size (> 259)")->capture_default_str();
  app.add_option("--n-ctx", cfg.n_ctx, "llama.context_length")->capture_default_str();
  app.add_option("--rope-base", cfg.rope_base, "llama.rope.freq_base")->capture_default_str();
  app.add_option("--rms-eps", cfg.rms_eps, "llama.attention.layer_norm_rms_epsilon")->capture_default_str();
  app.add_option("--weight-std", cfg.weight_std, "standard deviation of the random weights")->capture_default_str();
  app.add_option("--name", cfg.name, "general.name")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t bytes = snapkv::write_synthetic_model(cfg, out);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("wrote %s: %llu bytes (%.1f MB) in %.2f s\n", out.c_str(), static_cast<unsigned long long>(bytes),
                static_cast<double>(bytes) / 1e6, s);
  } catch (const snapkv::Error& e) {
    std::fprintf(stderr, "make_synthetic_gguf: %s\n", e.what());
    return 1;
  }
  return 0;
}
