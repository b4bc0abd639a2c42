#!/usr/bin/env bash
# Compiles (syntax and warnings only, no objects) the sources whose SIMD code paths depend on the
# target CPU for CPUs other than this one: x86-64-v3 (AVX2/FMA/F16C, no AVX-512) and baseline
# x86-64 (scalar fallbacks), and the VNNI CPUs below. The Release, sanitizer and fuzz builds are
# all -march=native, so without this a mistake in a fallback path would only show on another machine.
# Usage: scripts/check_portable.sh [compiler]   (default: c++)
set -euo pipefail
cd "$(dirname "$0")/.."
cxx="${1:-c++}"
flags=(-std=c++20 -fsyntax-only -fopenmp -Werror -Wall -Wextra -Wpedantic -Wshadow -Wno-unused-parameter -Isrc -Iinclude)
# GCC 12's false -Wrestrict positives in std::string (see CMakeLists.txt).
"$cxx" --version | grep -qi gcc && flags+=(-Wno-restrict)
failed=0
for arch in x86-64-v3 x86-64; do
  for f in src/attention/*.cpp src/quant/*.cpp src/core/*.cpp src/model/*.cpp src/kv/*.cpp; do
    if ! "$cxx" "${flags[@]}" -march="$arch" "$f"; then
      echo "check_portable: $f fails to compile for -march=$arch" >&2
      failed=1
    fi
  done
done
# CPUs with a vpdpbusd form of the INT8 prefill's dot product (attention/int8_dot.h): AVX512-VNNI
# (Ice Lake server) and AVX-VNNI without AVX-512 (Alder Lake): the attention sources and the
# tests that run the VNNI forms on such CPUs (also decode's int16 scores over Q8_0 keys,
# attention/decode_q8_keys.h, on AVX512-VNNI).
for arch in icelake-server alderlake; do
  for f in src/attention/*.cpp tests/attention/test_int8_dot.cpp tests/attention/test_decode_q8_keys.cpp; do
    if ! "$cxx" "${flags[@]}" -Itests -DSNAPKV_SOURCE_DIR='"."' -DSNAPKV_BINARY_DIR='"."' -march="$arch" "$f"; then
      echo "check_portable: $f fails to compile for -march=$arch" >&2
      failed=1
    fi
  done
done
exit "$failed"
