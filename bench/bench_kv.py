#!/usr/bin/env python3
"""SnapKV vs full KV cache: decode speed, KV memory and TTFT against prompt length.

For each model (the Gemma 3 270M Q4_K_M, and a synthetic GGUF with SmolLM2-135M's
shapes and random Q8_0 weights made by build/make_synthetic_gguf) and each prompt length
(default 1K, 4K, 8K, 16K, 32K tokens; K = 1024), runs

    build/snapkv run -m MODEL -f PROMPT -n 128 -t T --temp 0 --ignore-eos --json -c CTX --press none
    build/snapkv run ... --press snapkv --budget 1024

with the same thread count, and prints a Markdown table: TTFT, decode tokens/s,
kv_cache_bytes, peak_kv_cache_bytes, the decode speedup snapkv / none, and a
memory-bandwidth bound per row:

    bytes per decoded token = weight bytes read per token + KV bytes held (kv_cache_bytes)
    bound tokens/s          = read bandwidth / bytes per decoded token
    achieved                = decode tokens/s / bound

Weight bytes read per token: every tensor of the GGUF, except the token-embedding matrix
when the model has a separate output matrix (then only one embedding row is read; with
tied embeddings, as in Gemma, the whole matrix is read as the output projection).
Read bandwidth: measured here with numpy (max-reduction of a 1 GiB float32 array split
over T threads, best of 3), right before and right after every engine run, because a
VM's bandwidth can move by a third within minutes; a row's bound uses the highest of
its readings (the strictest bound), and the table shows the range read around the row.
A second column, "achieved at run median", divides by the bound at the median of all the
run's readings instead, so rows of different runs compare (now and then a reading jumps to
~1.5x the others; beside a row it lowers the strict column by a third).
--bandwidth-gbs gives one value for every row instead.

Prompts are prefixes of the GPL-3 text, repeated, with an exact token count: for Gemma
llama.cpp's tokenizer when llama-cpp-python is installed (also exactly what snapkv reports
in n_prompt_tokens), otherwise `snapkv tokenize -f` (the engine's own tokenizer, reading a
file, so 32K-token prompts are counted exactly too); the table shows the n_prompt_tokens
the engine reported. A prompt plus the generated tokens is capped at the model's training
context (--no-cap to lift that; the synthetic model's weights are random, so its training
context means nothing).

Usage (from the repository root):
    python3 bench/bench_kv.py                                  # everything: long (32K prefills)
    python3 bench/bench_kv.py --models gemma --lengths 1K,4K   # a quick subset
    python3 bench/bench_kv.py --bandwidth-gbs 35 --json-out kv.json
    python3 bench/bench_kv.py --models synthetic --lengths 16K --profile   # + decode time per operation
    python3 bench/bench_kv.py --models synthetic --lengths 32K --decode-reps 5  # decode again and again

--decode-reps N prefills each row once (`--save-session FILE`, `-n 0`; its prefill time is the
TTFT column) and then decodes N times from the saved context in fresh processes
(`--load-session FILE --question " x" -n 128 --ignore-eos`), each decode between two bandwidth
readings of its own: a long prompt's decode can then be measured many times for one prefill,
and each decode's strict share uses the readings next to it. Then "decode tok/s" is the median
of the N decodes, "bound tok/s" the median of their bounds (each at the higher of its two
readings), "achieved" the median of their shares, and "read GB/s" the range of all the row's
readings. The context gets 16 tokens more for the question (it is tokenized after a "\n\n"
separator), so capped prompts are 16 tokens shorter; a decode that generates fewer than -n
tokens is an error row.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import benchlib as bl

MODELS = ("gemma", "synthetic")
SYNTH_LABEL = "synthetic (SmolLM2-135M shapes, random Q8_0)"


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="SnapKV vs full KV cache: decode tok/s, KV bytes, TTFT")
    ap.add_argument("--snapkv", type=pathlib.Path, default=bl.ROOT / "build" / "snapkv", help="snapkv CLI (default build/snapkv)")
    ap.add_argument("-m", "--model", type=pathlib.Path, default=bl.default_model(), help="the Gemma GGUF")
    ap.add_argument("--synthetic", type=pathlib.Path, default=None, help="synthetic GGUF (default: made with --make-synthetic)")
    ap.add_argument("--make-synthetic", type=pathlib.Path, default=bl.ROOT / "build" / "make_synthetic_gguf")
    ap.add_argument("--models", default="gemma,synthetic", help="comma list of: gemma, synthetic")
    ap.add_argument("--lengths", default="1K,4K,8K,16K,32K", help="prompt lengths in tokens (K = 1024)")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("--budget", type=int, default=1024, help="SnapKV budget (tokens kept per KV head)")
    ap.add_argument("-r", "--reps", type=int, default=1, help="repetitions (medians of tok/s and TTFT)")
    ap.add_argument("--decode-reps", type=int, default=0, metavar="N",
                    help="prefill each row once (--save-session) and decode N times from the saved context in "
                         "fresh processes, each between its own bandwidth readings; replaces -r")
    ap.add_argument("--kv-type", choices=["f16", "f32", "q8_0", "q4_0"], default=None, help="KV cache type (default: the engine's)")
    ap.add_argument("--kv-type-v", choices=["f16", "f32", "q8_0", "q4_0"], default=None,
                    help="KV cache type of values (default: --kv-type's; e.g. --kv-type q8_0 --kv-type-v q4_0)")
    bl.add_prefill_attn_arg(ap)
    ap.add_argument("--bandwidth-gbs", type=float, default=None, help="read bandwidth in GB/s (default: measure)")
    ap.add_argument("--no-cap", action="store_true", help="do not cap prompt + n_gen at the training context")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per engine run")
    ap.add_argument("--text", type=pathlib.Path, default=None, help="prompt source text (default GPL-3)")
    ap.add_argument("--json-out", type=pathlib.Path, default=None, help="also write every raw report here")
    ap.add_argument("--profile", action="store_true",
                    help="run snapkv with --profile and add a table of decode time and GB/s per operation group")
    a = ap.parse_args()
    a.model_list = [m for m in a.models.split(",") if m]
    if not a.model_list or any(m not in MODELS for m in a.model_list):
        bl.fail(f"--models takes a comma list of {', '.join(MODELS)}, got {a.models!r}")
    try:
        a.length_list = [parse_length(x) for x in a.lengths.split(",") if x]
    except ValueError:
        bl.fail(f"--lengths: expected e.g. 1K,4K,4096, got {a.lengths!r}")
    if a.threads < 1 or a.n_gen < 2 or a.reps < 1 or a.budget < 1 or a.decode_reps < 0:
        bl.fail("need --threads >= 1, --n-gen >= 2, --reps >= 1, --budget >= 1, --decode-reps >= 0")
    if a.decode_reps and a.reps != 1:
        bl.fail("--decode-reps replaces --reps: give one of them")
    return a


def parse_length(s: str) -> int:
    s = s.strip().upper()
    n = int(s[:-1]) * 1024 if s.endswith("K") else int(s)
    if n < 2:
        raise ValueError(s)
    return n


def measure_bandwidth(threads: int, n_bytes: int = 1 << 30, reps: int = 5) -> float:
    """Read bandwidth in GB/s (1e9 B/s): threaded max-reduction over a float32 array."""
    a = np.ones(n_bytes // 4, dtype=np.float32)
    chunks = np.array_split(a, threads * 8)
    best = float("inf")
    with ThreadPoolExecutor(threads) as ex:
        for _ in range(reps):
            t0 = time.perf_counter()
            list(ex.map(lambda c: c.max(), chunks))
            best = min(best, time.perf_counter() - t0)
    return a.nbytes / best / 1e9


def gguf_info(path: pathlib.Path) -> dict:
    """Architecture, training context and weight bytes read per decoded token of a GGUF."""
    from gguf import GGUFReader

    r = GGUFReader(str(path))

    def field(key: str):
        f = r.fields.get(key)
        if f is None:
            return None
        v = f.parts[f.data[0]]
        return bytes(v).decode() if f.types and f.types[0].name == "STRING" else int(v[0])

    arch = field("general.architecture")
    sizes = {t.name: int(t.n_bytes) for t in r.tensors}
    total = sum(sizes.values())
    emb = sizes.get("token_embd.weight", 0)
    tied = "output.weight" not in sizes
    return {
        "arch": arch,
        "ctx_train": field(f"{arch}.context_length"),
        "weights_bytes": total,
        "weights_bytes_per_token": total if tied else total - emb,
        "tied_output": tied,
    }


def make_synthetic(a: argparse.Namespace, tmp: pathlib.Path) -> pathlib.Path:
    if a.synthetic is not None:
        return bl.require_file(a.synthetic, "synthetic GGUF", "--synthetic")
    tool = bl.require_file(a.make_synthetic, "make_synthetic_gguf", "build it, pass --synthetic FILE, or --models gemma")
    out = tmp / "synthetic-smollm2-135m-q8_0.gguf"
    r = subprocess.run([str(tool), "-o", str(out)], capture_output=True, text=True)
    if r.returncode != 0 or not out.is_file():
        bl.fail(f"{tool} -o {out} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    return out


def counter_for(a: argparse.Namespace, key: str, model: pathlib.Path):
    """Token count function. Gemma: llama.cpp's tokenizer if available (the golden tests pin
    snapkv's to it). Otherwise `snapkv tokenize -f` (the engine's own; exact at any length)."""
    if key == "gemma":
        try:
            return bl.LlamaTokenCounter(model)
        except Exception:  # llama-cpp-python absent
            pass
    return bl.SnapkvTokenCounter(a.snapkv, model)


# --decode-reps: context tokens kept free for the question " x" (tokenized after a "\n\n" separator:
# up to 9 tokens on the synthetic model's vocabulary) so that every decode makes all -n tokens.
QUESTION_RESERVE = 16


def prefill_and_save(a: argparse.Namespace, args: list, session: pathlib.Path) -> dict:
    """--decode-reps: prefills (and compresses) once with `args` but no decoding, saving the context
    to `session`. Returns the report (prefill_ms includes the compression, compression_ms given),
    with "session" set to the file."""
    pre_args = list(args)
    pre_args[pre_args.index("-n") + 1] = 0
    pre_args = [x for x in pre_args if x not in ("--ignore-eos", "--profile")] + ["--save-session", session]
    with bl.Contention() as busy:
        r = bl.run_snapkv(a.snapkv, pre_args, timeout=a.timeout, check=False)
    r["other_cpu_share"] = busy.share
    r["session"] = str(session)
    return r


def decode_from_session(a: argparse.Namespace, model: pathlib.Path, session: str) -> dict:
    """--decode-reps: one decode of a.n_gen tokens from a saved context, in a fresh process; the
    report as snapkv wrote it. Raises bl.RunError when fewer than a.n_gen tokens came out."""
    args = ["-m", model, "--load-session", session, "--question", " x", "-n", a.n_gen,
            "-t", a.threads, "--temp", "0", "--ignore-eos"]
    if a.profile:
        args += ["--profile"]
    r = bl.run_snapkv(a.snapkv, args, timeout=a.timeout, check=False)
    if r.get("n_generated_tokens") != a.n_gen:
        raise bl.RunError(f"a decode from {session} generated {r.get('n_generated_tokens')} of {a.n_gen} tokens "
                          f"(stop: {r.get('stop_reason')})")
    return r


def main() -> None:
    a = parse_args()
    bl.require_file(a.snapkv, "snapkv CLI", "build it: scripts/build.sh, or pass --snapkv")
    tmpdir = tempfile.TemporaryDirectory(prefix="snapkv-bench-kv-")
    tmp = pathlib.Path(tmpdir.name)
    models = {}
    if "gemma" in a.model_list:
        models["gemma"] = bl.require_file(a.model, "model", "run scripts/get-model.sh or pass -m")
    if "synthetic" in a.model_list:
        models["synthetic"] = make_synthetic(a, tmp)
    source = bl.source_text(a.text)
    bl.warn_if_busy(a.threads)
    bw = a.bandwidth_gbs if a.bandwidth_gbs else measure_bandwidth(a.threads, reps=5)
    print(f"read bandwidth: {bw:.1f} GB/s ({'given' if a.bandwidth_gbs else 'measured'})", file=sys.stderr)
    readings = [bw]  # every bandwidth reading of the run (GB/s)

    def bandwidth_now() -> float:
        if a.bandwidth_gbs:
            return a.bandwidth_gbs
        readings.append(measure_bandwidth(a.threads, reps=3))
        return readings[-1]

    rows, raw = [], []
    row_rates = []  # per row of `rows`: (decode tok/s, bytes read per token), None for an error row
    for key, path in models.items():
        info = gguf_info(path)
        label = "Gemma 3 270M Q4_K_M" if key == "gemma" else SYNTH_LABEL
        count = counter_for(a, key, path)
        cap = (not a.no_cap) and info["ctx_train"] is not None
        for want in a.length_list:
            reserve = QUESTION_RESERVE if a.decode_reps else 0  # room for the question
            n = min(want, info["ctx_train"] - a.n_gen - reserve) if cap else want
            text, n_tok = bl.text_with_tokens(count, source, n)
            prompt = tmp / f"{key}_{want}.txt"
            prompt.write_text(text)
            n_ctx = n_tok + a.n_gen + reserve
            if cap:
                n_ctx = min(n_ctx, info["ctx_train"])
            res = {}
            for press in ("none", "snapkv"):
                args = ["-m", path, "-f", prompt, "-n", a.n_gen, "-t", a.threads, "--temp", "0", "--ignore-eos",
                        "-c", n_ctx, "--press", press]
                if press == "snapkv":
                    args += ["--budget", a.budget]
                if a.kv_type:
                    args += ["--kv-type", a.kv_type]
                if a.kv_type_v:
                    args += ["--kv-type-v", a.kv_type_v]
                args += bl.prefill_attn_args(a)
                if a.profile:
                    args += ["--profile"]
                reports = []
                row_bw = []
                prefill = None  # --decode-reps: the report of the run that saved the context
                session = tmp / f"{key}_{want}_{press}.sess"
                try:
                    if a.decode_reps:
                        prefill = prefill_and_save(a, args, session)
                    for _ in range(a.decode_reps or a.reps):
                        row_bw.append(bandwidth_now())
                        with bl.Contention() as busy:
                            if a.decode_reps:
                                r = decode_from_session(a, path, prefill["session"])
                            else:
                                r = bl.run_snapkv(a.snapkv, args, timeout=a.timeout, check=False)
                        reports.append(r)
                        row_bw.append(bandwidth_now())
                        r["other_cpu_share"] = busy.share
                        r["bandwidth_gbs_around"] = row_bw[-2:]
                        n_prompt = prefill["n_context_tokens"] if prefill else r["n_prompt_tokens"]
                        ttft = prefill["prefill_ms"] if prefill else r["ttft_ms"]
                        print(f"{key} {want:6d} {press:6s} prompt {n_prompt} decode "
                              f"{r['decode_tokens_per_s']:.1f} tok/s ttft {ttft:.0f} ms", file=sys.stderr, flush=True)
                except bl.RunError as e:
                    print(f"warning: {e}", file=sys.stderr)
                    res[press] = None
                    rows.append([label, f"{want} (error)", press] + ["-"] * 11)
                    row_rates.append(None)
                    continue
                finally:
                    session.unlink(missing_ok=True)  # a 32K full cache is ~0.7 GB
                raw.append({"model": key, "length": want, "press": press, "reports": reports, "prefill": prefill})
                res[press] = {
                    "decode": bl.median([r["decode_tokens_per_s"] for r in reports]),
                    "ttft": prefill["prefill_ms"] if prefill else bl.median([r["ttft_ms"] for r in reports]),
                    "r": reports[0],
                }
                r = reports[0]
                n_prompt = prefill["n_context_tokens"] if prefill else r["n_prompt_tokens"]
                compression_ms = (prefill or r).get("compression_ms", 0)
                per_token = info["weights_bytes_per_token"] + r["kv_cache_bytes"]
                bound = max(row_bw) * 1e9 / per_token
                # The strict share: against the row's highest reading, or with --decode-reps the median
                # of each decode's share against the higher of the two readings beside that decode.
                share = res[press]["decode"] / bound
                if a.decode_reps:
                    bounds = [max(x["bandwidth_gbs_around"]) * 1e9 / per_token for x in reports]
                    bound = bl.median(bounds)
                    share = bl.median([x["decode_tokens_per_s"] / b for x, b in zip(reports, bounds)])
                speedup = "1.00" if press == "none" else (
                    f"{res['snapkv']['decode'] / res['none']['decode']:.2f}" if res.get("none") else "-")
                capped = "*" if n < want else ""
                rows.append([
                    label, f"{n_prompt}{capped}", press if press == "none" else f"snapkv {r.get('budget', a.budget)}",
                    res[press]["ttft"], res[press]["decode"], speedup,
                    f"{r['kv_cache_bytes'] / 2**20:.2f}", f"{r['peak_kv_cache_bytes'] / 2**20:.2f}",
                    f"{per_token / 2**20:.1f}", f"{min(row_bw):.1f}-{max(row_bw):.1f}", bound,
                    f"{100 * share:.0f}%", "",
                    f"{compression_ms:.0f}" if press != "none" else "-",
                ])
                row_rates.append((res[press]["decode"], per_token))

    def kv_name(r):  # "q8_0" or, keys and values of two types, "q8_0 keys, q4_0 values"
        k, v = r.get("kv_type", "?"), r.get("kv_type_v", r.get("kv_type", "?"))
        return k if k == v else f"{k} keys, {v} values"
    # The bound again at the median of every reading of the run: now and then a reading on this VM
    # jumps to ~1.5x the others, and one such reading beside a row makes its strict bound
    # incomparable across runs. (With --bandwidth-gbs there is one value: the column is "-".)
    median_bw = bl.median(readings)
    for row, rate in zip(rows, row_rates):
        if rate is not None:
            row[12] = "-" if a.bandwidth_gbs else f"{100 * rate[0] / (median_bw * 1e9 / rate[1]):.0f}%"
    kv_types = sorted({kv_name(x["reports"][0]) for x in raw}) or ["?"]
    print(f"## SnapKV vs full cache: {a.threads} threads, {a.n_gen} generated tokens, KV {'/'.join(kv_types)}, "
          f"prefill attention {bl.prefill_attn_name(a)}, " +
          (f"one prefill and the median of {a.decode_reps} decodes from its saved context per row\n"
           if a.decode_reps else f"median of {a.reps}\n"))
    extra = {"snapkv binary": f"{a.snapkv} ({bl.snapkv_version(a.snapkv)})",
             "read bandwidth": (f"{bw:.1f} GB/s (given)" if a.bandwidth_gbs else
                                f"numpy, {min(readings):.1f}-{max(readings):.1f} GB/s over {len(readings)} readings")}
    print("\n".join(bl.header_lines(extra)) + "\n")
    print(bl.md_table(
        ["model", "prompt tokens", "press", "TTFT ms", "decode tok/s", "speedup vs none", "KV MiB", "peak KV MiB",
         "MiB read/token", "read GB/s", "bound tok/s", "achieved", "achieved at run median", "compression ms"],
        rows,
    ))
    if any(str(r[1]).endswith("*") for r in rows):
        print("\n\\* capped: prompt + generated tokens limited to the model's training context (--no-cap lifts it).")
    print("\nMiB read/token = weight bytes read per decoded token + KV bytes held after the run; "
          "read GB/s = the bandwidth readings taken right before and after the row's runs; "
          "bound = the highest of them / MiB read per token; achieved = decode tok/s / bound" +
          (" (with --decode-reps: bound = the median of the decodes' bounds, each at the higher of the two "
           "readings beside it, and achieved = the median of each decode's tok/s over its own bound)"
           if a.decode_reps else "") +
          ("." if a.bandwidth_gbs else
           f"; achieved at run median = the same against the median of all {len(readings)} readings of the "
           f"run ({median_bw:.1f} GB/s; the first one best of 5, the others best of 3)."))
    if a.profile:
        print_profile_table(raw)
    shares = [r["other_cpu_share"] for x in raw for r in x["reports"] + ([x["prefill"]] if x.get("prefill") else [])
              if r.get("other_cpu_share") is not None]
    if shares:
        print(f"Other processes' share of the CPUs during the runs: at most {100 * max(shares):.0f}%.")
    if a.json_out:
        a.json_out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()}, "bandwidth_gbs": bw,
                                          "bandwidth_readings_gbs": readings,
                                          "results": raw}, indent=1))


# Operation groups of `snapkv run --profile` (include/snapkv/op_profile.h) in the --profile table.
PROFILE_GROUPS = (
    ("attention", ("attention",)),
    ("projections", ("qkv", "attn_output", "ffn_gate_up", "ffn_down")),
    ("logits", ("logits",)),
)


def print_profile_table(raw) -> None:
    """Decode time per operation group of each row's first run: ms per step, share, GB/s."""
    out = []
    for x in raw:
        r = x["reports"][0]
        dec = r.get("profile", {}).get("decode", {})
        steps, ops = dec.get("steps", 0), dec.get("ops", {})
        if steps == 0:
            continue
        n_prompt = x["prefill"]["n_context_tokens"] if x.get("prefill") else r["n_prompt_tokens"]
        row = [x["model"], n_prompt, x["press"], f"{1e3 * dec['seconds'] / steps:.2f}"]
        grouped = set()
        for _, names in PROFILE_GROUPS:
            sec = sum(ops.get(n, {}).get("seconds", 0.0) for n in names)
            byt = sum(ops.get(n, {}).get("bytes", 0.0) for n in names)
            grouped.update(names)
            row += [f"{1e3 * sec / steps:.2f}", f"{100 * sec / dec['seconds']:.0f}%",
                    f"{byt / sec / 1e9:.1f}" if sec > 0 and byt > 0 else "-"]
        rest = sum(v.get("seconds", 0.0) for k, v in ops.items() if k not in grouped)
        row.append(f"{1e3 * rest / steps:.2f}")
        out.append(row)
    if not out:
        return
    print("\n### Decode time per operation (`snapkv run --profile`, each row's first run)\n")
    head = ["model", "prompt tokens", "press", "ms/step"]
    for g, _ in PROFILE_GROUPS:
        head += [f"{g} ms/step", f"{g} share", f"{g} GB/s"]
    print(bl.md_table(head + ["other ops ms/step"], out))
    print("\nGB/s = bytes the group read (weights: each matrix once per step; attention: the K and V the "
          "caches hold) / its wall time; projections = Q/K/V, attention output, FFN gate/up and down.")


if __name__ == "__main__":
    main()
