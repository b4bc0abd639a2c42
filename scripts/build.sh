#!/usr/bin/env bash
# Configures and builds snapkv (Release, -march=native) into build/. Extra args go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@" >/dev/null
cmake --build build -j"$(nproc)"
