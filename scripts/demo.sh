#!/usr/bin/env bash
# The main job on real input: Gemma 3 270M answers a question about the GNU GPL v3 text
# (/usr/share/common-licenses/GPL-3), with the full KV cache and with a SnapKV-compressed one,
# and prints the answers and the figures side by side.
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
model="$(bash scripts/get-model.sh)"
doc=/usr/share/common-licenses/GPL-3
[[ -f "$doc" ]] || { echo "demo.sh: $doc not found (Debian's base-files ships it)" >&2; exit 1; }

threads="${SNAPKV_DEMO_THREADS:-$(nproc)}"
budget="${SNAPKV_DEMO_BUDGET:-1024}"
question="Which version of the GNU General Public License is this document, and who is the copyright holder of the license text?"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# The document followed by the question, in one user turn of Gemma's chat template.
{ cat "$doc"; printf '\n\n%s' "$question"; } > "$out/prompt.txt"

common=(-m "$model" -t "$threads" -n 64 --temp 0 --chat --json)
echo "demo: prompt = GPL-3 text + question; model = $(basename "$model"); threads = $threads" >&2
echo "demo: 1/3 full KV cache (--press none)" >&2
./build/snapkv run "${common[@]}" -f "$out/prompt.txt" --press none > "$out/none.json"
echo "demo: 2/3 SnapKV (--press snapkv --budget $budget), question inside the observation window" >&2
./build/snapkv run "${common[@]}" -f "$out/prompt.txt" --press snapkv --budget "$budget" > "$out/snapkv.json"
echo "demo: 3/3 SnapKV, query-agnostic: document compressed first, then --question appended" >&2
./build/snapkv run "${common[@]}" -f "$doc" --question "$question" --press snapkv --budget "$budget" > "$out/snapkv_qa.json"

python3 - "$question" "$out/none.json" "$out/snapkv.json" "$out/snapkv_qa.json" <<'PY'
import json, sys
q = sys.argv[1]
runs = [("full cache (none)", json.load(open(sys.argv[2]))),
        ("snapkv", json.load(open(sys.argv[3]))),
        ("snapkv, question after compression", json.load(open(sys.argv[4])))]
mib = lambda b: f"{b / 2**20:.2f} MiB"
print(f"\nQuestion: {q}\n")
for name, r in runs:
    print(f"[{name}] answer: {r['text'].strip()}\n")
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
w0 = max(len(n) for n, _ in rows)
ws = [max(len(name), 24) for name, _ in runs]
print("| " + "metric".ljust(w0) + " | " + " | ".join(n.ljust(w) for (n, _), w in zip(runs, ws)) + " |")
print("|" + "-" * (w0 + 2) + "|" + "|".join("-" * (w + 2) for w in ws) + "|")
for label, f in rows:
    print("| " + label.ljust(w0) + " | " + " | ".join(f(r).ljust(w) for (_, r), w in zip(runs, ws)) + " |")
print("\nFull JSON reports:")
for name, r in runs:
    print(f"  {name}: " + json.dumps({k: r[k] for k in r if k not in ("generated_token_ids", "kept_tokens_per_layer")}))
PY
