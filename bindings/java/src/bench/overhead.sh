#!/usr/bin/env bash
# The Java binding's cost against the C API: decode tok/s of the same greedy generation through
# decode_bench.c (kiln.h, libkiln.so) and DecodeBench.java (kiln.jar, libkiln_jni.so: streamed
# through generateAsync, and blocking), in alternating rounds; the median and the best of each at the
# end (on a shared machine noise only slows a run down, so the best is the estimate least disturbed).
# Usage: overhead.sh MODEL [THREADS=2] [TOKENS=128] [ROUNDS=5] [REPS=2]   (after the release build)
set -euo pipefail
cd "$(dirname "$0")/../../../.."
model=$1 threads=${2:-2} tokens=${3:-128} rounds=${4:-5} reps=${5:-2}
b=build/release
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -std=c11 -Wall -Wextra -Werror -Iinclude bindings/java/src/bench/decode_bench.c -L$b -lkiln -Wl,-rpath,$PWD/$b -o "$work/decode_bench"
java_bench() {
  java -Dkiln.library=$b/bindings/java/libkiln_jni.so -cp $b/bindings/java/kiln.jar:$b/bindings/java/kiln-tests.jar \
    ai.kiln.test.DecodeBench "$model" "$threads" "$tokens" "$reps" "$1"
}
for r in $(seq "$rounds"); do
  "$work/decode_bench" "$model" "$threads" "$tokens" "$reps" | tee -a "$work/all.txt"
  java_bench async | tee -a "$work/all.txt"
  java_bench blocking | tee -a "$work/all.txt"
done
echo "medians over $rounds rounds x $reps reps ($tokens tokens, $threads threads):"
for kind in c java-async java-blocking; do
  awk -v k="$kind" '$1 == k {print $3}' "$work/all.txt" | sort -g |
    awk -v k="$kind" '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
      printf "  %-14s decode %.2f tok/s (min %.2f, max %.2f, n %d)\n", k, m, v[1], v[NR], NR}'
done
