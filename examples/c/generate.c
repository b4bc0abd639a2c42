/* snapkv C example: load a GGUF model, tokenize a prompt and stream a greedy continuation.
 *
 *   generate MODEL.gguf "PROMPT" [N_PREDICT=64] [PRESS=none]
 *
 * PRESS is a press spec such as "snapkv:budget=256"; statistics go to stderr. */
#include <snapkv/snapkv_c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int print_token(void* user, int32_t token, const char* text, size_t len) {
  (void)user;
  (void)token;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  return 0; /* nonzero would stop the generation */
}

static int fail(const char* what, snapkv_status st) {
  fprintf(stderr, "generate: %s failed (%s): %s\n", what, snapkv_status_name(st), snapkv_last_error());
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N_PREDICT] [PRESS]\n", argv[0]);
    return 2;
  }
  const char* model = argv[1];
  const char* prompt = argv[2];
  const long n_predict = argc > 3 ? strtol(argv[3], NULL, 10) : 64;
  const char* press = argc > 4 ? argv[4] : NULL;

  snapkv_engine* engine = NULL;
  snapkv_status st = snapkv_engine_load(model, 0, &engine);
  if (st != SNAPKV_OK) return fail("loading the model", st);

  /* Tokenize: ask for the size, then fill a buffer of that size. */
  size_t n_tokens = 0;
  st = snapkv_tokenize(engine, prompt, strlen(prompt), 1, 0, NULL, 0, &n_tokens);
  if (st != SNAPKV_OK && st != SNAPKV_ERR_BUFFER_TOO_SMALL) return fail("tokenizing", st);
  int32_t* tokens = malloc((n_tokens > 0 ? n_tokens : 1) * sizeof *tokens);
  if (tokens == NULL) return 1;
  st = snapkv_tokenize(engine, prompt, strlen(prompt), 1, 0, tokens, n_tokens, &n_tokens);
  if (st != SNAPKV_OK) return fail("tokenizing", st);

  snapkv_sequence* seq = NULL;
  st = snapkv_sequence_new(engine, 0, SNAPKV_KV_F16, &seq);
  if (st != SNAPKV_OK) return fail("creating a sequence", st);

  snapkv_generate_params params = snapkv_generate_params_default();
  params.n_predict = n_predict;
  params.temp = 0.0f; /* greedy: the same text every run */
  params.press = press;
  snapkv_generate_result result;
  fputs(prompt, stdout);
  st = snapkv_generate(seq, tokens, n_tokens, &params, print_token, NULL, &result);
  putchar('\n');
  if (st != SNAPKV_OK) return fail("generating", st);

  snapkv_stats stats;
  snapkv_sequence_stats(seq, &stats);
  fprintf(stderr, "%lld tokens (%s), %.1f tokens/s; KV cache %llu of %llu bytes (press %s)\n",
          (long long)result.n_tokens, snapkv_stop_reason_name(result.stop_reason), result.decode_tokens_per_s,
          (unsigned long long)stats.kv_cache_bytes, (unsigned long long)stats.kv_cache_bytes_full, stats.press);

  free(tokens);
  snapkv_sequence_free(seq);
  snapkv_engine_free(engine);
  return 0;
}
