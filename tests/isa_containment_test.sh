#!/usr/bin/env bash
# Every instruction beyond baseline x86-64 in a kiln binary lives in a function of an
# instruction-set file (src/backends/cpu/x86/*.cpp, built with -mavx2/-mavx512*/-mamx*), which
# runs only after the dispatch point's feature test. The danger this catches: an inline function
# or template that a baseline file and an ISA file both compile (a header helper, a std::
# container), where the linker keeps the ISA file's copy and baseline code calls it on a CPU
# without that ISA (SIGILL); or wide code in a baseline file.
#
# Usage: isa_containment_test.sh BUILD_DIR BINARY...
# Fails naming each function with VEX/EVEX/AMX instructions that is not defined only by an ISA
# file's object.
set -euo pipefail
build=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

isa_objs=$(find "$build/CMakeFiles/kiln_backend_cpu.dir" -path '*/x86/*.o' | sort)
[ -n "$isa_objs" ] || { echo "isa_containment: no ISA objects under $build (not an x86 build?)"; exit 0; }
base_objs=$(find "$build/CMakeFiles" -name '*.o' -path '*/kiln*.dir/*' ! -path '*/x86/*' \
              ! -path '*/kiln_tests.dir/*' ! -path '*/kiln_bench*' ! -path '*/fuzz*' | sort)

# Text symbols each side defines (mangled).
# shellcheck disable=SC2086
nm --defined-only $isa_objs 2>/dev/null | awk '$2 ~ /^[tTwW]$/ {print $3}' | sort -u >"$work/isa"
# shellcheck disable=SC2086
nm --defined-only $base_objs 2>/dev/null | awk '$2 ~ /^[TWu]$/ {print $3}' | sort -u >"$work/base"

# One disassembly, read twice below.
objdump -d --no-show-raw-insn "$@" >"$work/dis"

# Functions of the binary holding an instruction beyond x86-64: AVX/AVX2/FMA/F16C and AVX-512
# (v-prefixed mnemonics, opmask k-instructions) and AMX (tile*, ldtilecfg, tdp*).
awk '
  /^[0-9a-f]+ <.*>:$/ { fn = substr($2, 2, length($2) - 3); next }
  /^ +[0-9a-f]+:\t/ {
    split($0, parts, "\t"); m = parts[2]; sub(/ .*/, "", m)
    if (m ~ /^v[a-z]/ && m !~ /^verr|^verw/ || m ~ /^k(mov|and|or|xor|not|shift|unpck|ortest|test|add)/ ||
        m ~ /^(tile|ldtilecfg|sttilecfg|tdp)/) wide[fn] = 1
  }
  END { for (f in wide) print f }' "$work/dis" | sed 's/@plt$//' | sort -u >"$work/wide"

# Every LDTILECFG loads the one constant tile configuration (x86/amx_tile_config.h), never a copy
# built on the stack, whose stores g++ 12 drops as dead: each function holding one refers to it.
awk '
  /^[0-9a-f]+ <.*>:$/ { fn = substr($2, 2, length($2) - 3); next }
  /kAmxTileConfig/ { cfg[fn] = 1 }
  /\tldtilecfg / { ld[fn] = 1 }
  END { for (f in ld) if (!(f in cfg)) print f }' "$work/dis" >"$work/cfg"

bad=0
while read -r fn; do
  echo "isa_containment: $fn loads a tile configuration other than kAmxTileConfig"
  bad=1
done <"$work/cfg"
while read -r fn; do
  if ! grep -qxF "$fn" "$work/isa"; then
    echo "isa_containment: $fn has wide instructions but no ISA file defines it"
    bad=1
  elif grep -qxF "$fn" "$work/base"; then
    echo "isa_containment: $fn is defined by an ISA file and a baseline file; the binary kept the ISA copy"
    bad=1
  fi
done <"$work/wide"
n=$(wc -l <"$work/wide")
[ "$bad" -eq 0 ] || exit 1
echo "isa_containment: $n functions with wide instructions in $*, each only in an ISA file"
