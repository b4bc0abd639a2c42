#!/usr/bin/env python3
"""Side-by-side speed: snapkv vs llama.cpp on the same model, prompt tokens and threads.

For each prompt length (default 512 and 4,096 tokens, BOS included; prefixes of the GPL-3
text, repeated when needed) both engines prefill the same token ids and then generate
--n-gen tokens greedily with EOS ignored, in fresh processes, alternating peers within
each of --reps repetitions. Reported: medians of prefill tokens/s, decode tokens/s and
time to first token, and the ratio snapkv / llama.cpp, as a Markdown table.

  snapkv:    build/snapkv run -m MODEL -f PROMPT -n N -t T --temp 0 --ignore-eos --json
             -c CTX --kv-type KV --press none [--prefill-attn A]   (its JSON timings)
  llama.cpp: llama-cpp-python (bench/llamacpp_worker.py), n_batch 2048 / n_ubatch 512
             (llama.cpp's defaults; --n-batch / --n-ubatch), flash attention off AND on
             (--flash-attn both, the default: two peers, the table compares against the
             faster of them per column), KV cache type KV; llama_perf_context timings.

Both peers get the same thread count (-t), KV cache element type (--kv-type, default f16,
llama.cpp's default) and context size (prompt + n_gen). The prompt text is cut so that
llama.cpp's tokenizer gives exactly the wanted count; the script checks that `snapkv
tokenize` yields the identical ids and that both runs report that prompt length.

Usage (from the repository root):
    python3 bench/bench_vs_llamacpp.py                 # 2 threads, 512 and 4096, 3 reps
    python3 bench/bench_vs_llamacpp.py --llama-only    # llama.cpp half only
    python3 bench/bench_vs_llamacpp.py -t 2 --prompt-tokens 512,4096 --n-gen 128 --reps 3 --json-out r.json
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile

import benchlib as bl


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="snapkv vs llama.cpp: prefill and decode tokens/s")
    ap.add_argument("--snapkv", type=pathlib.Path, default=bl.ROOT / "build" / "snapkv", help="snapkv CLI (default build/snapkv)")
    ap.add_argument("-m", "--model", type=pathlib.Path, default=bl.default_model())
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", default="512,4096", help="comma list of prompt lengths in tokens (BOS included)")
    ap.add_argument("-n", "--n-gen", type=int, default=128, help="generated tokens per run")
    ap.add_argument("-r", "--reps", type=int, default=3, help="repetitions per peer; medians are reported")
    ap.add_argument("--kv-type", choices=["f16", "f32", "q8_0", "q4_0"], default="f16",
                    help="KV cache element type on both sides (q8_0 / q4_0: llama.cpp needs flash attention on for a "
                         "quantized V cache, so only its FA-on peer runs)")
    ap.add_argument("--kv-type-v", choices=["f16", "f32", "q8_0", "q4_0"], default=None,
                    help="values' KV type on both sides (default: --kv-type's; e.g. --kv-type q8_0 --kv-type-v q4_0)")
    bl.add_prefill_attn_arg(ap)
    ap.add_argument("--text", type=pathlib.Path, default=None, help="prompt source text (default GPL-3)")
    ap.add_argument("--llama-only", action="store_true", help="measure llama.cpp only (no snapkv binary needed)")
    ap.add_argument("--allow-token-mismatch", action="store_true", help="continue when the peers tokenize differently")
    bl.add_contention_args(ap)
    ap.add_argument("--json-out", type=pathlib.Path, default=None, help="also write every raw measurement here")
    ap.add_argument("--flash-attn", choices=["off", "on", "both"], default="both",
                    help="llama.cpp's flash attention: off, on, or both as two peers (default)")
    ap.add_argument("--n-batch", type=int, default=2048, help="llama.cpp n_batch (its default 2048)")
    ap.add_argument("--n-ubatch", type=int, default=512, help="llama.cpp n_ubatch (its default 512)")
    a = ap.parse_args()
    if a.threads < 1 or a.n_gen < 2 or a.reps < 1:
        bl.fail("need --threads >= 1, --n-gen >= 2, --reps >= 1")
    return a


def check_prompt_ids(a: argparse.Namespace, counter: bl.LlamaTokenCounter, text: str, n: int) -> tuple[list[int], str]:
    ids = counter.ids(text)
    if len(ids) != n:
        bl.fail(f"could not cut the text to exactly {n} tokens (got {len(ids)}); try another --text")
    if a.llama_only:
        return ids, "n/a"
    try:
        ours = bl.SnapkvTokenCounter(a.snapkv, a.model).ids(text)
    except (RuntimeError, ValueError) as e:
        return ids, f"unchecked ({e})"
    if ours == ids:
        return ids, "identical"
    first = next((i for i, (x, y) in enumerate(zip(ours, ids)) if x != y), min(len(ours), len(ids)))
    msg = f"token ids differ for the {n}-token prompt: snapkv {len(ours)} ids, llama.cpp {len(ids)}, first difference at {first}"
    if not a.allow_token_mismatch:
        bl.fail(msg + " (--allow-token-mismatch to continue)")
    print(f"warning: {msg}", file=sys.stderr)
    return ids, "DIFFERENT"


def main() -> None:
    a = parse_args()
    bl.require_file(a.model, "model", "run scripts/get-model.sh or pass -m")
    if not a.llama_only:
        bl.require_file(a.snapkv, "snapkv CLI", "build it: scripts/build.sh, or pass --snapkv / --llama-only")
    vers = bl.llama_cpp_versions()
    if vers["llama_cpp_python"] is None:
        bl.fail("llama-cpp-python is not installed (pip install llama-cpp-python==0.3.16)")
    lengths = [int(x) for x in a.prompt_tokens.split(",") if x]
    counter = bl.LlamaTokenCounter(a.model)
    source = bl.source_text(a.text)
    bl.warn_if_busy(a.threads)

    tmp = tempfile.TemporaryDirectory(prefix="snapkv-bench-")
    prompts = {}
    for n in lengths:
        text, _ = bl.text_with_tokens(counter, source, n)
        ids, check = check_prompt_ids(a, counter, text, n)
        path = pathlib.Path(tmp.name) / f"prompt_{n}.txt"
        path.write_text(text)
        prompts[n] = {"file": path, "ids": ids, "tokenizer_check": check}

    fa = {"off": [False], "on": [True], "both": [False, True]}[a.flash_attn]
    kv_v = a.kv_type_v or a.kv_type
    quant = ("q8_0", "q4_0")
    if kv_v != a.kv_type and not (kv_v in quant and a.kv_type in quant):
        bl.fail(f"--kv-type {a.kv_type} with --kv-type-v {kv_v}: snapkv mixes only quantized types (q8_0 / q4_0)")
    if kv_v in ("q8_0", "q4_0") or a.kv_type in ("q8_0", "q4_0"):
        if a.flash_attn == "off":
            bl.fail(f"--kv-type {a.kv_type} / --kv-type-v {kv_v}: llama.cpp quantizes the V cache only with flash "
                    "attention on")
        fa = [True]
    llama_peers = [f"llama.cpp FA {'on' if f else 'off'}" for f in fa]
    peers = ([] if a.llama_only else ["snapkv"]) + llama_peers
    raw: dict[int, dict[str, list[dict]]] = {n: {p: [] for p in peers} for n in lengths}
    for rep in range(a.reps):
        for n in lengths:
            n_ctx = n + a.n_gen
            order = peers if rep % 2 == 0 else peers[::-1]
            for peer in order:
                if peer == "snapkv" and a.llama_only:
                    continue
                for attempt in range(a.max_tries):
                    if a.max_contention < 1:
                        bl.wait_quiet(a.max_contention, a.quiet_wait)
                    with bl.Contention() as busy:
                        if peer == "snapkv":
                            r = bl.run_snapkv(
                                a.snapkv,
                                ["-m", a.model, "-f", prompts[n]["file"], "-n", a.n_gen, "-t", a.threads, "--temp", "0",
                                 "--ignore-eos", "-c", n_ctx, "--kv-type", a.kv_type,
                                 *(["--kv-type-v", a.kv_type_v] if a.kv_type_v else []), "--press", "none",
                                 *bl.prefill_attn_args(a)],
                            )
                        else:
                            r = bl.run_llamacpp(
                                {"model": str(a.model), "token_ids": prompts[n]["ids"], "n_gen": a.n_gen,
                                 "threads": a.threads, "n_ctx": n_ctx, "kv_type": a.kv_type, "kv_type_v": kv_v,
                                 "n_batch": a.n_batch,
                                 "n_ubatch": a.n_ubatch, "flash_attn": peer.endswith("on")}
                            )
                    r["other_cpu_share"] = busy.share
                    if busy.share is None or busy.share <= a.max_contention:
                        break
                    print(f"  {peer} {n}: other processes used {100 * busy.share:.0f}% of the CPUs; "
                          f"retry {attempt + 1}/{a.max_tries}", file=sys.stderr, flush=True)
                if r["n_prompt_tokens"] != n:
                    bl.fail(f"{peer} reports {r['n_prompt_tokens']} prompt tokens, expected {n}")
                if r["n_generated_tokens"] != a.n_gen:
                    bl.fail(f"{peer} generated {r['n_generated_tokens']} tokens, expected {a.n_gen}")
                raw[n][peer].append(r)
                share = "?" if busy.share is None else f"{100 * busy.share:.0f}%"
                print(
                    f"rep {rep + 1}/{a.reps} {n:6d} tok {peer:16s} prefill {r['prefill_tokens_per_s']:8.1f} tok/s  "
                    f"decode {r['decode_tokens_per_s']:7.1f} tok/s  (other CPU use {share})",
                    file=sys.stderr,
                    flush=True,
                )

    def med(n: int, peer: str, key: str) -> float:
        return bl.median([r[key] for r in raw[n][peer]])

    rows = []
    for n in lengths:
        lp = {p: med(n, p, "prefill_tokens_per_s") for p in llama_peers}
        ld = {p: med(n, p, "decode_tokens_per_s") for p in llama_peers}
        lt = {p: med(n, p, "ttft_ms") for p in llama_peers}
        best_p, best_d = max(lp.values()), max(ld.values())
        cells = [n]
        if a.llama_only:
            cells += ["-"] + [f"{lp[p]:.1f}" for p in llama_peers] + ["-"]  # prefill snapkv, llama.cpp, ratio
            cells += ["-"] + [f"{ld[p]:.1f}" for p in llama_peers] + ["-"]  # decode snapkv, llama.cpp, ratio
            cells += ["-"] + [f"{lt[p]:.0f}" for p in llama_peers] + ["-"]  # TTFT snapkv, llama.cpp, agreement
            rows.append(cells)
            continue
        op, od, ot = (med(n, "snapkv", k) for k in ("prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms"))
        ours_ids = raw[n]["snapkv"][0]["generated_token_ids"]
        agree = []
        for p in llama_peers:
            theirs = raw[n][p][0]["generated_token_ids"]
            agree.append(str(next((i for i, (x, y) in enumerate(zip(ours_ids, theirs)) if x != y),
                                  min(len(ours_ids), len(theirs)))))
        cells += [f"{op:.1f}"] + [f"{lp[p]:.1f}" for p in llama_peers] + [f"{op / best_p:.2f}"]
        cells += [f"{od:.1f}"] + [f"{ld[p]:.1f}" for p in llama_peers] + [f"{od / best_d:.2f}"]
        cells += [f"{ot:.0f}"] + [f"{lt[p]:.0f}" for p in llama_peers]
        cells += [f"{'/'.join(agree)} of {a.n_gen} ({prompts[n]['tokenizer_check']})"]
        rows.append(cells)

    kv_desc = a.kv_type if kv_v == a.kv_type else f"{a.kv_type} keys, {kv_v} values"
    print(f"## snapkv vs llama.cpp: {a.model.name}, {a.threads} threads, KV {kv_desc}, {a.n_gen} generated tokens, "
          f"median of {a.reps}; snapkv prefill attention {bl.prefill_attn_name(a)}; llama.cpp n_batch {a.n_batch}, n_ubatch {a.n_ubatch}\n")
    extra = {"llama-cpp-python": f"{vers['llama_cpp_python']} (ggml {vers['ggml_commit']})", "model": a.model.name}
    if not a.llama_only:
        extra["snapkv binary"] = f"{a.snapkv} ({bl.snapkv_version(a.snapkv)})"
    print("\n".join(bl.header_lines(extra)) + "\n")
    short = [p.replace("llama.cpp ", "") for p in llama_peers]
    print(
        bl.md_table(
            ["prompt tokens", "prefill tok/s snapkv"] + [f"prefill llama.cpp {s}" for s in short] + ["ratio vs best"]
            + ["decode tok/s snapkv"] + [f"decode llama.cpp {s}" for s in short] + ["ratio vs best"]
            + ["TTFT ms snapkv"] + [f"TTFT ms llama.cpp {s}" for s in short]
            + ["greedy tokens equal (per llama.cpp peer; prompt ids)"],
            rows,
        )
    )
    print(
        "\nratio vs best = snapkv / the faster llama.cpp setting in that column (> 1: snapkv faster). Decode tok/s = "
        "(n_gen - 1) single-token steps / their time; TTFT includes prefill. llama.cpp timings: llama_perf_context."
    )
    shares = [r["other_cpu_share"] for n in lengths for p in raw[n].values() for r in p if r["other_cpu_share"] is not None]
    if shares:
        print(f"Other processes' share of the CPUs during the kept runs: at most {100 * max(shares):.0f}% "
              f"(--max-contention {a.max_contention:g}).")
    if a.json_out:
        a.json_out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()}, "results": raw}, indent=1))


if __name__ == "__main__":
    main()
