#!/usr/bin/env python3
"""Generate tests/data/gguf-quant/blocks.gguf: quantized blocks + gguf-py dequantization.

For each type T in F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, Q5_0, Q5_1 the file holds
    "<t>"      shape [3 rows][512 cols] (GGUF dims ne0=512, ne1=3) stored as type T
    "<t>.ref"  F32, same shape: gguf.quants.dequantize() of exactly those bytes
Types gguf-py can quantize get seeded random normal data run through
gguf.quants.quantize(); for the others (the K-quants) the blocks are seeded random
bytes with the f16 scale fields (d, dmin) overwritten by random values in
[0.001, 0.1], so every reference value is finite.

Usage: python3 tests/gen/make_gguf_quant.py [--out tests/data/gguf-quant/blocks.gguf]
Deterministic (numpy default_rng seeds).  See tests/data/gguf-quant/README.md.
"""
import argparse
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.constants import GGML_QUANT_SIZES

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "data", "gguf-quant", "blocks.gguf"))

ROWS, COLS = 3, 512
TYPES = [Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.Q5_0, Q.Q5_1]
# byte offsets of the f16 scale fields inside one block, for types filled with random bytes
F16_FIELDS = {Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (208,)}


def source_data(rng):
    """Random normal rows with different scales; row 2 starts with an all-zero block of 32
    (exercises d == 0) and has one large outlier."""
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    x[0] *= 0.02
    x[1] *= 1.0
    x[2] *= 3.0
    x[2, :32] = 0.0
    x[2, 100] = 40.0
    return x


def random_blocks(qtype, rng):
    block, tsize = GGML_QUANT_SIZES[qtype]
    nblk = ROWS * COLS // block
    raw = rng.integers(0, 256, size=(nblk, tsize), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        v = rng.uniform(0.001, 0.1, size=nblk).astype(np.float16)
        raw[:, off:off + 2] = v.view(np.uint8).reshape(nblk, 2)
    return raw.reshape(ROWS, COLS // block * tsize)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)

    w = gguf.GGUFWriter(args.out, "test")
    w.add_name("kiln-quant-blocks")
    w.add_description("per type: '<type>' [3][512] in that type and '<type>.ref' F32 = gguf-py dequantize")
    for i, qt in enumerate(TYPES):
        rng = np.random.default_rng(7000 + i)
        name = qt.name.lower()
        if qt == Q.F16:
            data = source_data(rng).astype(np.float16)                       # (3, 512) float16
            w.add_tensor(name, data)
            raw = data.view(np.uint8)
            how = "quantize"
        elif qt in F16_FIELDS:
            raw = random_blocks(qt, rng)                                     # (3, bytes/row) uint8
            w.add_tensor(name, raw, raw_dtype=qt)
            how = "random bytes"
        else:
            raw = gguf.quants.quantize(source_data(rng), qt)                 # (3, bytes/row) uint8
            assert raw.dtype == np.uint8
            w.add_tensor(name, raw, raw_dtype=qt)
            how = "quantize"
        ref = gguf.quants.dequantize(raw, qt).astype(np.float32)
        assert ref.shape == (ROWS, COLS), ref.shape
        assert np.all(np.isfinite(ref)), name
        w.add_tensor(name + ".ref", ref)
        print("%-5s %-12s %5d bytes/row  ref range [%.4g, %.4g]" %
              (name, how, raw.reshape(ROWS, -1).shape[1], ref.min(), ref.max()))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    # read back and re-check
    r = gguf.GGUFReader(args.out)
    t = {x.name: x for x in r.tensors}
    for qt in TYPES:
        n = qt.name.lower()
        assert t[n].tensor_type == qt and [int(d) for d in t[n].shape] == [COLS, ROWS], (n, t[n].shape)
        again = gguf.quants.dequantize(np.array(t[n].data), qt).reshape(ROWS, COLS)
        assert np.array_equal(again, np.array(t[n + ".ref"].data).reshape(ROWS, COLS)), n
        print("  %-5s offset %6d  reread OK" % (n, t[n].data_offset))
    print("wrote", args.out, os.path.getsize(args.out), "bytes")


if __name__ == "__main__":
    main()
