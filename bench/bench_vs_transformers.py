#!/usr/bin/env python3
"""Side-by-side speed: snapkv vs PyTorch (Hugging Face transformers) on the same GGUF model,
prompt token ids and threads (issue 13).

For each prompt length (default 512 and 4,096 tokens; prefixes of the GPL-3 text, repeated
when needed) both peers prefill the same token ids and then generate --n-gen tokens greedily
with EOS ignored, in fresh processes, alternating peers within each of --reps repetitions.
Reported: medians of prefill tokens/s, decode tokens/s and time to first token, the ratios
snapkv / transformers, and whether snapkv's prefill reaches --goal (default 1.5) times the
peer's on every row, as a Markdown table.

  snapkv:       build/snapkv run -m MODEL -f PROMPT -n N -t T --temp 0 --ignore-eos --json
                -c CTX --kv-type KV --press none [--prefill-attn A]   (its JSON timings)
  transformers: bench/transformers_worker.py: AutoModelForCausalLM.from_pretrained(dir,
                gguf_file=NAME, dtype=torch.float32, attn_implementation="sdpa") (every
                weight dequantized to f32), torch.set_num_threads(T),
                set_num_interop_threads(1), OMP_NUM_THREADS=T; prefill = one forward over
                the prompt ids with the KV cache on (last position's logits only, as
                generate() does), then one forward per generated token with the cache, all
                under torch.inference_mode(); perf_counter timings around the calls, after a
                short untimed warm-up (--no-warmup to drop it).

The prompt text is cut so that `snapkv tokenize` gives exactly the wanted count (BOS
included when the model adds one); its ids go to the transformers worker, and the script
checks that both runs report that prompt length. Both peers use -t threads. snapkv's KV
cache is --kv-type (default f16); transformers' cache holds f32 (its dtype). Model loading
is excluded on both sides (the worker reports its load time apart). The decode of
transformers reads f32 weights (4x the bytes of snapkv's 4-5 bit ones).

Requirements: pip install torch transformers accelerate gguf (transformers' GGUF loader
needs accelerate and gguf).

Usage (from the repository root):
    python3 bench/bench_vs_transformers.py                      # Gemma 3 270M, 2 threads, 512 and 4096, 3 reps
    python3 bench/bench_vs_transformers.py -m "$(scripts/get-model.sh smollm2)"
    python3 bench/bench_vs_transformers.py -m smollm2 -t 2 --prompt-tokens 512,4096,8192 --n-gen 64 --reps 3 --json-out r.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import benchlib as bl

MODEL_NAMES = {"gemma3": bl.MODEL_NAME, "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf"}


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="snapkv vs PyTorch/transformers: prefill and decode tokens/s")
    ap.add_argument("--snapkv", type=pathlib.Path, default=bl.ROOT / "build" / "snapkv", help="snapkv CLI (default build/snapkv)")
    ap.add_argument("-m", "--model", default=str(bl.default_model()),
                    help="GGUF file, or gemma3 / smollm2 (from the model cache; default gemma3)")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", default="512,4096", help="comma list of prompt lengths in tokens")
    ap.add_argument("-n", "--n-gen", type=int, default=128, help="generated tokens per run")
    ap.add_argument("-r", "--reps", type=int, default=3, help="repetitions per peer; medians are reported")
    ap.add_argument("--kv-type", choices=["f16", "f32", "q8_0", "q4_0"], default="f16", help="snapkv's KV cache element type")
    bl.add_prefill_attn_arg(ap)
    ap.add_argument("--text", type=pathlib.Path, default=None, help="prompt source text (default GPL-3)")
    ap.add_argument("--goal", type=float, default=1.5, help="prefill ratio snapkv / transformers to reach on every row")
    ap.add_argument("--no-warmup", action="store_true", help="no untimed warm-up forward in the transformers worker")
    bl.add_contention_args(ap)
    ap.add_argument("--json-out", type=pathlib.Path, default=None, help="also write every raw measurement here")
    a = ap.parse_args()
    if a.threads < 1 or a.n_gen < 2 or a.reps < 1:
        bl.fail("need --threads >= 1, --n-gen >= 2, --reps >= 1")
    a.model = pathlib.Path(a.model)
    if not a.model.is_file() and str(a.model) in MODEL_NAMES:
        a.model = bl.default_model().parent / MODEL_NAMES[str(a.model)]
    return a


def run_transformers(request: dict, threads: int, timeout: float = 3600) -> dict:
    """Runs one transformers measurement in a fresh process (transformers_worker.py)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), TQDM_DISABLE="1")
    cmd = [sys.executable, str(bl.BENCH / "transformers_worker.py")]
    try:
        r = subprocess.run(cmd, input=json.dumps(request), capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        bl.fail(f"transformers worker timed out after {timeout:.0f} s")
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        bl.fail(f"transformers worker exited with {r.returncode}:\n{r.stderr.strip()[-3000:]}")
    return json.loads(lines[-1])


def make_prompts(a: argparse.Namespace, lengths: list[int], tmp: pathlib.Path) -> dict[int, dict]:
    """Per length: a text file of exactly n snapkv tokens and its ids."""
    counter = bl.SnapkvTokenCounter(a.snapkv, a.model)
    source = bl.source_text(a.text)
    prompts = {}
    for n in lengths:
        try:
            text, _ = bl.text_with_tokens(counter, source, n)
            ids = counter.ids(text)
        except RuntimeError as e:
            bl.fail(str(e))
        if len(ids) != n:
            bl.fail(f"could not cut the text to exactly {n} tokens (got {len(ids)}); try another --text")
        path = tmp / f"prompt_{n}.txt"
        path.write_text(text)
        prompts[n] = {"file": path, "ids": ids}
    return prompts


def measure(a: argparse.Namespace, peer: str, n: int, prompt: dict) -> dict:
    """One run of `peer`, redone (up to --max-tries) while other processes used too much CPU
    (for transformers: during its timed part, as the worker measures it)."""
    for attempt in range(a.max_tries):
        if a.max_contention < 1:
            bl.wait_quiet(a.max_contention, a.quiet_wait)
        with bl.Contention() as busy:
            if peer == "snapkv":
                r = bl.run_snapkv(
                    a.snapkv,
                    ["-m", a.model, "-f", prompt["file"], "-n", a.n_gen, "-t", a.threads, "--temp", "0",
                     "--ignore-eos", "-c", n + a.n_gen, "--kv-type", a.kv_type, "--press", "none",
                     *bl.prefill_attn_args(a)],
                )
            else:
                r = run_transformers({"model": str(a.model), "token_ids": prompt["ids"], "n_gen": a.n_gen,
                                      "threads": a.threads, "warmup": not a.no_warmup}, a.threads)
        # The worker's own figure covers its timed part only, not its long model load.
        share = r["other_cpu_share"] = r.get("other_cpu_share_timed", busy.share)
        if share is None or share <= a.max_contention:
            break
        print(f"  {peer} {n}: other processes used {100 * share:.0f}% of the CPUs; "
              f"retry {attempt + 1}/{a.max_tries}", file=sys.stderr, flush=True)
    if r["n_prompt_tokens"] != n:
        bl.fail(f"{peer} reports {r['n_prompt_tokens']} prompt tokens, expected {n}")
    if r["n_generated_tokens"] != a.n_gen:
        bl.fail(f"{peer} generated {r['n_generated_tokens']} tokens, expected {a.n_gen}")
    return r


def report(a: argparse.Namespace, lengths: list[int], raw: dict[int, dict[str, list[dict]]]) -> None:
    def med(n: int, peer: str, key: str) -> float:
        return bl.median([r[key] for r in raw[n][peer]])

    rows, met = [], True
    for n in lengths:
        op, od, ot = (med(n, "snapkv", k) for k in ("prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms"))
        tp, td, tt = (med(n, "transformers", k) for k in ("prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms"))
        ours, theirs = raw[n]["snapkv"][0]["generated_token_ids"], raw[n]["transformers"][0]["generated_token_ids"]
        agree = next((i for i, (x, y) in enumerate(zip(ours, theirs)) if x != y), min(len(ours), len(theirs)))
        met = met and op / tp >= a.goal
        rows.append([n, f"{op:.1f}", f"{tp:.1f}", f"{op / tp:.2f}", "yes" if op / tp >= a.goal else "NO",
                     f"{od:.1f}", f"{td:.1f}", f"{od / td:.2f}", f"{ot:.0f}", f"{tt:.0f}", f"{tt / ot:.2f}",
                     f"{agree} of {a.n_gen}"])

    info = raw[lengths[0]]["transformers"][0]
    print(f"## snapkv vs transformers: {a.model.name}, {a.threads} threads, {a.n_gen} generated tokens, median of "
          f"{a.reps}; snapkv KV {a.kv_type}, prefill attention {bl.prefill_attn_name(a)}, transformers f32 weights + KV, SDPA\n")
    extra = {
        "snapkv binary": f"{a.snapkv} ({bl.snapkv_version(a.snapkv)})",
        "torch": f"{info['torch']} ({info['torch_threads']} intra-op threads, 1 inter-op)",
        "transformers": f"{info['transformers']} ({info['model_class']}, attn {info['attn_implementation']}, "
                        f"{info['dtype']}, {info['cache_class']}, warm-up {'on' if info['warmup'] else 'off'})",
        "model": a.model.name,
    }
    print("\n".join(bl.header_lines(extra)) + "\n")
    print(bl.md_table(
        ["prompt tokens", "prefill tok/s snapkv", "prefill tok/s transformers", "ratio", f">= {a.goal:g}x",
         "decode tok/s snapkv", "decode tok/s transformers", "ratio", "TTFT ms snapkv", "TTFT ms transformers",
         "TTFT speedup", "greedy tokens equal"],
        rows,
    ))
    loads = [r["load_s"] for n in lengths for r in raw[n]["transformers"]]
    print(f"\nratio = snapkv / transformers (> 1: snapkv faster); TTFT speedup = transformers TTFT / snapkv TTFT. "
          f"Decode tok/s = (n_gen - 1) single-token steps / their time; TTFT includes prefill. Prefill goal "
          f"(>= {a.goal:g}x on every row): {'met' if met else 'NOT met'}. transformers model load (excluded): "
          f"median {bl.median(loads):.1f} s. Greedy tokens equal = leading generated tokens identical in the first "
          f"rep (transformers computes in f32 on dequantized weights, snapkv with its own kernels: near-ties can flip).")
    shares = [r["other_cpu_share"] for n in lengths for p in raw[n].values() for r in p if r["other_cpu_share"] is not None]
    if shares:
        print(f"Other processes' share of the CPUs during the kept runs: at most {100 * max(shares):.0f}% "
              f"(--max-contention {a.max_contention:g}).")


def main() -> None:
    a = parse_args()
    bl.require_file(a.model, "model", "run scripts/get-model.sh [gemma3|smollm2] or pass -m")
    bl.require_file(a.snapkv, "snapkv CLI", "build it: scripts/build.sh, or pass --snapkv")
    missing = [m for m in ("torch", "transformers", "accelerate", "gguf") if importlib.util.find_spec(m) is None]
    if missing:
        bl.fail(f"not installed: {', '.join(missing)} (pip install torch transformers accelerate gguf)")
    lengths = [int(x) for x in a.prompt_tokens.split(",") if x]
    bl.warn_if_busy(a.threads)
    tmp = tempfile.TemporaryDirectory(prefix="snapkv-bench-")
    prompts = make_prompts(a, lengths, pathlib.Path(tmp.name))

    peers = ["snapkv", "transformers"]
    raw: dict[int, dict[str, list[dict]]] = {n: {p: [] for p in peers} for n in lengths}
    for rep in range(a.reps):
        for n in lengths:
            for peer in peers if rep % 2 == 0 else peers[::-1]:
                r = measure(a, peer, n, prompts[n])
                raw[n][peer].append(r)
                share = "?" if r["other_cpu_share"] is None else f"{100 * r['other_cpu_share']:.0f}%"
                print(f"rep {rep + 1}/{a.reps} {n:6d} tok {peer:12s} prefill {r['prefill_tokens_per_s']:8.1f} tok/s  "
                      f"decode {r['decode_tokens_per_s']:7.1f} tok/s  TTFT {r['ttft_ms']:8.0f} ms  "
                      f"(other CPU use {share})", file=sys.stderr, flush=True)
    report(a, lengths, raw)
    if a.json_out:
        a.json_out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()}, "results": raw}, indent=1))


if __name__ == "__main__":
    main()
