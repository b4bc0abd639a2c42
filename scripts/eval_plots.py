#!/usr/bin/env python3
"""Pictures and index.html of a `snapkv eval` run (docs/design.md, "Eval").

Usage: python3 scripts/eval_plots.py DIR

Reads DIR/summary.json and DIR/samples.jsonl and writes, under DIR/plots/, PNG and SVG files:
  niah_grid__<press>__<protocol>   heatmap of the needle grid: depth x length, red to green
  niah_grid__all__<protocol>       the heatmaps of every press side by side
  score__<task>                    score vs compression ratio, one line per press, a panel per
                                   protocol, the full cache as a dashed line
  fidelity__<length>               KL, top-1 agreement and perplexity delta vs budget (or ratio)
then DIR/index.html with the pictures and the summary table. Needs matplotlib (Debian:
python3-matplotlib; scripts/deps.sh installs it). Running it again redraws everything.
"""
import html
import json
import os
import re
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">"]
PROTOCOLS = ["aware", "agnostic", "multi", "followup", "reselect"]
PRESS_ORDER = ["none", "snapkv", "pyramidkv", "adakv", "streamingllm", "h2o", "tova", "knorm", "random"]


def load(d):
    with open(os.path.join(d, "summary.json")) as f:
        summary = json.load(f)
    records = []
    with open(os.path.join(d, "samples.jsonl")) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # a half-written last line of a killed run
    return summary, records


def variant(row):
    """The press name with the options that change its selection beyond the ratio or budget (issue 11's
    window=question and span_gap=G > 0), e.g. 'snapkv window=question,span_gap=4'; else the name."""
    opts = dict(kv.split("=", 1) for kv in row["press"].partition(":")[2].split(",") if "=" in kv)
    extra = ["window=question"] if opts.get("window") == "question" else []
    extra += [f"span_gap={opts['span_gap']}"] if opts.get("span_gap", "0") != "0" else []
    return row["press_name"] + (" " + ",".join(extra) if extra else "")


def press_label(row):
    name = variant(row)
    if name == "none":
        return "none (full cache)"
    if row.get("ratio") is not None:
        return f"{name} r={row['ratio']:g}"
    if row.get("budget") is not None:
        return f"{name} C={row['budget']}"
    return name


def slug(s):
    return re.sub(r"[^A-Za-z0-9._-]+", "_", s).strip("_")[:80]


def press_key(name):
    base = name.split(" ")[0]  # a variant sorts after its press
    return (PRESS_ORDER.index(base) if base in PRESS_ORDER else len(PRESS_ORDER), name)


def save(fig, d, name, out):
    os.makedirs(os.path.join(d, "plots"), exist_ok=True)
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(d, "plots", f"{name}.{ext}"), dpi=110, bbox_inches="tight")
    plt.close(fig)
    out.append(name)


def niah_heatmaps(d, records, out):
    cells = defaultdict(lambda: defaultdict(list))  # (press, protocol) -> (depth, length) -> scores
    labels = {}
    for r in records:
        if r["task"] != "niah_grid" or r.get("score") is None:
            continue
        k = (r["press"], r["protocol"])
        labels[k] = press_label(r)
        # Percent to 0.01, as the eval tells depths apart (33.3 and 33.4 are two rows); whole
        # percents print without a fraction.
        pct = round(r["depth"] * 100, 2)
        cells[k][(int(pct) if pct == int(pct) else pct, r["length"])].append(r["score"])
    protos = PROTOCOLS
    keys = sorted(cells, key=lambda k: (press_key(labels[k]), k[0], protos.index(k[1]) if k[1] in protos else 9))
    for k in keys:
        fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len({ll for _, ll in cells[k]}),
                                        0.9 + 0.38 * len({dd for dd, _ in cells[k]})))
        im = heatmap(ax, cells[k], f"needle grid: {labels[k]}, {k[1]}")
        fig.colorbar(im, ax=ax, fraction=0.05, pad=0.03, label="score (%)")
        save(fig, d, f"niah_grid__{slug(labels[k])}__{k[1]}", out)
    # Every press of a protocol side by side, in one picture.
    for proto in [p for p in protos if any(k[1] == p for k in keys)]:
        ks = [k for k in keys if k[1] == proto]
        if len(ks) < 2:
            continue
        cols = min(4, len(ks))
        rows = (len(ks) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols, 2.7 * rows), squeeze=False, layout="constrained")
        for i, (ax, k) in enumerate(zip(axes.flat, ks)):
            im = heatmap(ax, cells[k], labels[k], small=True)
            if i % cols:  # the depths once per row, the lengths once per column
                ax.set_ylabel("")
                ax.set_yticklabels([])
            if i + cols < len(ks):
                ax.set_xlabel("")
        for ax in list(axes.flat)[len(ks):]:
            ax.axis("off")
        fig.colorbar(im, ax=axes, fraction=0.02, pad=0.01, label="score (%)")
        fig.suptitle(f"needle grid, {proto}: score % by depth x length", fontsize=10)
        save(fig, d, f"niah_grid__all__{proto}", out)


