#!/usr/bin/env python3
"""A model with one weight set to NaN in one layer, for --check-numerics.

Copies the shipped stories260K (llama2.c format) and sets element 0 of layer 2's attention query
weight (wq) to NaN, so that the first non-finite value of a forward pass is written by the
instruction that multiplies by it (at f32: rms_norm_matmul_qkv of layer 2). The tokenizer is
copied beside it. Standard library only.

Usage: make_nan_model.py [OUT_DIR]   (default: tests/data/nan-weight)
"""
import os
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "..", "models", "stories260K")
LAYER = 2


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "data", "nan-weight")
    os.makedirs(out_dir, exist_ok=True)
    data = bytearray(open(os.path.join(SRC, "stories260K.bin"), "rb").read())
    dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len = struct.unpack_from("<7i", data, 0)
    vocab = abs(vocab)  # negative: the classifier is not tied to the embedding
    head_dim = dim // n_heads
    floats = 7 * 4
    # llama2.c order: token embedding, attention norms, then wq for every layer.
    offset = floats + 4 * (vocab * dim + n_layers * dim + LAYER * dim * n_heads * head_dim)
    struct.pack_into("<f", data, offset, float("nan"))
    path = os.path.join(out_dir, "stories260K-nan.bin")
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)
    shutil.copyfile(os.path.join(SRC, "tok512.bin"), os.path.join(out_dir, "tok512.bin"))
    print(f"{path}: layer {LAYER} wq[0] = NaN (byte offset {offset}); dim {dim}, {n_layers} layers")


if __name__ == "__main__":
    main()
