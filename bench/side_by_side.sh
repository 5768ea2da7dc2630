#!/bin/bash
# The side by side of README "Performance": kiln and the peers on the same synthetic
# TinyLlama-1.1B, one engine at a time, each .kiln dropped from the page cache first.
#   KILN=build/release/kiln LLAMA_BENCH=... IK_BENCH=... MODELS=/tmp/syn GGUFS=/tmp/peers \
#     bench/side_by_side.sh OUT_DIR
# MODELS holds tl-w4a16.kiln and tl-w4a8.kiln (kiln compile DIR -q w4a16 --group 32, -q w4a8);
# GGUFS holds tinyllama-synth-q4_0.gguf (llama.cpp) and ik-IQ4_XS.gguf, ik-Q4_0_R8.gguf
# (ik_llama.cpp's llama-quantize), made from the same synth folder by bench/synth_to_gguf.py
# and each peer's llama-quantize: docs/performance.md.
set -euo pipefail
OUT=${1:?output directory}
: "${KILN:?}" "${LLAMA_BENCH:?}" "${IK_BENCH:?}" "${MODELS:?}" "${GGUFS:?}"
mkdir -p "$OUT" && cd "$OUT"
date > started
kiln() { dd if="$MODELS/tl-$1.kiln" iflag=nocache count=0 status=none
         "$KILN" bench "$MODELS/tl-$1.kiln" -p 512 -n 64 -r 3 --threads "$2" --json > "kiln-$1-t$2-$3.json" 2> "kiln-$1-t$2-$3.err"; }
lb() { "$LLAMA_BENCH" -m "$GGUFS/tinyllama-synth-$1.gguf" -p 512 -n 64 -t "$2" -r 3 -o md > "llama-$1-t$2-$3.md" 2> /dev/null; }
ik() { "$IK_BENCH" -m "$GGUFS/ik-$1.gguf" -p 512 -n 64 -t "$2" -r 3 -o md > "ik-$1-t$2-$3.md" 2> /dev/null; }
for pass in a b; do
  kiln w4a16 2 $pass; lb q4_0 2 $pass; ik IQ4_XS 2 $pass; ik Q4_0_R8 2 $pass; kiln w4a8 2 $pass
done
kiln w4a16 1 a; lb q4_0 1 a; ik IQ4_XS 1 a
for pass in c d; do kiln w4a16 2 $pass; ik IQ4_XS 2 $pass; done
# One thread each, kiln W4A16 and IQ4_XS at the same time, one per core, then swapped: both
# see the same minute of a noisy host.
for cores in "0 1" "1 0"; do
  set -- $cores
  taskset -c "$1" "$KILN" bench "$MODELS/tl-w4a16.kiln" -p 512 -n 0 -r 3 --threads 1 --json > "pair-kiln-core$1.json" 2> /dev/null &
  taskset -c "$2" "$IK_BENCH" -m "$GGUFS/ik-IQ4_XS.gguf" -p 512 -n 0 -t 1 -r 3 -o md > "pair-ik-core$2.md" 2> /dev/null
  wait
done
date > finished