def heatmap(ax, c, title, small=False):
    """Draws one needle grid (depth, length) -> scores on ax, red to green; returns the image."""
    depths = sorted({dd for dd, _ in c})
    lengths = sorted({ll for _, ll in c})
    grid = [[None] * len(lengths) for _ in depths]
    for (dd, ll), v in c.items():
        grid[depths.index(dd)][lengths.index(ll)] = sum(v) / len(v)
    masked = [[float("nan") if x is None else 100 * x for x in row] for row in grid]
    im = ax.imshow(masked, cmap="RdYlGn", vmin=0, vmax=100, aspect="auto", interpolation="nearest")
    for i, row in enumerate(grid):
        for j, x in enumerate(row):
            if x is not None:
                ax.text(j, i, f"{100 * x:.0f}", ha="center", va="center", fontsize=7 if small else 8, color="black")
    ax.set_xticks(range(len(lengths)), [str(ll) for ll in lengths])
    ax.set_yticks(range(len(depths)), [f"{dd}%" for dd in depths])
    ax.set_xlabel("length (tokens)", fontsize=8 if small else 10)
    ax.set_ylabel("needle depth", fontsize=8 if small else 10)
    n = max(len(v) for v in c.values())
    ax.set_title(title if small else f"{title}\n(score %, {n} sample{'s' if n > 1 else ''} per cell)",
                 fontsize=8 if small else 9)
    return im


def x_of(row):
    """Compression ratio of a summary row: the spec's ratio, else the share of KV bytes removed."""
    if row["press_name"] == "none":
        return 0.0
    if row.get("ratio") is not None:
        return row["ratio"]
    return 1.0 - row["kept_fraction"]


def score_plots(d, rows, out):
    by_task = defaultdict(list)
    for r in rows:
        if r.get("score") is not None:
            by_task[r["task"]].append(r)
    for task, rs in by_task.items():
        protocols = sorted({r["protocol"] for r in rs}, key=PROTOCOLS.index)
        lengths = sorted({r["length"] for r in rs})
        fig, axes = plt.subplots(1, len(protocols), figsize=(4.6 * len(protocols), 3.6), squeeze=False,
                                 sharey=True)
        for ax, proto in zip(axes[0], protocols):
            # Mean over lengths (weighted by records) per press spec.
            acc = defaultdict(lambda: [0.0, 0, 0.0, None])
            for r in rs:
                if r["protocol"] != proto:
                    continue
                a = acc[r["press"]]
                a[0] += r["score"] * r["n"]
                a[1] += r["n"]
                a[2] += x_of(r) * r["n"]
                a[3] = r
            full = [a[0] / a[1] for k, a in acc.items() if a[3]["press_name"] == "none"]
            lines = defaultdict(list)
            for k, a in acc.items():
                if a[3]["press_name"] != "none":
                    lines[variant(a[3])].append((a[2] / a[1], a[0] / a[1]))
            for i, name in enumerate(sorted(lines, key=press_key)):
                pts = sorted(lines[name])
                # Presses at the same ratio often score the same: a small offset keeps each visible.
                dx = 0.008 * (i - (len(lines) - 1) / 2)
                ax.plot([p[0] + dx for p in pts], [p[1] for p in pts], marker=MARKERS[i % len(MARKERS)], label=name,
                        alpha=0.85)
            if full:
                ax.axhline(full[0], color="black", linestyle="--", linewidth=1, label=f"full cache ({full[0]:.1f})")
            ax.set_title(f"{task}, {proto}", fontsize=10)
            ax.set_xlabel("compression ratio (share of the prompt removed)")
            ax.set_xlim(-0.02, 1.0)
            ax.set_ylim(-3, 103)
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("score (%)")
        axes[0][-1].legend(fontsize=7, loc="lower left")
        fig.suptitle(f"{task}: score vs compression, lengths {', '.join(map(str, lengths))}", fontsize=10)
        fig.tight_layout()
        save(fig, d, f"score__{slug(task)}", out)


