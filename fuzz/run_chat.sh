#!/usr/bin/env bash
# Runs the chat-template fuzzer for a fixed time; fails on any crash.
#   fuzz/run_chat.sh <fuzz_chat_template binary> [seconds=60]
# Corpus (a temporary directory): the templates of tests/data/chat_templates/. Jinja's tag and
# keyword texts are the dictionary (chat_template.dict). Crash inputs are kept in
# <binary dir>/fuzz-artifacts-chat/.
set -euo pipefail
[[ $# -ge 1 && $# -le 2 ]] || { echo "usage: $0 <fuzz_chat_template binary> [seconds=60]" >&2; exit 2; }
[[ -x "$1" && -f "$1" ]] || { echo "fuzz/run_chat.sh: '$1' is not an executable (build target fuzz_chat_template)" >&2; exit 2; }
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
secs="${2:-60}"
[[ "$secs" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz/run_chat.sh: seconds must be a positive integer, got '$secs'" >&2; exit 2; }
here="$(cd "$(dirname "$0")" && pwd)"
corpus="$(mktemp -d "${TMPDIR:-/tmp}/snapkv-fuzz-chat.XXXXXX")"
trap 'rm -rf "$corpus"' EXIT
cp "$here"/../tests/data/chat_templates/*.jinja "$corpus"/
artifacts="$(dirname "$bin")/fuzz-artifacts-chat"
mkdir -p "$artifacts"
"$bin" -max_total_time="$secs" -max_len=16384 -timeout=10 -rss_limit_mb=2048 -dict="$here/chat_template.dict" \
  -artifact_prefix="$artifacts/" "$corpus"
