#!/usr/bin/env python3
"""How much llama.cpp's own logits move between its flash-attention and non-flash paths.

A yardstick for the golden-test deviations of snapkv's decode kernel: the golden data was made
with llama.cpp's non-flash path (flash_attn off), whose F16 cache rounds the normalized softmax
probabilities to F16 before the V product; snapkv's split-K decode kernel does not (nor does
llama.cpp's flash path, which accumulates V differently again). For every golden prompt this
evaluates the prompt in one batch, then feeds the golden greedy tokens one at a time (the path
the golden tests walk), with flash attention off and on, and prints per prompt

  fa_on_vs_off   max |logit(FA on) - logit(FA off)| over the greedy steps
  off_vs_golden  max |logit(FA off, this build) - golden|  (another ggml commit and CPU)

over the full vocabulary (stories260K) or over each step's golden top-40 ids (Gemma 3, whose
golden files keep only those), the ids the tests compare.

    pip install llama-cpp-python==0.3.16 numpy
    python3 tools/llamacpp_fa_yardstick.py [--shared ../shared] [--gemma PATH]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np


def run(llama_cpp, model: str, kv: str, n_ctx: int, flash: bool, prompt: list[int], feed: list[int]) -> np.ndarray:
    """Logits [1 + len(feed)][n_vocab]: after the prompt, then after each fed token."""
    kvt = {"f16": llama_cpp.GGML_TYPE_F16, "f32": llama_cpp.GGML_TYPE_F32}[kv]
    llm = llama_cpp.Llama(model, n_ctx=n_ctx, n_batch=512, n_ubatch=512, n_threads=1, n_threads_batch=1,
                          flash_attn=flash, type_k=kvt, type_v=kvt, logits_all=False, n_gpu_layers=0, verbose=False)
    ctx = llm._ctx.ctx
    n_vocab = llm.n_vocab()

    def last() -> np.ndarray:
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(n_vocab,)).copy()

    llm.eval(prompt)
    rows = [last()]
    for t in feed:
        llm.eval([t])
        rows.append(last())
    del llm
    return np.stack(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--shared", default=str(here.parent / "shared"))
    ap.add_argument("--gemma", default=os.path.expanduser("~/.cache/snapkv/models/gemma-3-270m-q4_k_m.gguf"))
    args = ap.parse_args()
    import llama_cpp

    print("| model | kv | prompt | steps | fa_on_vs_off | off_vs_golden |")
    print("|---|---|---|---|---|---|")
    shared = Path(args.shared) / "models"
    for kv in ("f32", "f16"):
        d = shared / "golden" / "stories260K" / f"kv_{kv}"
        g = json.loads((d / "golden.json").read_text())
        n_vocab = g["n_vocab"]
        for pr in g["prompts"]:
            feed = pr["greedy_token_ids"][:-1]  # row i + 1 is the logits after feeding greedy token i
            off = run(llama_cpp, str(shared / "stories260K.gguf"), kv, 512, False, pr["token_ids"], feed)
            on = run(llama_cpp, str(shared / "stories260K.gguf"), kv, 512, True, pr["token_ids"], feed)
            gold = np.fromfile(d / f"{pr['name']}.greedy_step_logits.f32", dtype=np.float32).reshape(-1, n_vocab)
            print(f"| stories260K | {kv} | {pr['name']} | {len(off)} | {np.abs(on - off).max():.3g} | "
                  f"{np.abs(off - gold[: len(off)]).max():.3g} |")
    if Path(args.gemma).exists():
        for kv in ("f32", "f16"):
            g = json.loads((here / "tests" / "data" / "gemma3-270m" / f"kv_{kv}" / "golden.json").read_text())
            for pr in g["prompts"]:
                steps = pr["greedy"]["steps"]
                feed = [s["token_id"] for s in steps][:-1]
                off = run(llama_cpp, args.gemma, kv, 4096, False, pr["token_ids"], feed)
                on = run(llama_cpp, args.gemma, kv, 4096, True, pr["token_ids"], feed)
                d_on = d_gold = 0.0
                for i, s in enumerate(steps):
                    ids = [t for t, _ in s["top"]]
                    d_on = max(d_on, float(np.abs(on[i, ids] - off[i, ids]).max()))
                    d_gold = max(d_gold, float(np.abs(off[i, ids] - np.array([v for _, v in s["top"]])).max()))
                print(f"| gemma3 | {kv} | {pr['name']} | {len(steps)} | {d_on:.3g} | {d_gold:.3g} |")


if __name__ == "__main__":
    main()
