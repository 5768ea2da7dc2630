#!/usr/bin/env python3
"""Generate tests/data/gguf-quant/iq4_nl.gguf and iq4_xs.gguf: IQ4 blocks written by llama.cpp's own
quantizer and gguf-py's dequantization of them, the references kiln's readers are checked against.

iq4_nl.gguf: the first 96 rows of token_embd.weight in tests/data/gguf-quant/stories260K-IQ4_NL.gguf
(made by tests/gen/make_stories_quantized.sh with llama-quantize).
iq4_xs.gguf: the first 3 rows of blk.0.attn_q.weight of the TinyLlama-shaped F16 GGUF quantized by
    llama-quantize tl-f16.gguf tl-iq4_xs.gguf IQ4_XS
(passed as --xs-source; kiln synth's TinyLlama shape, converted with llama.cpp's convert_hf_to_gguf.py).
Both are real quantizer output: every nibble value used, scales as the quantizer chose them.
    "<t>"      GGUF dims (ne0 = row width, ne1 = rows), stored as IQ4_NL / IQ4_XS (the bytes copied)
    "<t>.ref"  F32, same dims: gguf.quants.dequantize() of exactly those bytes

Usage: PYTHONPATH=<llama.cpp>/gguf-py python3 tests/gen/make_gguf_iq4.py [--xs-source tl-iq4_xs.gguf]
(gguf-py 0.19.0, numpy); without --xs-source only iq4_nl.gguf is written.
"""
import argparse
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.constants import GGML_QUANT_SIZES

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "data", "gguf-quant"))


def write(source, tensor, qtype, rows, out_name):
    src = gguf.GGUFReader(source)
    t = next(x for x in src.tensors if x.name == tensor)
    assert t.tensor_type == qtype, t.tensor_type
    width = int(t.shape[0])
    block, size = GGML_QUANT_SIZES[qtype]
    raw = np.array(t.data).reshape(-1, width // block * size)[:rows].copy()
    ref = gguf.quants.dequantize(raw, qtype).astype(np.float32)
    assert ref.shape == (rows, width) and np.all(np.isfinite(ref))
    name = qtype.name.lower()
    out = os.path.join(DATA, out_name)
    w = gguf.GGUFWriter(out, "test")
    w.add_name("kiln-%s-blocks" % name)
    w.add_tensor(name, raw, raw_dtype=qtype)
    w.add_tensor(name + ".ref", ref)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = {x.name: x for x in gguf.GGUFReader(out).tensors}
    again = gguf.quants.dequantize(np.array(r[name].data), qtype).reshape(rows, width)
    assert np.array_equal(again, np.array(r[name + ".ref"].data).reshape(rows, width))
    print("wrote", out, os.path.getsize(out), "bytes; %d x %d; ref range [%.4g, %.4g]" % (rows, width, ref.min(), ref.max()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--xs-source", help="a TinyLlama-shaped GGUF quantized to IQ4_XS by llama-quantize")
    args = ap.parse_args()
    write(os.path.join(DATA, "stories260K-IQ4_NL.gguf"), "token_embd.weight", Q.IQ4_NL, 96, "iq4_nl.gguf")
    if args.xs_source:
        write(args.xs_source, "blk.0.attn_q.weight", Q.IQ4_XS, 3, "iq4_xs.gguf")


if __name__ == "__main__":
    main()
