#!/usr/bin/env python3
"""Generate tests/data/tokenizer-vectors/gguf-pre-llamacpp.json: for each tokenizer.ggml.pre name
llama.cpp reads for byte-level BPE vocabularies, llama_tokenize's ids of the shared test strings
with SmolLM2's vocabulary (tests/data/tokenizers/smollm2/vocab.gguf) under that pre-tokenizer.

The vocabulary is not the one those models ship (they are not downloaded here): what the ids test
is each pre-tokenizer's split of the text, which decides where the merges may reach, with llama.cpp
itself as the oracle. The file is rewritten with only tokenizer.ggml.pre changed.

Usage (from the repository root):
    pip install numpy gguf
    LLAMA=.../llama.cpp   # built with cmake (build/bin/libllama.so), e.g. llama-cpp-python's vendor/llama.cpp
    python3 tests/gen/make_gguf_pre_vectors.py --llama $LLAMA
"""
import argparse
import json
import os
import subprocess
import tempfile

import gguf

import make_gguf_tokenizer_vectors as base

# The names, grouped as llama.cpp groups them into regex sets (src/llama-vocab.cpp).
NAMES = [
    "default", "gpt-2", "phi-2", "roberta-bpe", "mpt", "olmo", "jais", "trillion", "granite-docling", "jina-es", "jina-de",
    "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "jina-v1-en", "jina-v2-code", "exaone4",
    "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano", "dbrx",
    "smaug-bpe", "chatglm-bpe", "glm4", "glm5",
    "qwen2", "deepseek-r1-qwen", "megrez", "kormo", "f2llmv2", "stablelm2", "hunyuan", "solar-open", "qwen35",
    "smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2",
    "gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2", "tekken",
    "deepseek-llm", "deepseek-coder", "deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4", "falcon",
    "poro-chat", "bloom", "gpt3-finnish", "viking", "seed-coder", "ufakzeka", "grok-2", "bailingmoe", "bailingmoe2",
    "llada-moe", "exaone-moe", "jais-2", "minicpm5", "laguna", "spark2_5", "youtu", "granite-embed-multi-97m", "chameleon",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama", required=True, help="llama.cpp source folder with build/bin/libllama.so")
    args = ap.parse_args()
    vocab = os.path.join(base.DATA, "tokenizers", "smollm2", "vocab.gguf")
    shared = json.load(open(os.path.join(base.DATA, "tokenizer-vectors", "qwen3.json")))
    texts = [c["text"] for c in shared["cases"]][:100] + base.EXTRA
    out = {"vocabulary": "tokenizers/smollm2/vocab.gguf, its tokenizer.ggml.pre replaced by each name",
           "generator": "tests/gen/make_gguf_pre_vectors.py with llama.cpp's llama_tokenize "
                        "(llama-cpp-python 0.3.36's vendor/llama.cpp), add_special=false, parse_special=true",
           "texts": texts, "ids": {}}
    with tempfile.TemporaryDirectory() as tmp:
        binary = os.path.join(tmp, "llama_tokenize_vectors")
        lib = os.path.join(args.llama, "build", "bin")
        subprocess.run(["cc", "-O1", os.path.join(base.HERE, "llama_tokenize_vectors.c"), "-I" + os.path.join(args.llama, "include"),
                        "-I" + os.path.join(args.llama, "ggml", "include"), "-L" + lib, "-lllama", "-Wl,-rpath," + lib,
                        "-o", binary], check=True)
        for name in NAMES:
            path = os.path.join(tmp, "vocab-%s.gguf" % name)
            base.write_vocab(vocab, path, {"tokenizer.ggml.pre": name})
            out["ids"][name] = [ids for ids, _ in base.oracle(binary, path, texts)]
    write_grouped(out, os.path.join(base.DATA, "tokenizer-vectors", "gguf-pre-llamacpp.json"))


def write_grouped(out, path):
    """The names whose ids are the same for every text share one entry: {"names": [...], "ids": [...]}."""
    groups = []
    for name in NAMES:
        ids = out["ids"][name]
        same = next((g for g in groups if g["ids"] == ids), None)
        if same:
            same["names"].append(name)
        else:
            groups.append({"names": [name], "ids": ids})
    head = {k: v for k, v in out.items() if k != "ids"}
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(head, ensure_ascii=False, indent=1)[:-2] + ',\n "groups": [\n')
        f.write(",\n".join('  {"names": %s,\n   "ids": [%s]}' % (json.dumps(g["names"]), ", ".join(json.dumps(i) for i in g["ids"]))
                            for g in groups))
        f.write("\n ]\n}\n")
    json.load(open(path))
    print("%s: %d names in %d groups x %d texts" % (path, len(NAMES), len(groups), len(out["texts"])))

if __name__ == "__main__":
    main()
