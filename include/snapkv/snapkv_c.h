/* snapkv: the C API — a stable, exception-free interface over the C++ library, for C programs
 * and for bindings from other languages (Python ctypes, Rust, Go, ...).
 *
 *   snapkv_engine* e;
 *   if (snapkv_engine_load("model.gguf", 0, &e) != SNAPKV_OK) { puts(snapkv_last_error()); ... }
 *   snapkv_sequence* s;
 *   snapkv_sequence_new(e, 0, SNAPKV_KV_F16, &s);
 *   int32_t ids[256]; size_t n;
 *   snapkv_tokenize(e, "Once upon a time", 16, 1, 0, ids, 256, &n);
 *   snapkv_generate_params p = snapkv_generate_params_default();
 *   p.press = "snapkv:budget=1024";
 *   snapkv_generate_result r;
 *   snapkv_generate(s, ids, n, &p, my_callback, my_data, &r);
 *   snapkv_sequence_free(s);
 *   snapkv_engine_free(e);
 *
 * Errors. Every function that can fail returns a snapkv_status. SNAPKV_OK is 0; on any other
 * status the function changed none of its outputs (except the size of a too-small buffer, see
 * below) and snapkv_last_error() returns a one-line message saying what was wrong. No C++
 * exception ever leaves this API, and no bad argument aborts the process: null handles and
 * pointers, handles of the wrong kind (each handle carries a tag of its kind, cleared when it is
 * freed), bad paths, bad press specs, out-of-range token ids and too-small buffers are all
 * reported as statuses. (A dangling pointer to memory already reused cannot be detected.)
 *
 * Buffers. Functions that fill a caller buffer take its capacity and report the size they need
 * through an out-parameter. If the buffer is too small they return SNAPKV_ERR_BUFFER_TOO_SMALL,
 * set the size out-parameter to the size needed and write nothing else: call once with
 * capacity 0 (buffer may then be NULL) to ask for the size.
 *
 * Ownership. Objects are made by snapkv_*_new / snapkv_engine_load and released by the matching
 * snapkv_*_free (which accepts NULL). A sequence keeps its engine's model alive: an engine may
 * be freed before its sequences. Pointers returned by the library (logits, strings) point into
 * the object they came from; each function says how long they stay valid.
 *
 * Thread-safety. An engine is immutable after loading: every function on it, and calls on
 * different sequences of it, may run in different threads at once (each call that runs the
 * model borrows a scratch workspace from a pool inside the engine, so concurrent calls never
 * share scratch memory; each uses the engine's n_threads OpenMP threads; the pool keeps as many
 * workspaces as calls ever ran at once, each about 512 rows of activations, until the engine
 * handle and all its sequences are freed). A sequence or a sampler must be used by one thread at
 * a time. A handle must not be freed while another thread uses it (sequences keep their engine's
 * model, so freeing the engine handle while its sequences run elsewhere is fine).
 * snapkv_last_error() is per thread.
 */
#ifndef SNAPKV_SNAPKV_C_H
#define SNAPKV_SNAPKV_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from the shared library. */
#if defined(_WIN32)
#define SNAPKV_API
#else
#define SNAPKV_API __attribute__((visibility("default")))
#endif
/* C++ callers see that no function throws. */
#ifdef __cplusplus
#define SNAPKV_NOEXCEPT noexcept
#else
#define SNAPKV_NOEXCEPT
#endif

/** Result of every fallible call. */
typedef enum snapkv_status {
  SNAPKV_OK = 0,
  SNAPKV_ERR_INVALID_ARGUMENT = 1, /**< null handle/pointer, bad value, bad press spec, bad token id, misuse */
  SNAPKV_ERR_IO = 2,               /**< a model file is missing, unreadable, malformed or unsupported */
  SNAPKV_ERR_OUT_OF_MEMORY = 3,    /**< an allocation failed */
  SNAPKV_ERR_CONTEXT_FULL = 4,     /**< the tokens do not fit the sequence's context (n_ctx) */
  SNAPKV_ERR_BUFFER_TOO_SMALL = 5, /**< a caller buffer is too small; the size needed was reported */
  SNAPKV_ERR_INTERNAL = 6          /**< anything else (a bug: please report the message) */
} snapkv_status;

