#!/usr/bin/env bash
# Builds snapkv and runs the whole test suite:
#   0. the CPU-dependent kernel sources compiled for AVX2 and baseline x86-64 (scripts/check_portable.sh);
#   1. Release build, every ctest (unit, golden vs llama.cpp, real-model end to end);
#   1a. on an AVX-512 machine, an AVX2-only build (x86-64-v3) through the kernel and golden tests;
#   1b. the Release build installed into a temporary prefix, with the C and C++ examples, a pkg-config
#      build and the Python ctypes test run against the installed package only;
#   2. the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer;
#   2b. the server and batching tests under ThreadSanitizer (when clang is available);
#   3. short libFuzzer runs on the GGUF parser and the chat-template renderer (when clang is available).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/get-model.sh all >/dev/null  # both models: the real-model tests use Gemma 3 and SmolLM2

jobs="$(nproc)"
# ctest runs test processes in parallel and many of them use 2 OpenMP threads: with more
# threads than cores, spinning at barriers wastes the other process's core (measured: a tiny
# model's prefill 4x slower). Sleep instead of spinning while the suite runs.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

echo "== Kernel sources compiled for other CPUs (AVX2 without AVX-512, baseline x86-64, AVX512-VNNI, AVX-VNNI)"
bash scripts/check_portable.sh

echo "== Release build and full test suite"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 900

if grep -qsw avx512f /proc/cpuinfo && grep -qsw avx2 /proc/cpuinfo; then
  # The Release build above runs the AVX-512 kernels; this one runs the AVX2 fallbacks (what an
  # AVX2-only CPU gets) through the kernel unit tests and the golden tests against llama.cpp.
  echo "== AVX2 build (x86-64-v3, no AVX-512): kernel and golden model tests"
  cmake -S . -B build-avx2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DSNAPKV_NATIVE=OFF \
    -DCMAKE_CXX_FLAGS=-march=x86-64-v3 "${launcher[@]}" >/dev/null
  cmake --build build-avx2 -j"$jobs" --target test_core test_attention test_quant test_presses test_model
  ctest --test-dir build-avx2 --output-on-failure -j"$jobs" --timeout 900 -L '^(core|attention|quant|presses|model)$'
fi

echo "== Install into a temporary prefix: examples (find_package, pkg-config) and Python ctypes against it"
bash scripts/test_install.sh build

echo "== Unit tests under ASan + UBSan"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSNAPKV_SANITIZE=ON "${launcher[@]}" >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 900 -LE 'e2e|slow'

if command -v clang++ >/dev/null; then
  # clang: its libomp tells TSan about OpenMP's synchronization through Archer; every binary of
  # this build links Archer and the built-in suppressions (CMakeLists.txt, SNAPKV_TSAN). What runs:
  # the server's unit tests (the scheduler under concurrent clients among them), its process tests
  # that run requests at once (concurrency, admission, disconnect; not openai, whose SmolLM2 part
  # (and sessions: SmolLM2) is slow under TSan, nor hostile, whose RSS bound TSan's allocator breaks, nor concurrency16
  # (SmolLM2, minutes under TSan) and nginx (one request at a time per replica)), the runtime's
  # batching and multi-threaded tests except the two on Gemma 3 (minutes under TSan), and the C
  # API's GoogleTest suite (its engines share a workspace pool between threads; not the C example
  # or the Python ctypes test, test names capi.*), and core/work_split.h's claims raced by OS threads.
  # Archer's start-up warning about ignore_noninstrumented_modules is expected (cmake/tsan_defaults.cpp).
  echo "== Server and batching tests under ThreadSanitizer"
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DSNAPKV_TSAN=ON "${launcher[@]}" >/dev/null
  cmake --build build-tsan -j"$jobs" --target test_server test_runtime test_capi test_core snapkv_cli
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    ctest --test-dir build-tsan --output-on-failure -j"$jobs" --timeout 900 -L 'server|runtime|capi' \
    -E '^server_(openai|hostile|concurrency16|nginx|sessions)$|Gemma|^capi\.'
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    ctest --test-dir build-tsan --output-on-failure -j"$jobs" --timeout 900 -R '^WorkSplit\.'
fi

if command -v clang++ >/dev/null; then
  echo "== libFuzzer run on the GGUF parser"
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DSNAPKV_FUZZ=ON -DSNAPKV_BUILD_TESTS=OFF -DSNAPKV_NATIVE=ON "${launcher[@]}" >/dev/null
  cmake --build build-fuzz -j"$jobs" --target fuzz_gguf make_fuzz_seeds fuzz_chat_template
  bash fuzz/run.sh build-fuzz/fuzz/fuzz_gguf build-fuzz/make_fuzz_seeds 60
  echo "== libFuzzer run on the chat-template renderer"
  bash fuzz/run_chat.sh build-fuzz/fuzz/fuzz_chat_template 60
fi
echo "== all tests passed"
