#!/usr/bin/env python3
"""Generate tests/data/tokenizer-vectors/stories260K.json.

For every test string:
  "llama2c"    ids from llama2.c run.c's encode(tokenizer, text, bos=1, eos=0, ...) with
               tok512.bin (vocab 512).  So the list starts with BOS = 1, then (for non-empty
               text) the dummy-prefix " " piece, then the merged pieces; no EOS.
  "hf"         Hugging Face `tokenizers`: Tokenizer.from_file(stories260K-hf/tokenizer.json)
               .encode(text, add_special_tokens=False).ids   (no BOS)
  "hf_decoded" Tokenizer.decode(hf ids) (default skip_special_tokens=True)

The llama2c ids come from a private driver binary built from llama2.c's run.c (not part of
this repo).  Point LLAMA2C_ENCODER at it; it is run as
    $LLAMA2C_ENCODER encode <tok512.bin> 512
reading one hex-encoded UTF-8 string per stdin line and printing, per line, the ids that
run.c's encode(&t, text, 1, 0, ids, &n) produced, space separated.  See tests/gen/README.md.
Without LLAMA2C_ENCODER the llama2c ids are taken from the existing output file (so the HF part
can be regenerated alone); texts that are new there make the script fail.

Every llama2c list is also cross-checked against a small Python re-statement of run.c's
algorithm (py_llama2c_encode below).

Usage: LLAMA2C_ENCODER=/tmp/l2c/l2c_driver python3 tests/gen/make_tokenizer_vectors.py
"""
import argparse
import json
import os
import struct
import subprocess
import sys

from tokenizers import Tokenizer
import tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "tokenizer-vectors", "stories260K.json")
SHARED = os.environ.get("KILN_TESTDATA", "/work/shared/testdata")
TOK_BIN = os.path.join(SHARED, "stories260K", "tok512.bin")
TOK_JSON = os.path.join(SHARED, "stories260K-hf", "tokenizer.json")

TEXTS = [
    "",
    " ",
    "   ",
    "a",
    "A",
    "Hello world",
    "Once upon a time, there was a little girl named Lily.",
    "Tim and Timmy played with the big red ball.",
    "Lily's mom said, \"Lily, let's go to the park.\"",
    "She said, \"I want to play!\"",
    "The End.",
    "UPPER lower MiXeD",
    " leading space",
    "trailing space ",
    "  two leading and two trailing  ",
    "one  two   three    four",
    "    indented code();",
    "\n",
    "\n\n",
    "line one\nline two",
    "\r\n windows line end\r\n",
    "\t",
    "tab\tseparated\tvalues",
    "ctrl\x01\x1f\x7fchars",
    "1234567890",
    "The year 2024 had 366 days.",
    "3.14159",
    "Hello, world! How are you? I'm fine; thanks: (really) [yes] {no}",
    "~!@#$%^&*()_+-=`|\\/<>",
    "...!!!???",
    "\"quoted\" and 'single'",
    "\u20ac100 \u2122 \u2026 \u2014 \u2013 \u201ccurly\u201d \u2018quotes\u2019",
    "non\u00a0breaking space",
    "caf\u00e9 r\u00e9sum\u00e9 na\u00efve",
    "se\u00f1or jalape\u00f1o",
    "\u00c5ngstr\u00f6m \u00d8re Stra\u00dfe",
    "e\u0301 combining acute",
    "\u0417\u0434\u0440\u0430\u0432\u0441\u0442\u0432\u0443\u0439 \u043c\u0438\u0440",
    "\u4f60\u597d\uff0c\u4e16\u754c",
    "\u4e2d\u6587\u5b57\u7b26",
    "mixed \u4e2d\u6587 and English",
    "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c",
    "\u30ab\u30bf\u30ab\u30ca",
    "\uc548\ub155\ud558\uc138\uc694",
    "\u0645\u0631\u062d\u0628\u0627",
    "\U0001F600",
    "I love \U0001F355 and \U0001F680!",
    "\U0001F468\u200d\U0001F469\u200d\U0001F467",
    "\U0001D518\U0001D52B\U0001D526\U0001D520\U0001D52C\U0001D521\U0001D522",
    "a <s> b",
    "<unk>",
]


def load_tok512(path):
    raw = open(path, "rb").read()
    off = 4
    vocab, scores = [], []
    for _ in range(512):
        s, n = struct.unpack_from("<fi", raw, off)
        off += 8
        vocab.append(raw[off:off + n])
        scores.append(s)
        off += n
    assert off == len(raw)
    return vocab, scores