/** Element type of the stored keys and values of a sequence's KV cache. */
typedef enum snapkv_kv_type {
  SNAPKV_KV_F16 = 0,  /**< IEEE half: 2 bytes per element (default) */
  SNAPKV_KV_F32 = 1,  /**< 4 bytes per element */
  SNAPKV_KV_Q8_0 = 2, /**< ggml Q8_0 blocks: 34 bytes per 32 elements (f16 scale + 32 int8); needs head_dim % 32 == 0 */
  SNAPKV_KV_Q4_0 = 3 /**< ggml Q4_0 blocks: 18 bytes per 32 elements (f16 scale + 32 4-bit); needs head_dim % 32 == 0 */
} snapkv_kv_type;

/** Arithmetic of prefill attention (calls with two or more query tokens); see
 *  snapkv/prefill_attention.h. Decode is always exact. */
typedef enum snapkv_prefill_attention {
  SNAPKV_PREFILL_EXACT = 0, /**< f32; with an F16 cache ggml's arithmetic (llama.cpp's logits) (default) */
  SNAPKV_PREFILL_BF16 = 1,  /**< bfloat16 products, f32 sums: 1.4-2.8x faster prefill on AVX512-BF16
                                 CPUs, KL ~0.005 nats vs exact (docs/quality.md); head_dim % 32 == 0,
                                 other models run exact */
  SNAPKV_PREFILL_INT8 = 2   /**< int8 Q K^T and P V (query / key scales per 32 dims, value scales
                                 per row, 7-bit weights per block of 64 keys), f32 softmax: for AVX2
                                 CPUs without AVX512-BF16 (docs/quality.md, docs/benchmarks.md);
                                 head_dim % 32 == 0 and <= 512, other models run exact */
} snapkv_prefill_attention;

/** Why snapkv_generate ended. */
typedef enum snapkv_stop_reason {
  SNAPKV_STOP_EOS = 0,          /**< the model produced an end-of-generation token (not in the output) */
  SNAPKV_STOP_N_PREDICT = 1,    /**< n_predict tokens were generated */
  SNAPKV_STOP_CONTEXT_FULL = 2, /**< the sequence's context is full */
  SNAPKV_STOP_STRING = 3,       /**< the text reached a stop string (cut before it) */
  SNAPKV_STOP_CANCELLED = 4     /**< the token callback returned nonzero */
} snapkv_stop_reason;

/** A loaded model and its tokenizer (opaque). */
typedef struct snapkv_engine snapkv_engine;
/** The state of one request: KV cache, positions, statistics (opaque). */
typedef struct snapkv_sequence snapkv_sequence;
/** A seeded next-token sampler (opaque). */
typedef struct snapkv_sampler snapkv_sampler;

/* ---- library ------------------------------------------------------------------------------ */

/** The library version, "MAJOR.MINOR.PATCH" (static storage). */
SNAPKV_API const char* snapkv_version(void) SNAPKV_NOEXCEPT;
/** Short name of a status: "ok", "invalid_argument", "io", "out_of_memory", "context_full",
 *  "buffer_too_small", "internal"; "unknown" for other values (static storage). */
SNAPKV_API const char* snapkv_status_name(snapkv_status status) SNAPKV_NOEXCEPT;
/** Name of a stop reason: "eos", "n_predict", "context_full", "stop", "cancelled"; "unknown"
 *  for other values (static storage). */
SNAPKV_API const char* snapkv_stop_reason_name(snapkv_stop_reason reason) SNAPKV_NOEXCEPT;
/** The message of the last call of this thread that returned a status other than SNAPKV_OK;
 *  "" if none failed yet. Valid until the next failing call of this thread. Never NULL. */
SNAPKV_API const char* snapkv_last_error(void) SNAPKV_NOEXCEPT;

/* ---- engine ------------------------------------------------------------------------------- */

