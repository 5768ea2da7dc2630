#!/usr/bin/env python3
"""Generate tests/data/tokenizer-vectors/gguf-pre-llamacpp.json: for each tokenizer.ggml.pre name
llama.cpp reads for byte-level BPE vocabularies, llama_tokenize's ids of the shared test strings
with two vocabularies under that pre-tokenizer:
  smollm2  tests/data/tokenizers/smollm2/vocab.gguf, the file with only tokenizer.ggml.pre changed;
  gpt2     tests/data/tokenizers/gpt2/tokenizer.json written as llama.cpp's converter writes a
           byte-level vocabulary (what the test's gguf_from_json builds in memory): GPT-2 has
           tokens for numbers of two and three digits, where SmolLM2 has single digits only, so
           the ways of cutting numbers differ in its ids;
and, for the names llama.cpp reads as SentencePiece-style BPE, a Gemma-style vocabulary
(tests/data/tokenizer-vectors/tokenizers/gemma-style/tokenizer.json, the same way).

The vocabularies are not the ones those models ship (they are not downloaded here): what the ids
test is each pre-tokenizer's split of the text, which decides where the merges may reach, with
llama.cpp itself as the oracle.

Usage (from the repository root):
    pip install numpy gguf
    LLAMA=.../llama.cpp   # built with cmake (build/bin/libllama.so), e.g. llama-cpp-python's vendor/llama.cpp
    python3 tests/gen/make_gguf_pre_vectors.py --llama $LLAMA
"""
import argparse
import json
import os
import re
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
    "tiny_aya", "cohere2moe", "superbpe", "afmoe", "kimi-k2",
]

# The names under which llama.cpp reads a "gpt2" vocabulary as SentencePiece-style BPE (raw UTF-8
# pieces, "<0xXX>" byte tokens): checked with the Gemma-style vocabulary of
# tokenizer-vectors/tokenizers/gemma-style/tokenizer.json, its byte pieces typed BYTE (6).
SPM_NAMES = ["gemma4", "granite-embed-multi-311m", "sarvam-moe", "whitespace"]

