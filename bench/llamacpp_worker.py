#!/usr/bin/env python3
"""One llama.cpp measurement in a fresh process (used by bench_vs_llamacpp.py).

Reads a JSON request on stdin:
    {"model": PATH, "token_ids": [...], "n_gen": 128, "threads": 2, "n_ctx": N,
     "kv_type": "f16"|"f32"|"q8_0"|"q4_0", "kv_type_v": (optional, values' type; default kv_type),
     "n_batch": 2048, "n_ubatch": 512, "flash_attn": false}
evaluates the prompt token ids (BOS included by the caller), then generates n_gen tokens
greedily (argmax of raw logits, ties -> lowest id, EOS ignored), and prints one JSON line:
    {"n_prompt_tokens", "prefill_ms", "prefill_tokens_per_s", "n_decode_evals",
     "decode_ms", "decode_tokens_per_s", "generated_token_ids", "ttft_ms", ...}

Timings are llama.cpp's own (llama_perf_context: t_p_eval_ms over n_p_eval prompt tokens,
t_eval_ms over n_eval single-token decodes), so Python overhead (reading logits, argmax)
is excluded. Model loading is excluded too. The first generated token comes from the
prompt's logits, so n_gen tokens take n_gen - 1 decode calls (as in `snapkv run`).
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def main() -> None:
    req = json.load(sys.stdin)
    import llama_cpp

    types = {"f16": llama_cpp.GGML_TYPE_F16, "f32": llama_cpp.GGML_TYPE_F32,
             "q8_0": llama_cpp.GGML_TYPE_Q8_0, "q4_0": llama_cpp.GGML_TYPE_Q4_0}
    kv = types[req.get("kv_type", "f16")]
    kv_v = types[req.get("kv_type_v") or req.get("kv_type", "f16")]
    llm = llama_cpp.Llama(
        req["model"],
        n_ctx=int(req["n_ctx"]),
        n_batch=int(req.get("n_batch", 2048)),
        n_ubatch=int(req.get("n_ubatch", 512)),
        n_threads=int(req["threads"]),
        n_threads_batch=int(req["threads"]),
        flash_attn=bool(req.get("flash_attn", False)),
        type_k=kv,
        type_v=kv_v,
        logits_all=False,
        n_gpu_layers=0,
        verbose=False,
    )
    ctx = llm._ctx.ctx
    n_vocab = llm.n_vocab()

    def argmax_last() -> int:
        p = llama_cpp.llama_get_logits_ith(ctx, -1)
        return int(np.argmax(np.ctypeslib.as_array(p, shape=(n_vocab,))))

    ids = [int(t) for t in req["token_ids"]]
    n_gen = int(req["n_gen"])
    llama_cpp.llama_perf_context_reset(ctx)
    t0 = time.perf_counter()
    llm.eval(ids)
    gen = []
    ttft_ms = 0.0
    if n_gen > 0:
        tok = argmax_last()
        ttft_ms = (time.perf_counter() - t0) * 1000.0
        gen.append(tok)
        for _ in range(n_gen - 1):
            llm.eval([tok])
            tok = argmax_last()
            gen.append(tok)
    perf = llama_cpp.llama_perf_context(ctx)
    out = {
        "n_prompt_tokens": len(ids),
        "n_p_eval": perf.n_p_eval,
        "prefill_ms": perf.t_p_eval_ms,
        "prefill_tokens_per_s": perf.n_p_eval * 1000.0 / perf.t_p_eval_ms if perf.t_p_eval_ms > 0 else 0.0,
        "n_decode_evals": perf.n_eval,
        "decode_ms": perf.t_eval_ms,
        "decode_tokens_per_s": perf.n_eval * 1000.0 / perf.t_eval_ms if perf.t_eval_ms > 0 else 0.0,
        "ttft_ms": ttft_ms,
        "n_generated_tokens": len(gen),
        "generated_token_ids": gen,
        "threads": int(req["threads"]),
        "kv_type": req.get("kv_type", "f16"),
        "n_batch": int(req.get("n_batch", 2048)),
        "n_ubatch": int(req.get("n_ubatch", 512)),
        "flash_attn": bool(req.get("flash_attn", False)),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