/** Maps the GGUF model at `path` (memory-mapped, read-only) and loads its tokenizer.
 *  n_threads: OpenMP threads of every model call on this engine, at most 4096; 0 = every core
 *  the process may use (its affinity, capped by its cgroup's CPU limit rounded up).
 *  The threads start at the first model call; where the system cannot start them (a process,
 *  memory or pids limit), libgomp ends the process with "Thread creation failed", which no
 *  status can report: keep n_threads at or below the cores (more only slows each call down).
 *  On success *out is the new engine (free it with snapkv_engine_free).
 *  Errors: SNAPKV_ERR_INVALID_ARGUMENT (NULL path/out, bad n_threads), SNAPKV_ERR_IO (missing
 *  or unreadable file, bad GGUF, unsupported architecture or tensor type). */
SNAPKV_API snapkv_status snapkv_engine_load(const char* path, int32_t n_threads, snapkv_engine** out) SNAPKV_NOEXCEPT;
/** snapkv_engine_load with the prefill attention arithmetic of the engine's calls.
 *  Errors: those of snapkv_engine_load, and SNAPKV_ERR_INVALID_ARGUMENT for an unknown
 *  `prefill_attention` or one this library and CPU cannot run
 *  (snapkv_prefill_attention_supported returns 0). */
SNAPKV_API snapkv_status snapkv_engine_load_ex(const char* path, int32_t n_threads,
                                               snapkv_prefill_attention prefill_attention,
                                               snapkv_engine** out) SNAPKV_NOEXCEPT;
/** 1 if this library runs `prefill_attention` on this CPU (SNAPKV_PREFILL_BF16: built with and
 *  running on AVX512-BF16; SNAPKV_PREFILL_INT8: built with AVX2; SNAPKV_PREFILL_EXACT: always),
 *  else 0 (also for unknown values). */
SNAPKV_API int32_t snapkv_prefill_attention_supported(snapkv_prefill_attention prefill_attention) SNAPKV_NOEXCEPT;
/** Releases the engine handle (NULL is ignored). Sequences made by it stay usable; the model is
 *  unmapped when the last of them is freed. */
SNAPKV_API void snapkv_engine_free(snapkv_engine* engine) SNAPKV_NOEXCEPT;

/** What a user needs to know about the loaded model. Strings are valid until snapkv_engine_free. */
typedef struct snapkv_model_info {
  const char* path;      /**< the GGUF file */
  const char* arch;      /**< general.architecture ("llama", "gemma3") */
  const char* name;      /**< general.name, "" if absent */
  int32_t n_layer;       /**< transformer blocks */
  int32_t n_embd;        /**< hidden size */
  int32_t n_head;        /**< query heads */
  int32_t n_head_kv;     /**< KV heads */
  int32_t head_dim;      /**< elements per head */
  int32_t n_vocab;       /**< tokens in the vocabulary (length of a logits row) */
  int64_t n_ctx_train;   /**< context length the model was trained with (tokens) */
  uint64_t weight_bytes; /**< bytes of the weight tensors */
  int32_t n_threads;     /**< threads of each model call (resolved, >= 1) */
  int32_t has_tokenizer; /**< 1 if the GGUF has a tokenizer (tokenize/generate need one), else 0 */
  int32_t bos;           /**< beginning-of-sequence token id, -1 if none (or no tokenizer) */
  int32_t eos;           /**< end-of-sequence token id, -1 if none (or no tokenizer) */
} snapkv_model_info;

/** Fills *out. Errors: SNAPKV_ERR_INVALID_ARGUMENT (NULL engine/out). */
SNAPKV_API snapkv_status snapkv_engine_info(const snapkv_engine* engine, snapkv_model_info* out) SNAPKV_NOEXCEPT;

/* ---- tokenizer ---------------------------------------------------------------------------- */

