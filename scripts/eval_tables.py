#!/usr/bin/env python3
"""Markdown tables from a `snapkv eval` run (DIR/summary.json), as docs/quality.md shows them.

    python3 scripts/eval_tables.py DIR [DIR...] [--tasks niah,vt] [--protocol aware] [--cells]

Prints: the full-cache baseline per task and length (both protocols); per protocol, the mean
score of each press at each compression ratio over the tasks and lengths, with its fraction of
the full cache's mean on the same samples; per protocol, how many of the (task, length) cells the
full cache solves each press still solves; and, for fidelity rows, KL / top-1 / perplexity delta
per press and budget (or ratio). Standard library only.
"""
import argparse
import json
import os
import sys
from collections import defaultdict


def fmt(x, nd=1):
    return "-" if x is None else f"{x:.{nd}f}"


def press_of(r):
    """Press name plus issue 11's selection options when set (window=question, span_gap=G > 0), as
    eval_plots.py labels them: 'snapkv window=question,span_gap=4'."""
    spec = dict(kv.split("=", 1) for kv in r["press"].partition(":")[2].split(",") if "=" in kv)
    extra = (["window=question"] if spec.get("window") == "question" else []) + \
        ([f"span_gap={spec['span_gap']}"] if spec.get("span_gap", "0") != "0" else [])
    return " ".join([r["press_name"]] + ([",".join(extra)] if extra else []))


