#!/usr/bin/env bash
# The C API as an application gets it: `cmake --install` into a fresh prefix, examples/c/stream.c
# compiled as strict C11 with nothing but the installed header and `pkg-config --cflags --libs
# kiln`, run on the shipped model: its greedy text byte-identical to `kiln run --temp 0 -n 200`
# (the golden); examples/c/tokens.c, the token level, gives the same text. Also: libkiln.so
# exports kiln_* and nothing else.
# Usage: capi_install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
# No -rpath of our own: kiln.pc's Libs carry it, so the program finds libkiln.so.0 as built.
cc -std=c11 -Wall -Wextra -Werror -pedantic "$src/examples/c/stream.c" $(pkg-config --cflags --libs kiln) \
  -o "$work/stream"
"$work/stream" "$src/models/stories260K/stories260K.bin" "" 200 0 2>/dev/null >"$work/out.txt"
cmp "$work/out.txt" "$src/tests/data/golden/stories260K_greedy200.txt"
# The token level as a C program drives it (examples/c/tokens.c: tokenize, kiln_session_decode,
# then kiln_session_logits -> argmax -> decode): the same text as kiln_session_generate.
cc -std=c11 -Wall -Wextra -Werror -pedantic "$src/examples/c/tokens.c" $(pkg-config --cflags --libs kiln) \
  -o "$work/tokens"
"$work/tokens" "$src/models/stories260K/stories260K.bin" "" 200 >"$work/out.txt"
cmp "$work/out.txt" "$src/tests/data/golden/stories260K_greedy200.txt"
"$work/tokens" "$src/models/stories260K/stories260K.bin" "Once upon a time" 100 >"$work/tokens.txt"
"$work/stream" "$src/models/stories260K/stories260K.bin" "Once upon a time" 100 0 2>/dev/null >"$work/stream.txt"
cmp "$work/tokens.txt" "$work/stream.txt"
# The same through the portable table (KILN_CPU caps the kernels for the C API too), and a cap
# kiln does not know refused by kiln_runtime_create with the name in its message.
KILN_CPU=portable "$work/stream" "$src/models/stories260K/stories260K.bin" "" 200 0 2>/dev/null >"$work/out.txt"
cmp "$work/out.txt" "$src/tests/data/golden/stories260K_greedy200.txt"
if KILN_CPU=sse9 "$work/stream" "$src/models/stories260K/stories260K.bin" "" 4 0 >/dev/null 2>"$work/err.txt"; then
  echo "KILN_CPU=sse9 was not refused"; exit 1
fi
grep -qx 'stream: runtime: KILN_E_INVALID_ARGUMENT: kiln_runtime_create: KILN_CPU=sse9 is not a kernel table (portable, generic, avx2, avx512, amx, neon, dotprod, i8mm)' "$work/err.txt" ||
  { echo "KILN_CPU=sse9: unexpected message:"; cat "$work/err.txt"; exit 1; }
others=$(nm -D --defined-only "$work/prefix/lib/libkiln.so" | awk '{print $3}' | grep -v '^kiln_' || true)
if [ -n "$others" ]; then
  echo "libkiln.so exports symbols besides kiln_*:"
  echo "$others" | head
  exit 1
fi
# The static library and the CMake package are there too.
test -f "$work/prefix/lib/libkiln.a"
test -f "$work/prefix/lib/cmake/kiln/kilnConfig.cmake"
echo "capi install test: the installed C API streams the golden text, token by token too; libkiln.so exports only kiln_*"