/** Token ids of `text` (`len` bytes, UTF-8; need not be NUL-terminated; text may be NULL when
 *  len is 0). add_special: prepend BOS / append EOS as the model says; parse_special: turn
 *  control-token texts such as "<start_of_turn>" into their ids. Writes *n_tokens ids into
 *  tokens[0 .. capacity). Errors: SNAPKV_ERR_INVALID_ARGUMENT (NULL engine/n_tokens, NULL text
 *  with len > 0, NULL tokens with capacity > 0, no tokenizer), SNAPKV_ERR_BUFFER_TOO_SMALL. */
SNAPKV_API snapkv_status snapkv_tokenize(const snapkv_engine* engine, const char* text, size_t len, int add_special,
                                         int parse_special, int32_t* tokens, size_t capacity,
                                         size_t* n_tokens) SNAPKV_NOEXCEPT;
/** The bytes token `token` stands for in a text (control tokens: "" unless render_special).
 *  Writes *len bytes plus a terminating NUL into buf, so capacity must be >= *len + 1.
 *  Errors: SNAPKV_ERR_INVALID_ARGUMENT (NULL engine/len, NULL buf with capacity > 0, token
 *  outside [0, n_vocab), no tokenizer), SNAPKV_ERR_BUFFER_TOO_SMALL (*len set). */
SNAPKV_API snapkv_status snapkv_token_to_piece(const snapkv_engine* engine, int32_t token, int render_special,
                                               char* buf, size_t capacity, size_t* len) SNAPKV_NOEXCEPT;
/** The text of n_tokens ids (a leading space of the first piece dropped, as the tokenizer adds
 *  it), NUL-terminated as snapkv_token_to_piece. The bytes of byte tokens are copied as they
 *  are, so the text may hold invalid UTF-8 anywhere, not only an incomplete last character
 *  (snapkv_generate's callback gets U+FFFD for such bytes instead). */
SNAPKV_API snapkv_status snapkv_detokenize(const snapkv_engine* engine, const int32_t* tokens, size_t n_tokens,
                                           int render_special, char* buf, size_t capacity, size_t* len) SNAPKV_NOEXCEPT;
/** *is_eog = 1 if `token` ends generation (EOS, end-of-turn tokens), else 0.
 *  Errors: SNAPKV_ERR_INVALID_ARGUMENT (NULL argument, token out of range, no tokenizer). */
SNAPKV_API snapkv_status snapkv_token_is_eog(const snapkv_engine* engine, int32_t token, int* is_eog) SNAPKV_NOEXCEPT;

/* ---- sequences ---------------------------------------------------------------------------- */

/** A new, empty sequence of `engine`'s model. n_ctx: positions it may hold, 0 = the model's
 *  n_ctx_train, at most 2^30 (memory grows with the tokens held, not with n_ctx).
 *  Errors: SNAPKV_ERR_INVALID_ARGUMENT (NULL engine/out, bad n_ctx or kv_type, SNAPKV_KV_Q8_0 or
 *  SNAPKV_KV_Q4_0 for a model whose head_dim is not a multiple of 32). */
SNAPKV_API snapkv_status snapkv_sequence_new(const snapkv_engine* engine, int64_t n_ctx, snapkv_kv_type kv_type,
                                             snapkv_sequence** out) SNAPKV_NOEXCEPT;
/** snapkv_sequence_new with keys stored as `k_type` and values as `v_type` (llama.cpp's -ctk /
 *  -ctv), and an optional cold tier (`cold_tier` NULL: none; otherwise as
 *  snapkv_sequence_new_cold). The two types are equal or both quantized (SNAPKV_KV_Q8_0 /
 *  SNAPKV_KV_Q4_0), e.g. Q8_0 keys (34 bytes per 32 elements) with Q4_0 values (18 bytes).
 *  Errors: SNAPKV_ERR_INVALID_ARGUMENT for what snapkv_sequence_new refuses, an unknown
 *  cold_tier, a k_type or v_type outside snapkv_kv_type (the message names which), or types that
 *  do not combine (the message says "must both be quantized"). */
