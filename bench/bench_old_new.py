#!/usr/bin/env python3
"""Single-sequence speed of two snapkv binaries (or one binary with two settings), back to back.

For each model and prompt length, runs

    OLD run -m MODEL -f PROMPT -n N -t T --temp 0 --ignore-eos --json [--press ...]
    NEW run ...   (same arguments)

alternating OLD and NEW in every one of -r repetitions (fresh processes, each after waiting
for a quiet moment), and prints the medians of prefill tokens/s and decode tokens/s and the
ratios NEW / OLD. Prompts are prefixes of the GPL-3 text with an exact token count (NEW's
`snapkv tokenize -f`); both binaries must report the same prompt length and the same greedy
tokens (the script says when the tokens differ).

Usage (from the repository root):
    python3 bench/bench_old_new.py --old /path/to/old/snapkv --new build/snapkv
    python3 bench/bench_old_new.py --old build/snapkv --new build/snapkv --new-args "--prefill-attn bf16" \
        --models synthetic --synthetic synth.gguf --lengths 4096,16384 -n 4 -r 2
    python3 bench/bench_old_new.py --old OLD --models smollm2 --lengths 4096 --press "--press snapkv --budget 1024"
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shlex
import sys
import tempfile

import benchlib as bl

MODELS = {
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
}


def main() -> None:
    ap = argparse.ArgumentParser(description="snapkv old vs new binary, one sequence")
    ap.add_argument("--old", type=pathlib.Path, required=True)
    ap.add_argument("--new", type=pathlib.Path, default=bl.ROOT / "build" / "snapkv")
    ap.add_argument("--models", default="gemma3,smollm2")
    ap.add_argument("--lengths", default="512,4096")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", "--n-predict", type=int, default=64)
    ap.add_argument("-r", "--reps", type=int, default=5)
    ap.add_argument("--press", default="", help='extra run arguments, e.g. "--press snapkv --budget 1024"')
    ap.add_argument("--old-args", default="", help="extra run arguments of OLD only")
    ap.add_argument("--new-args", default="", help='extra run arguments of NEW only, e.g. "--prefill-attn bf16"')
    ap.add_argument("--synthetic", type=pathlib.Path, default=None,
                    help="GGUF of the synthetic SmolLM2-shaped model (build/make_synthetic_gguf -o FILE): "
                         "the model named 'synthetic' in --models")
    ap.add_argument("--quiet-wait", type=float, default=120, help="seconds to wait for a quiet machine per run")
    args = ap.parse_args()

    cache = pathlib.Path(os.environ.get("SNAPKV_MODELS", pathlib.Path.home() / ".cache" / "snapkv" / "models"))
    bl.warn_if_busy(args.threads)
    source = bl.source_text(None)
    rows = []
    for name in args.models.split(","):
        if name == "synthetic":
            if args.synthetic is None:
                bl.fail("--models synthetic needs --synthetic FILE (build/make_synthetic_gguf -o FILE)")
            model = bl.require_file(args.synthetic, name, "build/make_synthetic_gguf -o FILE")
        else:
            model = bl.require_file(cache / MODELS[name], name, f"scripts/get-model.sh {name}")
        counter = bl.SnapkvTokenCounter(args.new, model)
        for n in (int(x) for x in args.lengths.split(",")):
            text, got = bl.text_with_tokens(counter, source, n)
            with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
                f.write(text)
                prompt = f.name
            common = ["-m", model, "-f", prompt, "-n", args.n_predict, "-t", args.threads, "--temp", "0",
                      "--ignore-eos", "-c", got + args.n_predict + 8, *shlex.split(args.press)]
            res = {"old": [], "new": []}
            for _ in range(args.reps):
                for which in ("old", "new"):
                    bl.wait_quiet(0.10, args.quiet_wait)
                    extra = shlex.split(args.old_args if which == "old" else args.new_args)
                    res[which].append(bl.run_snapkv(getattr(args, which), common + extra))
            os.unlink(prompt)
            med = {w: (bl.median([r["prefill_tokens_per_s"] for r in res[w]]),
                       bl.median([r["decode_tokens_per_s"] for r in res[w]])) for w in res}
            same = res["old"][0]["generated_token_ids"] == res["new"][0]["generated_token_ids"]
            agree = next((i for i, (a, b) in enumerate(zip(res["old"][0]["generated_token_ids"],
                                                           res["new"][0]["generated_token_ids"])) if a != b),
                         len(res["old"][0]["generated_token_ids"]))
            rows.append([name, res["new"][0]["n_prompt_tokens"], f"{med['old'][0]:.1f}", f"{med['new'][0]:.1f}",
                         f"{med['new'][0] / med['old'][0]:.3f}", f"{med['old'][1]:.1f}", f"{med['new'][1]:.1f}",
                         f"{med['new'][1] / med['old'][1]:.3f}", "all" if same else f"first {agree}"])
            print(rows[-1], file=sys.stderr)
    print("\n".join(bl.header_lines({"old": str(args.old), "new": str(args.new), "threads": args.threads,
                                     "reps": args.reps, "press": args.press or "none",
                                     "old args": args.old_args or "-", "new args": args.new_args or "-"})))
    print()
    print(bl.md_table(["model", "prompt tokens", "prefill old tok/s", "prefill new tok/s", "new/old",
                       "decode old tok/s", "decode new tok/s", "new/old", "greedy tokens equal"], rows))


if __name__ == "__main__":
    main()
