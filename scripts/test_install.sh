#!/usr/bin/env bash
# Installs a snapkv build into a temporary prefix and uses it only from there, as a user would:
#   1. the installed tree: the shared library with its SONAME, exactly the public headers (each
#      compiles on its own; snapkv_c.h as C99), the CMake package, the pkg-config file, and no
#      path of the source or build tree in any installed file;
#   2. examples/c and examples/cpp configured with find_package(snapkv) (-DCMAKE_PREFIX_PATH),
#      built and run on stories260K (greedy text checked);
#   3. the C example compiled with `cc ... $(pkg-config --cflags --libs snapkv)` and run;
#   4. tests/python/test_ctypes.py loading the installed libsnapkv.so.
# Usage: scripts/test_install.sh [BUILD_DIR=build]   (run by scripts/test.sh after the Release ctest)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
shared="${SNAPKV_SHARED_DIR:-../shared}"
model="$(cd "$shared/models" && pwd)/stories260K.gguf"
expect="there was a little girl named Lily"
src="$PWD"
build_abs="$(cd "$build" && pwd)"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/snapkv-install.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
die() { echo "test_install: FAILED: $*" >&2; exit 1; }

echo "-- install into $prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
lib="$(find "$prefix" -name libsnapkv.so -print -quit)"
[[ -n "$lib" ]] || die "no libsnapkv.so installed"
libdir="$(dirname "$lib")"
soname="$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
[[ "$soname" =~ ^libsnapkv\.so\.[0-9]+\.[0-9]+$ && -e "$libdir/$soname" ]] || die "SONAME '$soname' not installed"
[[ -f "$libdir/cmake/snapkv/snapkvConfig.cmake" && -f "$libdir/cmake/snapkv/snapkvConfigVersion.cmake" ]] ||
  die "no CMake package under $libdir/cmake/snapkv"
[[ -f "$libdir/pkgconfig/snapkv.pc" ]] || die "no $libdir/pkgconfig/snapkv.pc"
want="$(cd include/snapkv && ls ./*.h | sort)"
got="$(cd "$prefix/include/snapkv" && ls ./* | sort)"
[[ "$want" == "$got" ]] || die "installed headers differ from include/snapkv: $got"
if grep -rl -e "$src" -e "$build_abs" "$prefix"; then die "the files above name the source or build tree"; fi
[[ -f "$prefix/share/snapkv/eval_plots.py" ]] || die "no share/snapkv/eval_plots.py (the pictures of snapkv eval)"

echo "-- every installed header compiles on its own"
for h in "$prefix"/include/snapkv/*.h; do
  echo "#include <snapkv/$(basename "$h")>" | c++ -std=c++20 -Wall -Wextra -Werror -fsyntax-only -I"$prefix/include" -x c++ - ||
    die "$(basename "$h") does not compile alone"
done
echo "#include <snapkv/snapkv_c.h>" | cc -std=c99 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$prefix/include" -x c - ||
  die "snapkv_c.h is not C99"

for ex in c cpp; do
  echo "-- examples/$ex with find_package(snapkv)"
  cmake -S "examples/$ex" -B "$tmp/example-$ex" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
    >"$tmp/example-$ex.log" 2>&1 || { cat "$tmp/example-$ex.log"; die "configuring examples/$ex"; }
  cmake --build "$tmp/example-$ex" >>"$tmp/example-$ex.log" 2>&1 || { cat "$tmp/example-$ex.log"; die "building examples/$ex"; }
  out="$("$tmp/example-$ex/generate" "$model" "Once upon a time" 20 "snapkv:budget=64")" || die "running examples/$ex"
  echo "   $out"
  [[ "$out" == *"$expect"* ]] || die "examples/$ex printed the wrong text"
done

echo "-- examples/c with pkg-config"
flags="$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs snapkv)"
# shellcheck disable=SC2086  # the flags are words
cc -std=c11 -Wall -Wextra -Wpedantic -Werror examples/c/generate.c -o "$tmp/generate-pc" $flags -Wl,-rpath,"$libdir" ||
  die "compiling examples/c/generate.c with pkg-config's flags ($flags)"
out="$("$tmp/generate-pc" "$model" "Once upon a time" 20 2>/dev/null)" || die "running the pkg-config build"
[[ "$out" == *"$expect"* ]] || die "the pkg-config build printed the wrong text: $out"

echo "-- Python ctypes through the installed library"
python3 tests/python/test_ctypes.py --lib "$lib" --model "$model" || die "tests/python/test_ctypes.py"
echo "-- install stage passed"