SNAPKV_API snapkv_status snapkv_sequence_new_kv(const snapkv_engine* engine, int64_t n_ctx, snapkv_kv_type k_type,
                                                snapkv_kv_type v_type, const char* cold_tier,
                                                snapkv_sequence** out) SNAPKV_NOEXCEPT;
/** Releases the sequence (NULL is ignored). */
SNAPKV_API void snapkv_sequence_free(snapkv_sequence* seq) SNAPKV_NOEXCEPT;
/** A copy of `seq` (KV cache, positions, statistics) in *out: costs a copy of its KV bytes.
 *  Errors: SNAPKV_ERR_INVALID_ARGUMENT (NULL argument). */
SNAPKV_API snapkv_status snapkv_sequence_fork(const snapkv_sequence* seq, snapkv_sequence** out) SNAPKV_NOEXCEPT;
/** Empties the sequence (cache, positions, statistics) so that it can serve a new request.
 *  Errors: SNAPKV_ERR_INVALID_ARGUMENT (NULL seq). */
SNAPKV_API snapkv_status snapkv_sequence_reset(snapkv_sequence* seq) SNAPKV_NOEXCEPT;
/** Positions held: the next token goes to position snapkv_sequence_n_past(seq). -1 for NULL. */
SNAPKV_API int64_t snapkv_sequence_n_past(const snapkv_sequence* seq) SNAPKV_NOEXCEPT;
/** Most positions the sequence may hold. -1 for NULL. */
SNAPKV_API int64_t snapkv_sequence_n_ctx(const snapkv_sequence* seq) SNAPKV_NOEXCEPT;

/** Runs the prompt `tokens` (n_tokens ids) through the model at positions n_past().. and, if
 *  press is not NULL, "" or "none", compresses its KV cache with that press, e.g.
 *  "snapkv:budget=1024,window=32" (name[:key=value,...]; names: none snapkv pyramidkv adakv
 *  streamingllm h2o tova knorm random). A compressing prefill needs an empty sequence. A prompt
 *  the press need not compress (it fits the budget) is kept whole (snapkv_sequence_stats says
 *  so). If logits is not NULL, *logits points to the last token's n_vocab logits, valid until
 *  the next call that changes `seq` (prefill, decode, reset, generate, free).
 *  Errors: SNAPKV_ERR_INVALID_ARGUMENT (NULL seq/tokens, n_tokens 0, token id out of range, bad
 *  press spec, compressing a non-empty sequence), SNAPKV_ERR_CONTEXT_FULL, SNAPKV_ERR_OUT_OF_MEMORY.
 *  SNAPKV_ERR_IO when a disk cold tier cannot write its file (a full disk). On an error the
 *  sequence is unchanged, except after an error in the middle of the computation (out of memory,
 *  the cold tier's file, an internal error), which empties it. */
SNAPKV_API snapkv_status snapkv_prefill(snapkv_sequence* seq, const int32_t* tokens, size_t n_tokens, const char* press,
                                        const float** logits) SNAPKV_NOEXCEPT;
/** snapkv_prefill whose last n_question_tokens tokens are the prompt's question span (the last
 *  user turn and the chat template's closing tokens): a press with window=question makes them
 *  its observation window, clamped to [window_min, window_max]; 0 = unknown. Errors: as
 *  snapkv_prefill, and SNAPKV_ERR_INVALID_ARGUMENT for n_question_tokens > n_tokens. */
SNAPKV_API snapkv_status snapkv_prefill_question(snapkv_sequence* seq, const int32_t* tokens, size_t n_tokens,
                                                 const char* press, size_t n_question_tokens,
                                                 const float** logits) SNAPKV_NOEXCEPT;
/** Appends one token and runs it through the model. *logits (if logits is not NULL) points to
 *  its n_vocab logits, valid as for snapkv_prefill. Errors: SNAPKV_ERR_INVALID_ARGUMENT (NULL
 *  seq, token id out of range), SNAPKV_ERR_CONTEXT_FULL (n_past == n_ctx),
 *  SNAPKV_ERR_OUT_OF_MEMORY (the KV cache could not grow); then the sequence is as it was (a
 *  failure in the middle of the step takes back what it appended). */
