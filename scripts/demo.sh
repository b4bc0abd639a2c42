#!/usr/bin/env bash
# The main job on real input, with the full KV cache and with a SnapKV-compressed one:
#  1. question answering: SmolLM2-135M-Instruct (8K context) answers a question about the GNU GPL v3
#     text (/usr/share/common-licenses/GPL-3, 7,639 of its 8,192 context tokens): full cache, SnapKV
#     with the question inside the observation window, and SnapKV query-agnostic (the document is
#     compressed first, the question appended after);
#  2. a longer document: Gemma 3 270M (base model, 32K context) on three licence texts concatenated
#     (~16K tokens), full cache vs SnapKV: memory and speed.
# Prints the answers and the figures side by side.
# Does everything itself: apt-get install of build dependencies, build, model download.
#   SNAPKV_DEMO_THREADS (default: all cores), SNAPKV_DEMO_BUDGET (default 1024 tokens per KV head)
set -euo pipefail
cd "$(dirname "$0")/.."

echo "demo: installing build dependencies and building (scripts/build.sh) ..." >&2
log="$(mktemp)"
if ! bash scripts/build.sh >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "demo: the build failed (full log: $log)" >&2
  exit 1
fi
rm -f "$log"
smollm2="$(bash scripts/get-model.sh smollm2)"
gemma="$(bash scripts/get-model.sh gemma3)"
licenses=/usr/share/common-licenses
doc="$licenses/GPL-3"
for f in GPL-3 LGPL-2.1 Apache-2.0; do
  [[ -f "$licenses/$f" ]] || { echo "demo.sh: $licenses/$f not found (Debian's base-files ships it)" >&2; exit 1; }
done

threads="${SNAPKV_DEMO_THREADS:-$(nproc)}"
budget="${SNAPKV_DEMO_BUDGET:-1024}"
question="Which license is this, and which version?"
long_question="Which licenses are in this document?"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# The document followed by the question, in one user turn of the model's chat template.
{ cat "$doc"; printf '\n\n%s' "$question"; } > "$out/prompt.txt"
# The longer document: three licences, each under a title line.
for f in GPL-3 LGPL-2.1 Apache-2.0; do printf '=== %s ===\n\n' "$f"; cat "$licenses/$f"; printf '\n\n'; done > "$out/long.txt"
{ cat "$out/long.txt"; printf '%s' "$long_question"; } > "$out/long_prompt.txt"

common=(-t "$threads" -n 64 --temp 0 --chat --json)
echo "demo: 1. question answering; model = $(basename "$smollm2"); threads = $threads" >&2
echo "demo: 1/5 full KV cache (--press none)" >&2
./build/snapkv run -m "$smollm2" "${common[@]}" -f "$out/prompt.txt" --press none > "$out/none.json"
echo "demo: 2/5 SnapKV (--press snapkv --budget $budget), question inside the observation window" >&2
./build/snapkv run -m "$smollm2" "${common[@]}" -f "$out/prompt.txt" --press snapkv --budget "$budget" > "$out/snapkv.json"
echo "demo: 3/5 SnapKV, query-agnostic: document compressed first, then --question appended" >&2
./build/snapkv run -m "$smollm2" "${common[@]}" -f "$doc" --question "$question" --press snapkv --budget "$budget" \
  > "$out/snapkv_qa.json"
echo "demo: 2. a longer document; model = $(basename "$gemma")" >&2
echo "demo: 4/5 full KV cache (--press none)" >&2
./build/snapkv run -m "$gemma" "${common[@]}" -f "$out/long_prompt.txt" --press none > "$out/long_none.json"
echo "demo: 5/5 SnapKV (--press snapkv --budget $budget)" >&2
./build/snapkv run -m "$gemma" "${common[@]}" -f "$out/long_prompt.txt" --press snapkv --budget "$budget" \
  > "$out/long_snapkv.json"

python3 - "$question" "$long_question" "$out" <<'PY'
import json, os, sys
q, long_q, out = sys.argv[1], sys.argv[2], sys.argv[3]
load = lambda name: json.load(open(os.path.join(out, name)))
mib = lambda b: f"{b / 2**20:.2f} MiB"
rows = [("press", lambda r: r["press"] + (f" C={r['budget']}" if r["press"] != "none" else "")),
        ("prompt tokens", lambda r: str(r["n_prompt_tokens"])),
        ("KV bytes, full cache", lambda r: mib(r["kv_cache_bytes_full"])),
        ("KV bytes, held", lambda r: mib(r["kv_cache_bytes"])),
        ("peak KV bytes", lambda r: mib(r["peak_kv_cache_bytes"])),
        ("compression ms", lambda r: f"{r['compression_ms']:.1f}"),
        ("TTFT ms", lambda r: f"{r['ttft_ms']:.0f}"),
        ("prefill tokens/s", lambda r: f"{r['prefill_tokens_per_s']:.0f}"),
        ("decode tokens/s", lambda r: f"{r['decode_tokens_per_s']:.1f}"),
        ("peak RSS", lambda r: mib(r["peak_rss_bytes"]))]

def report(title, question, runs):
    print(f"\n## {title}\n\nQuestion: {question}\n")
    for name, r in runs:
        # Whitespace runs collapsed and long answers cut, so that a rambling answer stays readable.
        text = " ".join(r["text"].split())
        print(f"[{name}] answer: {text if len(text) <= 240 else text[:240] + ' ...'}\n")
    w0 = max(len(n) for n, _ in rows)
    ws = [max(len(name), 24) for name, _ in runs]
    print("| " + "metric".ljust(w0) + " | " + " | ".join(n.ljust(w) for (n, _), w in zip(runs, ws)) + " |")
    print("|" + "-" * (w0 + 2) + "|" + "|".join("-" * (w + 2) for w in ws) + "|")
    for label, f in rows:
        print("| " + label.ljust(w0) + " | " + " | ".join(f(r).ljust(w) for (_, r), w in zip(runs, ws)) + " |")

qa = [("full cache (none)", load("none.json")), ("snapkv", load("snapkv.json")),
      ("snapkv, question after compression", load("snapkv_qa.json"))]
long = [("full cache (none)", load("long_none.json")), ("snapkv", load("long_snapkv.json"))]
report("1. Question answering: SmolLM2-135M-Instruct on the GPL-3 text", q, qa)
report("2. A longer document: Gemma 3 270M (base model) on GPL-3 + LGPL-2.1 + Apache-2.0", long_q, long)
print("\nFull JSON reports:")
for name, r in [("qa " + n, r) for n, r in qa] + [("long " + n, r) for n, r in long]:
    print(f"  {name}: " + json.dumps({k: r[k] for k in r if k not in ("generated_token_ids", "kept_tokens_per_layer")}))
PY