def fidelity_plots(d, rows, out):
    rs = [r for r in rows if r["task"] == "fidelity"]
    for length in sorted({r["length"] for r in rs}):
        lr = [r for r in rs if r["length"] == length]
        comp = [r for r in lr if r["press_name"] != "none"]
        if not comp:
            continue
        by_budget = all(r.get("budget") is not None and r.get("ratio") is None for r in comp)
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
        lines = defaultdict(list)
        for r in comp:
            x = r["budget"] if by_budget else x_of(r)
            lines[variant(r)].append((x, r["kl"], r["top1"], r["ppl_delta"]))
        for k, name in enumerate(sorted(lines, key=press_key)):
            pts = sorted(lines[name])
            for ax, i in zip(axes, (1, 2, 3)):
                ax.plot([p[0] for p in pts], [p[i] for p in pts], marker=MARKERS[k % len(MARKERS)], label=name,
                        alpha=0.85)
        ppl_full = [r["ppl_full"] for r in lr if r["press_name"] == "none"]
        # The uncompressed cache differs from the reference when its KV type (or prefill
        # arithmetic) does (--reference-kv-type, --prefill-attn bf16): its cost alone, as a line.
        none = [r for r in lr if r["press_name"] == "none" and r.get("kl") is not None and r["kl"] > 0]
        if none:
            for ax, key in zip(axes, ("kl", "top1", "ppl_delta")):
                ax.axhline(none[0][key], color="gray", linestyle="--", linewidth=1,
                           label=f"none: full cache vs the reference ({none[0][key]:.3g})")
        titles = ["KL(full || compressed), nats", "top-1 agreement with the full cache",
                  "perplexity - full-cache perplexity" + (f" ({ppl_full[0]:.2f})" if ppl_full else "")]
        for ax, t in zip(axes, titles):
            ax.set_title(t, fontsize=9)
            ax.grid(alpha=0.3)
            if by_budget:
                ax.set_xscale("log", base=2)
                ax.set_xlabel("budget (tokens kept per KV head)")
            else:
                ax.set_xlabel("compression ratio (share of the prompt removed)")
                ax.set_xlim(-0.02, 1.0)
        axes[1].set_ylim(-0.02, 1.02)
        kl = [p[1] for pts in lines.values() for p in pts]
        if kl and min(kl) > 0 and max(kl) / min(kl) > 100:
            axes[0].set_yscale("log")  # spans decades: SnapKV near 0, StreamingLLM far off
        axes[2].axhline(0, color="black", linewidth=0.8)
        axes[2].legend(fontsize=7)
        fig.suptitle(f"fidelity on real text: {length}-token samples ({length - 256} context + 256 teacher-forced)",
                     fontsize=10)
        fig.tight_layout()
        save(fig, d, f"fidelity__{length}", out)