# Texts that tell the ways of cutting numbers, Han and contractions apart.
MORE = [
    "1 22 333 4444 55555 666666 7777777 88888888", "a1234b 12,345,678.9012 x99999", "²³¹ ١٢٣٤ 12³45 ⅷ",
    "北京大学的学生们 2026年12月5日", "中文English混合テキスト", "We'll they've I'd HE'LL she's", "ÀÉÎõü naïve café Ωmega",
    "ทดสอบภาษาไทย ພາສາລາວ ភាសាខ្មែរ", "한국어 텍스트 1000원", "ＡＢＣ１２３ｶﾀｶﾅ",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama", required=True, help="llama.cpp source folder with build/bin/libllama.so")
    args = ap.parse_args()
    smollm2 = os.path.join(base.DATA, "tokenizers", "smollm2", "vocab.gguf")
    gpt2 = os.path.join(base.DATA, "tokenizers", "gpt2", "tokenizer.json")
    gemma = os.path.join(base.DATA, "tokenizer-vectors", "tokenizers", "gemma-style", "tokenizer.json")
    shared = json.load(open(os.path.join(base.DATA, "tokenizer-vectors", "qwen3.json")))
    texts = [c["text"] for c in shared["cases"]][:100] + base.EXTRA + MORE
    out = {"generator": "tests/gen/make_gguf_pre_vectors.py with llama.cpp's llama_tokenize "
                        "(llama-cpp-python 0.3.36's vendor/llama.cpp), add_special=false, parse_special=true",
           "texts": texts, "vocabularies": []}
    with tempfile.TemporaryDirectory() as tmp:
        binary = os.path.join(tmp, "llama_tokenize_vectors")
        lib = os.path.join(args.llama, "build", "bin")
        subprocess.run(["cc", "-O1", os.path.join(base.HERE, "llama_tokenize_vectors.c"), "-I" + os.path.join(args.llama, "include"),
                        "-I" + os.path.join(args.llama, "ggml", "include"), "-L" + lib, "-lllama", "-Wl,-rpath," + lib,
                        "-o", binary], check=True)
        for vocab, label, names, write_one in (
                ("smollm2", "tokenizers/smollm2/vocab.gguf, its tokenizer.ggml.pre replaced by each name", NAMES,
                 lambda path, name: base.write_vocab(smollm2, path, {"tokenizer.ggml.pre": name})),
                ("gpt2", "tokenizers/gpt2/tokenizer.json as a GGUF vocabulary under each name", NAMES,
                 lambda path, name: write_json_vocab(gpt2, path, name)),
                ("gemma-style", "tokenizer-vectors/tokenizers/gemma-style/tokenizer.json as a GGUF vocabulary "
                                "(byte pieces typed BYTE) under each name", SPM_NAMES,
                 lambda path, name: write_json_vocab(gemma, path, name, byte_type=True))):
            ids = {}
            for name in names:
                path = os.path.join(tmp, "vocab-%s-%s.gguf" % (vocab, name))
                write_one(path, name)
                ids[name] = oracle(binary, path, texts)
            out["vocabularies"].append({"name": vocab, "vocabulary": label, "groups": grouped(names, ids)})
    write_vectors(out, os.path.join(base.DATA, "tokenizer-vectors", "gguf-pre-llamacpp.json"))


def oracle(binary, path, texts):
    """llama_tokenize's ids of each text; None for a text llama.cpp aborts on. (Under "whitespace"
    a run of whitespace with a space in it is one word, and llama.cpp's find_bpe_rank asserts that
    no token it is asked about holds a space.)"""
    try:
        return [i for i, _ in base.oracle(binary, path, texts)]
    except subprocess.CalledProcessError:
        out = []
        for t in texts:
            try:
                out.append(base.oracle(binary, path, [t])[0][0])
            except subprocess.CalledProcessError:
                out.append(None)
        return out


def write_json_vocab(src, path, pre, byte_type=False):
    """A tokenizer.json's BPE vocabulary as llama.cpp's converter writes it: tokens by id, added
    special tokens CONTROL (3), other added tokens USER_DEFINED (4), with byte_type "<0xXX>" pieces
    BYTE (6), merges as "a b", no BOS added (the test's gguf_from_json)."""
    j = json.load(open(src, encoding="utf-8"))
    tokens = [None] * len(j["model"]["vocab"])
    for t, i in j["model"]["vocab"].items():
        tokens[i] = t
    for a in j["added_tokens"]:
        while a["id"] >= len(tokens):
            tokens.append("[PAD%d]" % len(tokens))
        tokens[a["id"]] = a["content"]
    types = [6 if byte_type and re.fullmatch("<0x[0-9A-Fa-f]{2}>", t) else 1 for t in tokens]
    for a in j["added_tokens"]:
        types[a["id"]] = 3 if a["special"] else 4
    merges = [m if isinstance(m, str) else m[0] + " " + m[1] for m in j["model"]["merges"]]
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_add_bos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def grouped(names, ids):
    """The names whose ids are the same for every text share one entry: {"names": [...], "ids": [...]}."""
    groups = []
    for name in names:
        same = next((g for g in groups if g["ids"] == ids[name]), None)
        if same:
            same["names"].append(name)
        else:
            groups.append({"names": [name], "ids": ids[name]})
    return groups


def write_vectors(out, path):
    """One line per group's ids, so that a change shows as a few lines of diff."""
    head = {k: v for k, v in out.items() if k != "vocabularies"}
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(head, ensure_ascii=False, indent=1)[:-2] + ',\n "vocabularies": [\n')
        f.write(",\n".join(
            '  {"name": %s, "vocabulary": %s, "groups": [\n%s]}' % (
                json.dumps(v["name"]), json.dumps(v["vocabulary"]),
                ",\n".join('   {"names": %s,\n    "ids": [%s]}' % (
                    json.dumps(g["names"]), ", ".join(json.dumps(i) for i in g["ids"])) for g in v["groups"]))
            for v in out["vocabularies"]))
        f.write("\n ]\n}\n")
    json.load(open(path))
    for v in out["vocabularies"]:
        print("%s: %s: %d names in %d groups x %d texts" % (path, v["name"], sum(len(g["names"]) for g in v["groups"]),
                                                           len(v["groups"]), len(out["texts"])))


if __name__ == "__main__":
    main()