SNAPKV_API snapkv_status snapkv_decode(snapkv_sequence* seq, int32_t token, const float** logits) SNAPKV_NOEXCEPT;
/** One decode step of n rows together (the weights are read once for all of them): row i
 *  appends tokens[i] to seqs[i]. The sequences must be of one engine; several rows of one
 *  sequence (consecutive in the array) decode consecutive positions. If logits is not NULL,
 *  row i's n_vocab logits are copied to logits[i * n_vocab ..]; capacity counts floats and
 *  must be >= n * n_vocab (else SNAPKV_ERR_BUFFER_TOO_SMALL, nothing run). At most 512 rows.
 *  Errors: as snapkv_decode for any row (then nothing changed), SNAPKV_ERR_INVALID_ARGUMENT
 *  for NULL seqs/tokens/elements, n == 0, sequences of different engines, rows of one sequence
 *  that are not consecutive; on any error every row's sequence is as it was. With one row per
 *  sequence, logits equal snapkv_decode's bit for bit for F32/F16/BF16 weights (several rows of
 *  one sequence go through the prefill attention kernel, whose F16 arithmetic differs slightly);
 *  with quantized weights a step of 8 or more rows (12 for the K-quants and 16 for Q8_0 on AVX2)
 *  takes other matmul kernels, whose logits differ from snapkv_decode's by f32 rounding
 *  (docs/design.md); SNAPKV_TOKEN_LANES=0 in the environment keeps the decode kernels (the same
 *  bits; slower prefill). */
SNAPKV_API snapkv_status snapkv_decode_batch(snapkv_sequence* const* seqs, const int32_t* tokens, size_t n,
                                             float* logits, size_t capacity) SNAPKV_NOEXCEPT;

/** Memory and compression figures of a sequence. Strings are valid until the next call that
 *  changes the sequence. */
typedef struct snapkv_stats {
  int64_t n_past;               /**< positions held */
  int64_t n_ctx;                /**< most positions it may hold */
  uint64_t kv_cache_bytes;      /**< K+V payload bytes held now */
  uint64_t kv_cache_bytes_full; /**< bytes an uncompressed cache of the same tokens would hold */
  uint64_t peak_kv_cache_bytes; /**< most K+V bytes held at any time */
  int32_t compressed;           /**< 1 if a press removed entries, else 0 */
  int64_t budget;               /**< tokens per KV head the press kept; 0 if it did not compress */
  int64_t n_prompt_tokens;      /**< tokens of the compressed (or first) prompt */
  double prefill_ms;            /**< wall time of the prefills (compression included) */
  double compression_ms;        /**< time inside the press and compaction */
  const char* press;            /**< the press requested for the prompt (canonical spec), "none" if
                                     none; `compressed` says whether it removed entries */
  const char* compression_note; /**< why a requested press did not compress, else "" */
  int32_t window;               /**< observation window W the press used (tokens); 0 if it did not compress */
  uint64_t kv_cold_bytes;       /**< bytes of the cold tier (issue 10), 0 without; forks share it */
  int32_t n_reselections;       /**< follow-up prefills that re-selected from the cold tier */
  double reselect_ms;           /**< time in those re-selections */
} snapkv_stats;

/** Fills *out. Errors: SNAPKV_ERR_INVALID_ARGUMENT (NULL seq/out). */
SNAPKV_API snapkv_status snapkv_sequence_stats(const snapkv_sequence* seq, snapkv_stats* out) SNAPKV_NOEXCEPT;

/* ---- follow-up questions: cold tier, re-selection, saved sessions (issue 10) ---------------- */

/** snapkv_sequence_new with a cold tier: when a press compresses the prompt, every prompt entry
 *  of the compressed layers is kept in a cold store first, so that snapkv_prefill_reselect can
 *  bring evicted entries back for a follow-up question. cold_tier: "int8" (per-row absmax,
 *  head_dim + 4 bytes a row), "f16", or "disk:DIR" (int8 in a file under DIR, unlinked at
 *  creation, memory-mapped; the file is made by the first compressing snapkv_prefill, which
 *  fails with SNAPKV_ERR_INVALID_ARGUMENT if DIR cannot hold one). Its bytes are
 *  snapkv_stats.kv_cold_bytes. Errors: SNAPKV_ERR_INVALID_ARGUMENT (as snapkv_sequence_new, a
 *  NULL or unknown cold_tier). */
