#!/usr/bin/env python3
"""Generate tests/data/gguf-quant/iq4_nl.gguf: IQ4_NL blocks written by llama.cpp's own quantizer
and gguf-py's dequantization of them, the reference kiln's IQ4_NL reader is checked against.

The blocks are the first ROWS rows of token_embd.weight in tests/data/gguf-quant/stories260K-IQ4_NL.gguf
(made by tests/gen/make_stories_quantized.sh with llama-quantize), so they are real quantizer
output: every nibble value used, d of both signs as the quantizer chose them.
    "iq4_nl"      GGUF dims (ne0 = 64, ne1 = ROWS), stored as IQ4_NL (the bytes copied)
    "iq4_nl.ref"  F32, same dims: gguf.quants.dequantize() of exactly those bytes

Usage: PYTHONPATH=<llama.cpp>/gguf-py python3 tests/gen/make_gguf_iq4_nl.py  (gguf-py 0.19.0, numpy)
"""
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "data", "gguf-quant"))
ROWS = 96


def main():
    src = gguf.GGUFReader(os.path.join(DATA, "stories260K-IQ4_NL.gguf"))
    t = next(x for x in src.tensors if x.name == "token_embd.weight")
    assert t.tensor_type == Q.IQ4_NL and [int(d) for d in t.shape] == [64, 512], (t.tensor_type, t.shape)
    raw = np.array(t.data).reshape(512, -1)[:ROWS].copy()  # (ROWS, 2 blocks * 18 bytes)
    ref = gguf.quants.dequantize(raw, Q.IQ4_NL).astype(np.float32)
    assert ref.shape == (ROWS, 64) and np.all(np.isfinite(ref))
    out = os.path.join(DATA, "iq4_nl.gguf")
    w = gguf.GGUFWriter(out, "test")
    w.add_name("kiln-iq4_nl-blocks")
    w.add_tensor("iq4_nl", raw, raw_dtype=Q.IQ4_NL)
    w.add_tensor("iq4_nl.ref", ref)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = {x.name: x for x in gguf.GGUFReader(out).tensors}
    again = gguf.quants.dequantize(np.array(r["iq4_nl"].data), Q.IQ4_NL).reshape(ROWS, 64)
    assert np.array_equal(again, np.array(r["iq4_nl.ref"].data).reshape(ROWS, 64))
    nib = np.concatenate([raw.reshape(-1, 18)[:, 2:] & 15, raw.reshape(-1, 18)[:, 2:] >> 4])
    print("wrote", out, os.path.getsize(out), "bytes;", len(np.unique(nib)), "distinct nibbles; ref range [%.4g, %.4g]"
          % (ref.min(), ref.max()))


if __name__ == "__main__":
    main()