def py_llama2c_encode(text, vocab, scores):
    """Re-statement of run.c encode(..., bos=1, eos=0), used only as a cross-check."""
    index = {}
    for i, v in enumerate(vocab):
        index.setdefault(v, i)   # run.c's bsearch: the pieces of tok512 are unique
    data = text.encode("utf-8")
    ids = [1]
    if data:
        ids.append(index[b" "])
    i = 0
    while i < len(data):
        j = i + 1
        while j < len(data) and (data[j] & 0xC0) == 0x80 and j - i < 4:
            j += 1
        cp = data[i:j]
        if cp in index:
            ids.append(index[cp])
        else:
            ids.extend(b + 3 for b in cp)
        i = j
    while True:
        best, best_i, best_id = -1e10, -1, -1
        for k in range(len(ids) - 1):
            m = index.get(vocab[ids[k]] + vocab[ids[k + 1]])
            if m is not None and scores[m] > best:
                best, best_i, best_id = scores[m], k, m
        if best_i < 0:
            break
        ids[best_i:best_i + 2] = [best_id]
    return ids


def run_driver(binary, texts):
    inp = "".join(t.encode("utf-8").hex() + "\n" for t in texts)
    out = subprocess.run([binary, "encode", TOK_BIN, "512"], input=inp, capture_output=True,
                         text=True, check=True).stdout
    lines = out.split("\n")
    assert len(lines) == len(texts) + 1 and lines[-1] == "", "driver output has wrong line count"
    return [[int(x) for x in l.split()] for l in lines[:-1]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()
    assert len(set(TEXTS)) == len(TEXTS)
    for t in TEXTS:
        assert "\x00" not in t, "run.c takes NUL-terminated strings"

    binary = os.environ.get("LLAMA2C_ENCODER")
    if binary:
        l2c = run_driver(binary, TEXTS)
    else:
        old = {c["text"]: c["llama2c"] for c in json.load(open(args.out))["cases"]}
        missing = [t for t in TEXTS if t not in old]
        if missing:
            sys.exit("LLAMA2C_ENCODER not set and no stored llama2c ids for %r" % missing)
        l2c = [old[t] for t in TEXTS]
        print("LLAMA2C_ENCODER not set: reusing stored llama2c ids")

    vocab, scores = load_tok512(TOK_BIN)
    tok = Tokenizer.from_file(TOK_JSON)
    cases = []
    n_py_ok = n_same = 0
    for text, ids in zip(TEXTS, l2c):
        py = py_llama2c_encode(text, vocab, scores)
        if py == ids:
            n_py_ok += 1
        else:
            print("python re-statement differs from run.c for %r: %s vs %s" % (text, py, ids))
        hf = tok.encode(text, add_special_tokens=False).ids
        dec = tok.decode(hf)
        if hf == ids[1:]:
            n_same += 1
        else:
            print("hf != llama2c[1:] for %r:\n   llama2c %s\n   hf      %s" % (text, ids, hf))
        cases.append({"text": text, "llama2c": ids, "hf": hf, "hf_decoded": dec})
    print("%d cases; python re-statement == run.c on %d; hf == llama2c minus BOS on %d"
          % (len(cases), n_py_ok, n_same))
    if n_py_ok != len(cases):
        sys.exit("run.c cross-check failed")

    doc = {
        "source": (
            "llama2c: ids from llama2.c run.c (github.com/karpathy/llama2.c, commit 350e04f) "
            "encode(&tokenizer, text, /*bos*/1, /*eos*/0, ids, &n) with tok512.bin, vocab_size 512, "
            "compiled with gcc as a private driver (not in this repo); so each list starts with BOS=1, then "
            "the dummy-prefix ' ' piece for non-empty text, no EOS. "
            "hf: Hugging Face tokenizers %s, Tokenizer.from_file(stories260K-hf/tokenizer.json)"
            ".encode(text, add_special_tokens=False).ids (no BOS); hf_decoded: Tokenizer.decode(hf) with the "
            "default skip_special_tokens=True. Generated by tests/gen/make_tokenizer_vectors.py."
            % tokenizers.__version__),
        "cases": cases,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write('{"source": ' + json.dumps(doc["source"]) + ',\n "cases": [\n')
        f.write(",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n ]}\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
