#!/usr/bin/env bash
# Runs the GGUF parser fuzzer for a fixed time on a fresh seed corpus; fails on any crash.
#   fuzz/run.sh <path to fuzz_gguf> <seconds>
# Corpus: fuzz/seeds/*.gguf (small writer-made files) plus the first 64 KiB of every GGUF file in
# ../shared/models and ../shared/tokenizers (relative to the repository root). Crash inputs are kept
# in <binary dir>/fuzz-artifacts/.
set -euo pipefail
if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 <fuzz_gguf binary> [seconds=60]" >&2
  exit 2
fi
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
secs="${2:-60}"
here="$(cd "$(dirname "$0")" && pwd)"
shared="$here/../../shared"
[[ -x "$bin" ]] || { echo "fuzz/run.sh: $bin is not an executable (build target fuzz_gguf first)" >&2; exit 2; }

corpus="$(mktemp -d "${TMPDIR:-/tmp}/snapkv-fuzz-corpus.XXXXXX")"
trap 'rm -rf "$corpus"' EXIT
n=0
for f in "$here"/seeds/*.gguf; do
  [[ -f "$f" ]] || continue
  cp "$f" "$corpus/seed_$(basename "$f")"
  n=$((n + 1))
done
for f in "$shared"/models/*.gguf "$shared"/tokenizers/*.gguf; do
  [[ -f "$f" ]] || continue
  head -c 65536 "$f" >"$corpus/shared_$(basename "$f")"
  n=$((n + 1))
done
echo "fuzz/run.sh: $n seed files, ${secs}s"

artifacts="$(dirname "$bin")/fuzz-artifacts"
mkdir -p "$artifacts"
set +e
"$bin" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -dict="$here/gguf.dict" -artifact_prefix="$artifacts/" "$corpus"
rc=$?
set -e
if [[ $rc -ne 0 ]]; then
  echo "fuzz/run.sh: fuzz_gguf FAILED (exit $rc); reproducer(s) in $artifacts/" >&2
  exit "$rc"
fi
echo "fuzz/run.sh: no crash in ${secs}s"