def mean(v):
    v = [x for x in v if x is not None]
    return sum(v) / len(v) if v else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="+", help="run directories; rows of later ones add to (never replace) earlier ones")
    ap.add_argument("--tasks", default="", help="only tasks whose name starts with one of these (comma-separated)")
    ap.add_argument("--protocol", default="", help="only this protocol")
    ap.add_argument("--cells", action="store_true",
                    help="also print every press's score per (task, length) cell, per protocol")
    a = ap.parse_args()
    rows, seen = [], set()
    for d in a.dir:
        path = os.path.join(d, "summary.json")
        try:
            with open(path) as f:
                more = json.load(f)["rows"]
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"eval_tables: cannot read {path}: {e}")
        for r in more:
            k = (r["task"], r["length"], r["press"], r["protocol"])
            if k not in seen:  # the same cell from two runs (e.g. the full cache): the first run's
                seen.add(k)
                rows.append(r)
    prefixes = [t for t in a.tasks.split(",") if t] or [""]
    rows = [r for r in rows if any(r["task"].startswith(t) for t in prefixes)]
    if a.protocol:
        rows = [r for r in rows if r["protocol"] in (a.protocol, "continuation")]
    scored = [r for r in rows if r["task"] != "fidelity"]
    fid = [r for r in rows if r["task"] == "fidelity"]

    if scored:
        lengths = sorted({r["length"] for r in scored})
        protos = [p for p in ("aware", "agnostic", "multi", "followup", "reselect") if any(r["protocol"] == p for r in scored)]
        tasks = sorted({r["task"] for r in scored})
        full = {(r["task"], r["length"], r["protocol"]): r["score"] for r in scored if r["press"] == "none"}
        print("Full cache (`none`), score % per task and length (" + " / ".join(protos) + "):\n")
        print("| task | " + " | ".join(str(n) for n in lengths) + " |")
        print("|---" * (len(lengths) + 1) + "|")
        for t in tasks:
            cells = [" / ".join(fmt(full.get((t, n, p)), 0) for p in protos) for n in lengths]
            print(f"| {t} | " + " | ".join(cells) + " |")
        print()
        for p in protos:
            by = defaultdict(list)  # (press name, ratio or budget) -> [(score, full)]
            for r in scored:
                if r["protocol"] != p or r["press"] == "none":
                    continue
                k = (press_of(r), r["ratio"] if r["ratio"] is not None else f"b{r['budget']}")
                by[k].append((r["score"], full.get((r["task"], r["length"], p))))
            cols = sorted({k[1] for k in by}, key=lambda x: (isinstance(x, str), x))
            names = sorted({k[0] for k in by})
            print(f"Protocol `{p}`: mean score % over {len(tasks)} task(s) x {len(lengths)} length(s), "
                  "and in brackets its fraction of the full cache's mean on the same samples:\n")
            print("| press | " + " | ".join(str(c) for c in cols) + " |")
            print("|---" * (len(cols) + 1) + "|")
            fm = mean([full.get((t, n, p)) for t in tasks for n in lengths])
            print("| none (full cache) | " + " | ".join(fmt(fm) for _ in cols) + " |")
            for nm in names:
                cells = []
                for c in cols:
                    v = by.get((nm, c))
                    if not v:
                        cells.append("-")
                        continue
                    s, f = mean([x for x, _ in v]), mean([y for _, y in v])
                    frac = f"{s / f:.2f}" if f else "-"
                    cells.append(f"{fmt(s)} ({frac})")
                print(f"| {nm} | " + " | ".join(cells) + " |")
            print()
        # Only the (task, length) cells the full cache solves can show a loss: how many of them
        # each press still solves (score 100).
        for p in protos:
            solved = {(t, n) for (t, n, q), v in full.items() if q == p and v is not None and v >= 100}
            if not solved:
                continue
            hit = defaultdict(int)
            for r in scored:
                if r["protocol"] != p or r["press"] == "none" or (r["task"], r["length"]) not in solved:
                    continue
                k = (press_of(r), r["ratio"] if r["ratio"] is not None else f"b{r['budget']}")
                hit[k] += 1 if (r["score"] or 0) >= 100 else 0
            cols = sorted({k[1] for k in hit}, key=lambda x: (isinstance(x, str), x))
            cells_solved = ", ".join(f"{t}@{n}" for t, n in sorted(solved))
            print(f"Protocol `{p}`: of the {len(solved)} (task, length) cells the full cache solves "
                  f"({cells_solved}), how many the press still solves:\n")
            print("| press | " + " | ".join(str(c) for c in cols) + " |")
            print("|---" * (len(cols) + 1) + "|")
            for nm in sorted({k[0] for k in hit}):
                print(f"| {nm} | " + " | ".join(f"{hit.get((nm, c), 0)} / {len(solved)}" for c in cols) + " |")
            print()

    if scored and a.cells:
        for p in protos:
            cells = sorted({(r["task"], r["length"]) for r in scored if r["protocol"] == p})
            by = {(press_of(r), r["ratio"] if r["ratio"] is not None else f"b{r['budget']}", r["task"], r["length"]):
                  r["score"] for r in scored if r["protocol"] == p}
            keys = sorted({(k[0], k[1]) for k in by}, key=lambda k: (k[0] != "none", k[0], str(k[1])))
            print(f"Protocol `{p}`: score % per (task, length):\n")
            print("| press | ratio | " + " | ".join(f"{t} {n}" for t, n in cells) + " |")
            print("|---" * (len(cells) + 2) + "|")
            for nm, c in keys:
                print(f"| {nm} | {'-' if nm == 'none' else c} | " +
                      " | ".join(fmt(by.get((nm, c, t, n)), 0) for t, n in cells) + " |")
            print()

    if fid:
        print("Fidelity (teacher-forced continuation of 256 tokens): KL(full || press) nats / top-1 "
              "agreement % / perplexity delta:\n")
        by = {}
        for r in fid:
            if r["press"] == "none":
                continue
            by[(press_of(r), r["budget"] if r["budget"] is not None else f"r{r['ratio']}")] = r
        cols = sorted({k[1] for k in by}, key=lambda x: (isinstance(x, str), x))
        print("| press | " + " | ".join(str(c) for c in cols) + " |")
        print("|---" * (len(cols) + 1) + "|")
        for nm in sorted({k[0] for k in by}):
            cells = []
            for c in cols:
                r = by.get((nm, c))
                cells.append("-" if r is None else
                             f"{fmt(r['kl'], 3)} / {fmt(None if r['top1'] is None else 100 * r['top1'], 1)} / "
                             f"{fmt(r['ppl_delta'], 2)}")
            print(f"| {nm} | " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    main()
