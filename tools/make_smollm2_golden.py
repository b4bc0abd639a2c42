#!/usr/bin/env python3
"""Records golden data for SmolLM2-135M-Instruct (Q4_1) from the trusted peer, llama.cpp.

Dev script, not run by the test suite. It drives llama.cpp through llama-cpp-python
(0.3.16 was used) on the CPU and writes, per KV-cache type (f16 = llama.cpp's default,
f32 = exact counterpart of snapkv's F32 cache):

    tests/data/smollm2-135m/kv_f16/golden.json   (+ <prompt>.last_logits.f32)
    tests/data/smollm2-135m/kv_f32/golden.json   (+ <prompt>.last_logits.f32)

The format is that of tests/data/gemma3-270m (tools/make_gemma_golden.py), except that the
tokenization flag is called `add_special` (llama_tokenize's name for it): SmolLM2's GGUF says
add_bos_token = false, so add_special adds nothing and the ids start with the text itself.
For every prompt: the text, add_special, parse_special, the prompt token ids and a 32-step
greedy continuation (argmax of the raw logits, ties -> lowest id, fed back one token at a
time, never stopping at EOS), with per step the top-40 (id, logit) pairs of the logits that
produced the token (step 0 = last prompt position) and the top1 - top2 gap. Every prompt also
gets its whole last-prompt-position logit vector in <name>.last_logits.f32 (49152
little-endian float32 values, 192 KiB).

Reproduce (from the repository root; needs llama-cpp-python 0.3.16 and numpy, the model from
`scripts/get-model.sh smollm2` and /usr/share/common-licenses/GPL-3 (Debian's base-files; without
it the long text is read back from the existing golden.json)):

    python3 tools/make_smollm2_golden.py

llama-cpp-python must be built WITHOUT ggml's AMX kernels. On a CPU with AMX (Intel Sapphire
Rapids and later) a -DGGML_NATIVE=ON build enables them, and in the ggml of llama-cpp-python 0.3.16
(commit 4227c9b) they compute Q4_0/Q4_1 matrix products of batches of >= 32 tokens wrongly (known
upstream: ggml-org/llama.cpp PR 16315 reports AMX garbage for Q4_0/Q4_1, PR 19925 of 2026-02 reworks
the AMX code to fix it): measured on this model,
llama.cpp's batched prefill then differs from its own token-by-token decode by RMS 7.9 logits at
32 tokens, while snapkv agrees with the token-by-token decode to RMS 0.2. The script refuses such
a build. The data here came from this build (the CPU features of the peer that recorded
tests/data/gemma3-270m, an AMD Zen 4 without AMX):

    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
      -DGGML_BMI2=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON \
      -DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
      -DGGML_AMX_BF16=OFF" pip install llama-cpp-python==0.3.16 numpy

Options: --model PATH (default $SNAPKV_MODELS or ~/.cache/snapkv/models, then
SmolLM2-135M-Instruct.Q4_1.gguf), --out DIR (default tests/data/smollm2-135m), --threads N
(default 2; recorded), --kv f16,f32 (which folders to write).

llama.cpp on the CPU is deterministic for a fixed thread count; running this twice gives
byte-identical files.
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
    sys.exit("make_smollm2_golden.py: needs llama-cpp-python (pip install llama-cpp-python==0.3.16)")

from golden_common import dump_json, f32_json, ggml_commit, last_logits, model_cache, prefix_by_tokens, sha256_of, top_k

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
N_STEPS = 32
TOP_K = 40
N_CTX = 4096
N_BATCH = 512
N_UBATCH = 512
LONG_TOKENS = 3000  # the GPL-3 prefix: 2-4K tokens, the regime between the short prompts and the demo's 7.6K

GPL3 = pathlib.Path("/usr/share/common-licenses/GPL-3")
# SmolLM2's ChatML turn format as the CLI's --chat writes it (and llama.cpp's "chatml" template):
# no system turn.
CHAT = (
    "<|im_start|>user\nWhat is the boiling point of water in Celsius?<|im_end|>\n"
    "<|im_start|>assistant\n"
)


def gpl3_long(llm: llama_cpp.Llama, out_dir: pathlib.Path) -> str:
    """Whole-line GPL-3 prefix of >= LONG_TOKENS tokens; falls back to the stored text."""
    if GPL3.is_file():
        return prefix_by_tokens(llm, GPL3.read_text(), LONG_TOKENS)
    old = out_dir / "kv_f16" / "golden.json"
    if not old.is_file():
        raise SystemExit(f"make_smollm2_golden.py: neither {GPL3} nor {old} exists")
    return {p["name"]: p["text"] for p in json.loads(old.read_text())["prompts"]}["gpl3_long"]


def run_prompt(llm: llama_cpp.Llama, p: dict, out_dir: pathlib.Path) -> dict:
    ids = llm.tokenize(p["text"].encode(), add_bos=True, special=p["parse_special"])  # add_bos = add_special
    if len(ids) + N_STEPS > N_CTX:
        raise SystemExit(f"prompt {p['name']}: {len(ids)} tokens do not fit n_ctx={N_CTX}")
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(ids)
    logits = last_logits(llm)
    fname = f"{p['name']}.last_logits.f32"
    logits.astype("<f4").tofile(out_dir / fname)
    entry = {
        "name": p["name"],
        "description": p["description"],
        "text": p["text"],
        "add_special": True,
        "parse_special": p["parse_special"],
        "n_prompt_tokens": len(ids),
        "token_ids": ids,
        "last_logits_file": fname,
    }
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
            logits = last_logits(llm)
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
    ap.add_argument("--model", type=pathlib.Path, default=model_cache() / MODEL_NAME)
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "tests" / "data" / "smollm2-135m")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kv", default="f16,f32", help="comma list of KV types: f16, f32")
    args = ap.parse_args()
    if not args.model.is_file():
        sys.exit(f"make_smollm2_golden.py: model not found: {args.model} (run scripts/get-model.sh smollm2)")

    system_info = llama_cpp.llama_print_system_info().decode()
    if "AMX_INT8 = 1" in system_info:
        sys.exit("make_smollm2_golden.py: this llama-cpp-python uses ggml's AMX kernels, wrong for Q4_1 batches "
                 "in 0.3.16; rebuild it without them (see the docstring)")
    kv_types = {"f16": llama_cpp.GGML_TYPE_F16, "f32": llama_cpp.GGML_TYPE_F32}
    model_sha = sha256_of(args.model)
    for kv in args.kv.split(","):
        if kv not in kv_types:
            sys.exit(f"make_smollm2_golden.py: unknown --kv type {kv!r}")
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
        prompts = [
            {"name": "capital", "description": "short factual completion, no chat format", "text": "The capital of France is", "parse_special": False},
            {"name": "chat_boiling", "description": "ChatML user turn + assistant prompt, special tokens parsed", "text": CHAT, "parse_special": True},
            {"name": "gpl3_long", "description": f"~{LONG_TOKENS} tokens: whole-line prefix of GPL-3", "text": gpl3_long(llm, args.out), "parse_special": False},
        ]
        print(f"kv_{kv}: writing {out_dir}", flush=True)
        entries = [run_prompt(llm, p, out_dir) for p in prompts]
        doc = {
            "format_version": 1,
            "generator": "tools/make_smollm2_golden.py",
            "command": "python3 tools/make_smollm2_golden.py",
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
