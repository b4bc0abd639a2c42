// snapkv C++ example: load a GGUF model, stream a greedy continuation of a prompt, optionally
// with the prompt's KV cache compressed by a press.
//
//   generate MODEL.gguf "PROMPT" [N_PREDICT=64] [PRESS=none]
//
// PRESS is a press spec such as "snapkv:budget=256"; statistics go to stderr.
#include <snapkv/snapkv.h>

#include <cstdio>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    std::cerr << "usage: " << argv[0] << " MODEL.gguf PROMPT [N_PREDICT] [PRESS]\n";
    return 2;
  }
  try {
    auto engine = snapkv::Engine::load(argv[1]);
    snapkv::Workspace ws(*engine);  // scratch memory and threads of this worker
    auto seq = engine->new_sequence({});
    const std::string prompt = argv[2];
    const auto ids = engine->tokenizer().encode(prompt, /*add_special=*/true, /*parse_special=*/false);

    snapkv::GenerateOptions opt;
    opt.n_predict = argc > 3 ? std::stoll(argv[3]) : 64;
    opt.sampling.temp = 0;  // greedy: the same text every run
    if (argc > 4) opt.press = snapkv::PressSpec::parse(argv[4]);
    opt.on_token = [](int32_t, std::string_view text) {
      std::cout << text << std::flush;
      return true;  // false would stop the generation
    };
    std::cout << prompt;
    const snapkv::GenerateResult r = snapkv::generate(*engine, *seq, ids, {}, opt, ws);
    std::cout << '\n';
    const snapkv::SequenceStats& st = seq->stats();
    std::fprintf(stderr, "%zu tokens (%s), %.1f tokens/s; KV cache %zu of %zu bytes (press %s)\n", r.tokens.size(),
                 snapkv::stop_reason_name(r.stop_reason), r.decode_tokens_per_s, st.kv_cache_bytes,
                 st.kv_cache_bytes_full, st.press.c_str());
  } catch (const snapkv::Error& e) {  // bad file, bad press spec, prompt too long, ...
    std::cerr << "generate: " << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "generate: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