SNAPKV_API snapkv_status snapkv_sequence_new_cold(const snapkv_engine* engine, int64_t n_ctx, snapkv_kv_type kv_type,
                                                  const char* cold_tier, snapkv_sequence** out) SNAPKV_NOEXCEPT;
/** A follow-up question: prefills `tokens` after what `seq` holds (a prompt compressed with a
 *  cold tier) and, at every compressed layer, re-selects the prompt entries the question's last
 *  W queries attend to most (SnapKV's scoring; each KV head keeps as many as before); see
 *  PrefillOptions::reselect in snapkv/sequence.h. A prompt that was not compressed is prefilled
 *  plainly. *logits as for snapkv_prefill. Errors: as snapkv_prefill, and
 *  SNAPKV_ERR_INVALID_ARGUMENT for a sequence without a cold tier. */
SNAPKV_API snapkv_status snapkv_prefill_reselect(snapkv_sequence* seq, const int32_t* tokens, size_t n_tokens,
                                                 const float** logits) SNAPKV_NOEXCEPT;
/** Writes `seq` (its hot KV cache bit for bit, cold tier, press statistics, last logits, the
 *  model's SHA-256; snapkv/session.h) to `path`, through a temporary file renamed over it.
 *  Errors: SNAPKV_ERR_INVALID_ARGUMENT (NULL argument), SNAPKV_ERR_IO (cannot write). */
SNAPKV_API snapkv_status snapkv_session_save(const snapkv_sequence* seq, const char* path) SNAPKV_NOEXCEPT;
/** Restores a sequence saved by snapkv_session_save with the same model into *out. cold_dir:
 *  NULL or "" keeps the cold tier in RAM, else a directory for its file. n_ctx: positions the
 *  restored sequence may hold, 0 = the saved sequence's (must be >= the positions it holds).
 *  Errors: SNAPKV_ERR_INVALID_ARGUMENT (NULL engine/path/out, n_ctx negative or above 2^30), SNAPKV_ERR_IO
 *  (missing, damaged or foreign file: another model, not a session, another format version; an
 *  n_ctx below the positions held; a cold_dir where no file can be created). */
SNAPKV_API snapkv_status snapkv_session_load(const snapkv_engine* engine, const char* path, const char* cold_dir,
                                             int64_t n_ctx, snapkv_sequence** out) SNAPKV_NOEXCEPT;

/* ---- sampling ----------------------------------------------------------------------------- */

/** A sampler: temp <= 0 is greedy (argmax, lowest id on ties); otherwise top-k (top_k <= 0:
 *  off), softmax at temp, top-p (top_p >= 1: off), then a draw from a std::mt19937_64 seeded
 *  with `seed` (deterministic). Errors: SNAPKV_ERR_INVALID_ARGUMENT (NULL out, NaN temp,
 *  top_p NaN or <= 0). */
SNAPKV_API snapkv_status snapkv_sampler_new(float temp, int32_t top_k, float top_p, uint64_t seed,
                                            snapkv_sampler** out) SNAPKV_NOEXCEPT;
/** Releases the sampler (NULL is ignored). */
SNAPKV_API void snapkv_sampler_free(snapkv_sampler* sampler) SNAPKV_NOEXCEPT;
/** Picks a token id in [0, n_logits) from logits[0 .. n_logits); a -INFINITY logit (a masked
 *  token) is never picked. Errors: SNAPKV_ERR_INVALID_ARGUMENT (NULL argument, n_logits 0 or >
 *  INT32_MAX, a NaN or +INFINITY logit, every logit -INFINITY). */