def fmt_cell(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    return html.escape(str(v))


def kv_pair(k, v):
    """'f16', or 'q8_0 keys / q4_0 values' (config.json's KV types; older runs have one)."""
    k = k or "f16"
    v = v or k
    return k if k == v else f"{k} keys / {v} values"


def index_html(d, summary, images):
    cfg = summary.get("config", {})
    run = summary.get("run", {})
    model = cfg.get("model", {})
    sn = cfg.get("snapkv", {})
    cols = ["task", "length", "press", "protocol", "n", "score", "score_full", "fraction_of_full", "kept_fraction",
            "kl", "top1", "ppl_delta"]
    rows = summary.get("rows", [])
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>snapkv eval</title>",
           "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;font-size:12px}"
           "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:nth-child(3){text-align:left}"
           "img{max-width:100%;border:1px solid #eee;margin:4px}</style></head><body>",
           "<h1>snapkv eval</h1>",
           f"<p>model <code>{html.escape(str(model.get('path', '')))}</code> "
           f"(sha256 <code>{html.escape(str(model.get('sha256', ''))[:16])}...</code>), "
           f"prompt format {html.escape(str(cfg.get('prompt_format', '')))}, "
           f"KV cache {html.escape(kv_pair(cfg.get('kv_type'), cfg.get('kv_type_v')))}, fidelity reference "
           f"{html.escape(kv_pair(cfg.get('reference_kv_type'), cfg.get('reference_kv_type_v')))}, "
           f"snapkv {html.escape(str(sn.get('version', '')))} at <code>{html.escape(str(sn.get('git_commit', ''))[:12])}"
           f"</code>{' (dirty)' if sn.get('git_dirty') else ''}, seed {cfg.get('seed')}, "
           f"{cfg.get('samples')} sample(s) per cell, started {html.escape(str(cfg.get('started', '')))}; "
           f"wall {run.get('wall_s_all', run.get('wall_s', 0)):.0f} s over {run.get('invocations', 1)} invocation(s), "
           f"prefill {run.get('prefill_ms_all', run.get('prefill_ms', 0)) / 1000:.1f} s, "
           f"{run.get('prefill_saved_ms_all', run.get('prefill_saved_ms', 0)) / 1000:.1f} s of prefill saved by forking.</p>"]
    for title, prefix in (("Needle grid", "niah_grid__"), ("Score vs compression", "score__"),
                          ("Fidelity", "fidelity__")):
        imgs = [i for i in images if i.startswith(prefix)]
        if imgs:
            out.append(f"<h2>{title}</h2>")
            for i in imgs:
                out.append(f"<a href='plots/{i}.svg'><img src='plots/{i}.png' alt='{html.escape(i)}'></a>")
    out.append("<h2>Summary</h2><p>score: mean x 100 (RULER's string_match_all); fraction_of_full: score / the "
               "full cache's; kept_fraction: KV bytes kept after compression. Also in "
               "<a href='summary.csv'>summary.csv</a>, <a href='summary.json'>summary.json</a>, per record in "
               "<a href='samples.jsonl'>samples.jsonl</a>.</p><table><tr>")
    out.append("".join(f"<th>{c}</th>" for c in cols) + "</tr>")
    for r in rows:
        cells = []
        for c in cols:
            if c == "press":  # the short label; the canonical spec on hover
                cells.append(f"<td title='{html.escape(r['press'])}'>{html.escape(press_label(r))}</td>")
            else:
                cells.append(f"<td>{fmt_cell(r.get(c))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table></body></html>")
    with open(os.path.join(d, "index.html"), "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    d = sys.argv[1]
    summary, records = load(d)
    rows = summary.get("rows", [])
    images = []
    niah_heatmaps(d, records, images)
    score_plots(d, rows, images)
    fidelity_plots(d, rows, images)
    index_html(d, summary, images)
    print(f"eval_plots: {len(images)} pictures (PNG + SVG) in {os.path.join(d, 'plots')}, {os.path.join(d, 'index.html')}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
