#!/usr/bin/env python3
"""One PyTorch / Hugging Face transformers measurement in a fresh process
(used by bench_vs_transformers.py).

Reads a JSON request on stdin:
    {"model": PATH.gguf, "token_ids": [...], "n_gen": 128, "threads": 2, "warmup": true}
loads AutoModelForCausalLM.from_pretrained(dir, gguf_file=name, dtype=float32,
attn_implementation="sdpa") (transformers dequantizes every GGUF tensor to f32), evaluates
the prompt token ids (BOS included by the caller) in one forward pass with the KV cache on,
then generates n_gen tokens greedily (argmax of the last logits, ties -> lowest id, EOS
ignored), one token per forward with the cache, under torch.inference_mode(). Prints one
JSON line:
    {"n_prompt_tokens", "prefill_ms", "prefill_tokens_per_s", "n_decode_evals",
     "decode_ms", "decode_tokens_per_s", "generated_token_ids", "ttft_ms", "load_s", ...}

Timings are wall-clock (time.perf_counter) around the forward calls and the argmax.
prefill_ms is the prompt's forward pass alone; ttft_ms adds the argmax of its logits.
The prefill computes the logits of the last position only (logits_to_keep=1, as
transformers' own generate() does). The first generated token comes from the prompt's
logits, so n_gen tokens take n_gen - 1 decode forwards (as in `snapkv run`); decode_ms is
their total, each including its argmax. Model loading is excluded, and so is an optional
warm-up (a forward of 8 tokens and one decode step on a throw-away cache, so the first
timed call does not pay PyTorch's one-time set-up).

"other_cpu_share_timed" is the share of all CPUs that other processes used during the timed
part (benchlib.Contention), which excludes the long model load.

Threads: torch.set_num_threads(threads) and set_num_interop_threads(1) before anything
runs (the caller also sets OMP_NUM_THREADS and MKL_NUM_THREADS).
"""

from __future__ import annotations

import inspect
import json
import pathlib
import sys
import time

import benchlib as bl


def main() -> None:
    req = json.load(sys.stdin)
    threads = int(req["threads"])
    import torch

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    path = pathlib.Path(req["model"])
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="sdpa"
    )
    model.eval()
    load_s = time.perf_counter() - t0
    # transformers 5 calls the KV cache `cache`; earlier versions `past_key_values`.
    cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def forward(ids: list[int], cache: object) -> tuple[object, object]:
        out = model(torch.tensor([ids], dtype=torch.long), use_cache=True, logits_to_keep=1, **{cache_kw: cache})
        return out, getattr(out, cache_kw)

    def argmax(out: object) -> int:
        return int(torch.argmax(out.logits[0, -1]).item())

    ids = [int(t) for t in req["token_ids"]]
    n_gen = int(req["n_gen"])
    with torch.inference_mode():
        if req.get("warmup", True):
            out, cache = forward(ids[:8], None)
            forward([argmax(out)], cache)
        with bl.Contention() as busy:
            t0 = time.perf_counter()
            out, cache = forward(ids, None)
            t1 = time.perf_counter()
            tok = argmax(out)
            t2 = time.perf_counter()
            gen = [tok]
            for _ in range(n_gen - 1):
                out, cache = forward([tok], cache)
                tok = argmax(out)
                gen.append(tok)
            t3 = time.perf_counter()
    prefill_ms, decode_ms, n_dec = (t1 - t0) * 1000.0, (t3 - t2) * 1000.0, n_gen - 1
    print(json.dumps({
        "n_prompt_tokens": len(ids),
        "prefill_ms": prefill_ms,
        "prefill_tokens_per_s": len(ids) * 1000.0 / prefill_ms,
        "n_decode_evals": n_dec,
        "decode_ms": decode_ms,
        "decode_tokens_per_s": n_dec * 1000.0 / decode_ms if decode_ms > 0 else 0.0,
        "ttft_ms": (t2 - t0) * 1000.0,
        "n_generated_tokens": len(gen),
        "generated_token_ids": gen,
        "threads": threads,
        "torch_threads": torch.get_num_threads(),
        "load_s": load_s,
        "model_class": type(model).__name__,
        "attn_implementation": model.config._attn_implementation,
        "dtype": str(model.dtype),
        "cache_class": type(cache).__name__,
        "warmup": bool(req.get("warmup", True)),
        "other_cpu_share_timed": busy.share,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }))


if __name__ == "__main__":
    main()
