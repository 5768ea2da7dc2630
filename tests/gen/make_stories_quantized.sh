#!/usr/bin/env bash
# tests/data/gguf-quant/stories260K-Q4_0.gguf, -Q4_1.gguf and -IQ4_NL.gguf: the committed stories260K GGUF
# quantized by llama.cpp's own llama-quantize (llama-cpp-python 0.3.36's vendor/llama.cpp, built
# with cmake outside this tree). llama-quantize keeps output.weight at Q8_0, and the 172-wide
# ffn_down at F16 (172 is no multiple of 32). tests/gen/make_gguf_iq4.py then takes its
# reference values from the IQ4_NL file.
#   LLAMA=.../llama.cpp tests/gen/make_stories_quantized.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
for t in Q4_0 Q4_1 IQ4_NL; do
  "$LLAMA/build/bin/llama-quantize" tests/data/stories260K-gguf/stories260K.gguf \
    "tests/data/gguf-quant/stories260K-$t.gguf" "$t" >/dev/null
done
