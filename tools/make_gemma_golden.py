#!/usr/bin/env python3
"""Records golden data for Gemma 3 270M (Q4_K_M) from the trusted peer, llama.cpp.

Dev script, not run by the test suite. It drives llama.cpp through llama-cpp-python
(0.3.16 was used) on the CPU and writes, per KV-cache type (f16 = llama.cpp's default,
f32 = exact counterpart of snapkv's F32 cache):

    tests/data/gemma3-270m/kv_f16/golden.json   (+ <prompt>.last_logits.f32)
    tests/data/gemma3-270m/kv_f32/golden.json   (+ <prompt>.last_logits.f32)

For every prompt it stores the text, how it was tokenized (add_bos, parse_special), the
prompt token ids, and a 32-step greedy continuation: at each step the argmax of the raw
logits (ties: lowest id wins), fed back one token at a time, never stopping at EOS. Per
step it keeps the top-40 (id, logit) pairs of the logits that produced the token (step 0
= last prompt position) and the top1 - top2 gap. For the prompts listed in
FULL_LOGITS_PROMPTS the whole last-prompt-position logit vector (n_vocab little-endian
float32 values) is written to <name>.last_logits.f32.

Reproduce (from the repository root; needs `pip install llama-cpp-python==0.3.16 numpy`,
the model from scripts/get-model.sh and /usr/share/common-licenses/{GPL-3,Apache-2.0},
Debian's base-files; without them the long texts are read back from the existing
golden.json):

    python3 tools/make_gemma_golden.py

Options: --model PATH (default $SNAPKV_MODELS or ~/.cache/snapkv/models, then
gemma-3-270m-q4_k_m.gguf), --out DIR (default tests/data/gemma3-270m), --threads N
(default 2; recorded), --kv f16,f32 (which folders to write).

llama.cpp on the CPU is deterministic for a fixed thread count; running this twice
gives byte-identical files.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np

try:
    import llama_cpp
except ImportError:  # pragma: no cover - message for humans
    sys.exit("make_gemma_golden.py: needs llama-cpp-python (pip install llama-cpp-python==0.3.16)")

from golden_common import dump_json, f32_json, ggml_commit, model_cache, prefix_by_tokens, sha256_of, top_k
from golden_common import last_logits as logits_ptr

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODEL_NAME = "gemma-3-270m-q4_k_m.gguf"
N_STEPS = 32
TOP_K = 40
N_CTX = 4096
N_BATCH = 512
N_UBATCH = 512
FULL_LOGITS_PROMPTS = ("capital", "gpl3_long")

GPL3 = pathlib.Path("/usr/share/common-licenses/GPL-3")
APACHE2 = pathlib.Path("/usr/share/common-licenses/Apache-2.0")
STORY = (
    "Once upon a time, in a small village at the edge of a great forest, there lived an old "
    "clockmaker and his curious granddaughter. One winter morning, she found a strange brass key "
    "hidden inside the oldest clock in the shop, and"
)
CHAT = (
    "<start_of_turn>user\nWhat is the boiling point of water in Celsius?<end_of_turn>\n"
    "<start_of_turn>model\n"
)


def default_model() -> pathlib.Path:
    return model_cache() / MODEL_NAME


def long_texts(llm: llama_cpp.Llama, out_dir: pathlib.Path) -> tuple[str, str]:
    """GPL-3 (~2,200 tokens) and Apache-2.0 (~600 tokens) prefixes; falls back to stored texts."""
    if GPL3.is_file() and APACHE2.is_file():
        return (
            prefix_by_tokens(llm, GPL3.read_text(), 2200),
            prefix_by_tokens(llm, APACHE2.read_text(), 600),
        )
    old = out_dir / "kv_f16" / "golden.json"
    if not old.is_file():
        raise SystemExit(f"make_gemma_golden.py: neither {GPL3} nor {old} exists")
    by_name = {p["name"]: p["text"] for p in json.loads(old.read_text())["prompts"]}
    return by_name["gpl3_long"], by_name["apache2_medium"]


def run_prompt(llm: llama_cpp.Llama, p: dict, out_dir: pathlib.Path) -> dict:
    ids = llm.tokenize(p["text"].encode(), add_bos=True, special=p["parse_special"])
    if len(ids) + N_STEPS > N_CTX:
        raise SystemExit(f"prompt {p['name']}: {len(ids)} tokens do not fit n_ctx={N_CTX}")
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(ids)
    logits = logits_ptr(llm)
    entry = {
        "name": p["name"],
        "description": p["description"],
        "text": p["text"],
        "add_bos": True,
        "parse_special": p["parse_special"],
        "n_prompt_tokens": len(ids),
        "token_ids": ids,
    }
    if p["name"] in FULL_LOGITS_PROMPTS:
        fname = f"{p['name']}.last_logits.f32"
        logits.astype("<f4").tofile(out_dir / fname)
        entry["last_logits_file"] = fname
    steps, gen = [], []
    for step in range(N_STEPS):
        top = top_k(logits, TOP_K)
        tok = int(np.argmax(logits))  # first maximum = lowest id on ties
        assert tok == top[0][0]
        steps.append(
            {
                "token_id": tok,
                "gap": f32_json(top[0][1] - top[1][1]),
                "top": [[i, f32_json(v)] for i, v in top],
            }
        )
        gen.append(tok)
        if step + 1 < N_STEPS:
            llm.eval([tok])
            logits = logits_ptr(llm)
    text = llm.detokenize(gen, prev_tokens=ids).decode("utf-8", errors="replace")
    gaps = [s["gap"] for s in steps]
    entry["greedy"] = {
        "n_steps": N_STEPS,
        "top_k": TOP_K,
        "token_ids": gen,
        "text": text,
        "min_gap": min(gaps),
        "min_gap_step": int(np.argmin(gaps)),
        "steps": steps,
    }
    print(
        f"  {p['name']:15s} {len(ids):5d} tok  {time.perf_counter() - t0:6.1f} s  "
        f"min gap {min(gaps):.4f} @ {int(np.argmin(gaps))}  -> {text[:70]!r}",
        flush=True,
    )
    return entry


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=pathlib.Path, default=default_model())
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "tests" / "data" / "gemma3-270m")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kv", default="f16,f32", help="comma list of KV types: f16, f32")
    args = ap.parse_args()
    if not args.model.is_file():
        sys.exit(f"make_gemma_golden.py: model not found: {args.model} (run scripts/get-model.sh)")

    kv_types = {"f16": llama_cpp.GGML_TYPE_F16, "f32": llama_cpp.GGML_TYPE_F32}
    model_sha = sha256_of(args.model)
    for kv in args.kv.split(","):
        if kv not in kv_types:
            sys.exit(f"make_gemma_golden.py: unknown --kv type {kv!r}")
        out_dir = args.out / f"kv_{kv}"
        out_dir.mkdir(parents=True, exist_ok=True)
        llm = llama_cpp.Llama(
            str(args.model),
            n_ctx=N_CTX,
            n_batch=N_BATCH,
            n_ubatch=N_UBATCH,
            n_threads=args.threads,
            n_threads_batch=args.threads,
            flash_attn=False,
            type_k=kv_types[kv],
            type_v=kv_types[kv],
            logits_all=False,
            n_gpu_layers=0,
            verbose=False,
        )
        cp = llm.context_params
        gpl, apache = long_texts(llm, args.out)
        prompts = [
            {"name": "capital", "description": "short factual completion", "text": "The capital of France is", "parse_special": False},
            {"name": "story", "description": "story-style prompt", "text": STORY, "parse_special": False},
            {"name": "chat_boiling", "description": "Gemma chat turn format, special tokens parsed", "text": CHAT, "parse_special": True},
            {"name": "apache2_medium", "description": "~600 tokens: whole-line prefix of Apache-2.0", "text": apache, "parse_special": False},
            {"name": "gpl3_long", "description": "~2,200 tokens (> 512-token sliding window): whole-line prefix of GPL-3", "text": gpl, "parse_special": False},
        ]
        print(f"kv_{kv}: writing {out_dir}", flush=True)
        entries = [run_prompt(llm, p, out_dir) for p in prompts]
        doc = {
            "format_version": 1,
            "generator": "tools/make_gemma_golden.py",
            "command": "python3 tools/make_gemma_golden.py",
            "peer": {
                "llama_cpp_python_version": llama_cpp.__version__,
                "ggml_commit": ggml_commit(),
                "system_info": llama_cpp.llama_print_system_info().decode().strip(),
            },
            "model": {
                "file": MODEL_NAME,
                "sha256": model_sha,
                "size_bytes": args.model.stat().st_size,
                "n_vocab": llm.n_vocab(),
                "architecture": llm.metadata.get("general.architecture"),
            },
            "settings": {
                "backend": "CPU",
                "n_ctx": cp.n_ctx,
                "n_batch": cp.n_batch,
                "n_ubatch": cp.n_ubatch,
                "n_threads": cp.n_threads,
                "n_threads_batch": cp.n_threads_batch,
                "flash_attn": bool(cp.flash_attn),
                "swa_full": bool(cp.swa_full),
                "type_k": kv,
                "type_v": kv,
                "logits": "last position of each llama_decode call only (logits_all=False)",
                "prompt_eval": f"whole prompt in one llama_decode per n_batch={N_BATCH} tokens, then one token per step",
                "sampling": "greedy: argmax of raw logits, ties -> lowest id; fed back; EOS not special",
                "use_mmap": True,
            },
            "logits_file_format": "little-endian float32, n_vocab values, logits of the last prompt position",
            "prompts": entries,
        }
        (out_dir / "golden.json").write_text(dump_json(doc) + "\n")
        del llm


if __name__ == "__main__":
    main()