SNAPKV_API snapkv_status snapkv_sampler_sample(snapkv_sampler* sampler, const float* logits, size_t n_logits,
                                               int32_t* token) SNAPKV_NOEXCEPT;

/* ---- generation --------------------------------------------------------------------------- */

/** Called for every generated token with the text it completes (valid UTF-8, `len` bytes, not
 *  NUL-terminated, possibly empty; valid only during the call), and once at the end with token
 *  -1 and the text held back until then (for instance a possible beginning of a stop string).
 *  Return nonzero to stop (SNAPKV_STOP_CANCELLED; ignored on the final call). The callback
 *  must not throw or longjmp, and must not call any function on the sequence being generated
 *  (free, reset, prefill, decode, generate): it is in use until snapkv_generate returns. */
typedef int (*snapkv_token_callback)(void* user, int32_t token, const char* text, size_t len);

/** Settings of snapkv_generate; start from snapkv_generate_params_default(). */
typedef struct snapkv_generate_params {
  int64_t n_predict;       /**< most tokens to generate (>= 0); default 128 */
  float temp;              /**< sampling temperature, <= 0 greedy; default 0.8 */
  int32_t top_k;           /**< default 40; <= 0 off */
  float top_p;             /**< default 0.95; >= 1 off */
  uint64_t seed;           /**< default 0 */
  int32_t ignore_eos;      /**< nonzero: do not stop at end-of-generation tokens; default 0 */
  const char* press;       /**< press spec for the prompt's KV cache (see snapkv_prefill); NULL = none */
  const char* const* stop; /**< n_stop NUL-terminated stop strings (may be NULL if n_stop is 0) */
  size_t n_stop;           /**< default 0 */
  const int32_t* question; /**< tokens appended after the compressed prompt, uncompressed; may be NULL */
  size_t n_question;       /**< default 0 */
  /** the last prompt_question_tokens of the prompt are its question span (window=question
   *  presses, see snapkv_prefill_question); default 0 = unknown; must be <= n_prompt */
  size_t prompt_question_tokens;
} snapkv_generate_params;

/** The default settings (values above). */
SNAPKV_API snapkv_generate_params snapkv_generate_params_default(void) SNAPKV_NOEXCEPT;

/** What snapkv_generate did. */
typedef struct snapkv_generate_result {
  int64_t n_tokens;               /**< tokens generated (an end-of-generation token is not counted) */
  snapkv_stop_reason stop_reason; /**< why it ended */
  int64_t n_prompt_tokens;        /**< prompt + question tokens prefilled */
  int64_t n_decode_steps;         /**< decode steps run */
  double ttft_ms;                 /**< start to first sampled token (prefill included) */
  double prefill_ms;              /**< prompt + question prefill, compression included */
  double prefill_tokens_per_s;    /**< prefilled tokens per second */
  double decode_ms;               /**< time of the decode steps (forward + sampling) */
  double decode_tokens_per_s;     /**< decode steps per second */
} snapkv_generate_result;

/** One request on an empty sequence: prefills prompt (n_prompt ids, compressed with
 *  params->press), then params->question uncompressed, then samples up to n_predict tokens,
 *  calling cb (may be NULL) for each. params NULL = the defaults; result may be NULL.
 *  Errors: SNAPKV_ERR_INVALID_ARGUMENT (NULL seq/prompt, n_prompt 0, a non-empty sequence, bad
 *  settings or press spec, token ids out of range, NULL stop string or one that is not valid
 *  UTF-8, no tokenizer),
 *  SNAPKV_ERR_CONTEXT_FULL (the prompt does not fit), SNAPKV_ERR_OUT_OF_MEMORY. Generation that
 *  runs out of context mid-way is not an error: it ends with SNAPKV_STOP_CONTEXT_FULL. */
SNAPKV_API snapkv_status snapkv_generate(snapkv_sequence* seq, const int32_t* prompt, size_t n_prompt,
                                         const snapkv_generate_params* params, snapkv_token_callback cb, void* user,
                                         snapkv_generate_result* result) SNAPKV_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* SNAPKV_SNAPKV_C_H */
