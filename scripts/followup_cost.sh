#!/usr/bin/env bash
# Issue 10's cost measurement (docs/quality.md, "An 8K document, two questions"; docs/benchmarks.md,
# "Follow-up questions"): SmolLM2-135M-Instruct, a ~7,960-token document made of the licence texts
# under /usr/share/common-licenses with two needles, snapkv:ratio=0.75; each question answered with
# plain SnapKV, with an int8 and an f16 cold tier (re-selection), and from a saved session.
# Usage: scripts/followup_cost.sh [OUT_DIR] (default runs/followup-cost); needs build/snapkv and
# scripts/get-model.sh smollm2. Run it on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${SNAPKV:-build/snapkv}
D=${1:-runs/followup-cost}
mkdir -p "$D"
python3 - "$D/doc8k.txt" <<'PY'
import glob, sys
txt = " ".join(open(f, errors="ignore").read() for f in sorted(glob.glob("/usr/share/common-licenses/*"))
               if not f.endswith(".gz"))
doc = " ".join(txt.split())[:38500]
a = doc.index(". ", len(doc) // 4) + 2
doc = doc[:a] + "The special magic number for river is 4817265. " + doc[a:]
b = doc.index(". ", 3 * len(doc) // 4) + 2
doc = doc[:b] + "The special magic number for mountain is 9034512. " + doc[b:]
open(sys.argv[1], "w").write(doc)
PY
Q1="What is the special magic number for river?"
Q2="What is the special magic number for mountain?"
common=(-m smollm2 --chat -f "$D/doc8k.txt" --press snapkv --compression-ratio 0.75 -n 16 --temp 0 --json -t 2)
"$B" run "${common[@]}" --question "$Q1" --question "$Q2" > "$D/plain.json"
"$B" run "${common[@]}" --cold-tier int8 --question "$Q1" --question "$Q2" > "$D/int8.json"
"$B" run "${common[@]}" --cold-tier f16 --question "$Q1" --question "$Q2" > "$D/f16.json"
"$B" run "${common[@]}" --cold-tier int8 --save-session "$D/doc.snkv" > "$D/save.json"
for n in load load2; do
  "$B" run -m smollm2 --load-session "$D/doc.snkv" --question "$Q1" --question "$Q2" -n 16 --temp 0 --json -t 2 \
    > "$D/$n.json"
done
rm -f "$D/doc.snkv"
python3 - "$D" <<'PY'
import json, sys
D = sys.argv[1]
for n in ["plain", "int8", "f16"]:
    j = json.load(open(f"{D}/{n}.json"))
    print(n, "context", j["n_context_tokens"], "tokens; hot", j["kv_cache_bytes"], "B; cold", j["kv_cold_bytes"], "B")
    for a in j["answers"]:
        print("   ", repr(a["text"][:60]), "ttft", round(a["ttft_ms"]), "ms; reselect", round(a["reselect_ms"], 1), "ms")
s = json.load(open(f"{D}/save.json"))
print("document prefill (saved run)", round(s["prefill_ms"]), "ms; session file", s["session_bytes"], "B")
for n in ["load", "load2"]:
    j = json.load(open(f"{D}/{n}.json"))
    print(n, "restore", round(j["session_load_ms"], 1), "ms", [a["text"][:50] for a in j["answers"]])
PY
