#!/usr/bin/env python3
"""Convert a Hugging Face folder written by `kiln synth` into an F16 GGUF that llama.cpp loads.

usage: python3 synth_to_gguf.py SYNTH_DIR OUT.gguf

Input: config.json, tokenizer.json (SentencePiece-style BPE with byte fallback),
tokenizer_config.json (optional), and F16 (or BF16) safetensors: model.safetensors, or
shards model-0000K-of-0000N.safetensors listed in model.safetensors.index.json.

Handles model_type "llama" (GGUF arch llama; q/k rows permuted from HF rotate-half order
to GGUF's adjacent-pair order; llama3 rope_scaling -> rope_freqs.weight) and "qwen2"
(GGUF arch qwen2; NEOX rope, so no permutation; q/k/v biases).

Tensors are read one at a time from memory-mapped safetensors and written straight to the
output, so memory stays at about one tensor.
"""
import json
import math
import os
import re
import struct
import sys

import numpy as np
import gguf
from safetensors import safe_open


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    # Same as convert_hf_to_gguf.py LlamaModel.permute (n_head = n_kv_head for k).
    rows = w.shape[0]
    return (w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2)
            .reshape(w.shape))


class SafetensorsSet:
    """name -> file over one or several safetensors files; tensors loaded one by one."""

    def __init__(self, d: str):
        index = os.path.join(d, "model.safetensors.index.json")
        single = os.path.join(d, "model.safetensors")
        if os.path.isfile(index):
            with open(index) as f:
                wm = json.load(f)["weight_map"]
            self.where = {n: os.path.join(d, fn) for n, fn in wm.items()}
        elif os.path.isfile(single):
            with safe_open(single, framework="np") as f:
                self.where = {n: single for n in f.keys()}
        else:
            raise SystemExit(f"no model.safetensors or model.safetensors.index.json in {d}")
        self.handles = {}

    def names(self):
        return self.where.keys()

    def _dtype(self, path: str, name: str) -> str:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            hdr = json.loads(f.read(n))
        return hdr[name]["dtype"], hdr[name]["shape"], hdr[name]["data_offsets"], 8 + n

    def get(self, name: str) -> np.ndarray:
        path = self.where[name]
        dt, shape, (b, e), base = self._dtype(path, name)
        if dt == "BF16":
            # numpy has no bfloat16: read the raw u16 (memory-mapped) and widen to f32
            raw = np.memmap(path, dtype=np.uint16, mode="r", offset=base + b, shape=((e - b) // 2,))
            return (raw.astype(np.uint32) << 16).view(np.float32).reshape(shape)
        h = self.handles.get(path)
        if h is None:
            h = self.handles[path] = safe_open(path, framework="np")
        return h.get_tensor(name)


def load_vocab(d: str, vocab_size: int):
    with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    model = tj["model"]
    if model.get("type") != "BPE" or not model.get("byte_fallback", False):
        raise SystemExit("tokenizer.json is not a SentencePiece-style BPE with byte_fallback")
    vocab = model["vocab"]
    added = {t["id"]: t for t in tj.get("added_tokens", [])}
    n = max(vocab_size, max(vocab.values()) + 1, max(added, default=-1) + 1)
    tokens = [None] * n
    for piece, i in vocab.items():
        tokens[i] = piece
    for i, t in added.items():
        if tokens[i] is not None and tokens[i] != t["content"]:
            raise SystemExit(f"added token {i} {t['content']!r} clashes with vocab {tokens[i]!r}")
        tokens[i] = t["content"]

    cfg_path = os.path.join(d, "tokenizer_config.json")
    tcfg = json.load(open(cfg_path)) if os.path.isfile(cfg_path) else {}

    def tok_str(x):
        return x.get("content") if isinstance(x, dict) else x

    unk_piece = tok_str(tcfg.get("unk_token")) or model.get("unk_token") or "<unk>"
    bos_piece = tok_str(tcfg.get("bos_token")) or "<s>"
    eos_piece = tok_str(tcfg.get("eos_token")) or "</s>"
    ids = {p: i for i, p in enumerate(tokens) if p is not None}
    special = {"unk": ids.get(unk_piece), "bos": ids.get(bos_piece), "eos": ids.get(eos_piece)}
    expect = {"unk": 0, "bos": 1, "eos": 2}
    for k, v in special.items():
        if v != expect[k]:
            print(f"warning: {k} token is id {v}, not {expect[k]}", file=sys.stderr)

    byte_re = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")
    texts, scores, types = [], [], []
    for i, p in enumerate(tokens):
        if p is None:  # pad out to vocab_size, as convert_hf_to_gguf.py does
            texts.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        else:
            texts.append(p)
            if i == special["unk"]:
                types.append(gguf.TokenType.UNKNOWN)
            elif (i in added and added[i].get("special", False)) or i in (special["bos"], special["eos"]):
                types.append(gguf.TokenType.CONTROL)
            elif byte_re.match(p):
                types.append(gguf.TokenType.BYTE)
            else:
                types.append(gguf.TokenType.NORMAL)
        scores.append(-float(i))
    return texts, scores, types, special, tcfg


def llama3_rope_factors(cfg, head_dim):
    rs = cfg.get("rope_scaling") or {}
    if (rs.get("rope_type") or rs.get("type") or "").lower() != "llama3":
        return None
    base = cfg.get("rope_theta", 10000.0)
    freqs = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    factor = rs.get("factor", 8.0)
    lo = rs.get("low_freq_factor", 1.0)
    hi = rs.get("high_freq_factor", 4.0)
    old = rs.get("original_max_position_embeddings", 8192)
    lo_wl, hi_wl = old / lo, old / hi
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < hi_wl:
            out.append(1.0)
        elif wl > lo_wl:
            out.append(factor)
        else:
            s = (old / wl - lo) / (hi - lo)
            out.append(1 / ((1 - s) / factor + s))
    return np.array(out, dtype=np.float32)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    d, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    mt = cfg.get("model_type", "llama")
    if mt not in ("llama", "qwen2"):
        raise SystemExit(f"unsupported model_type {mt!r}")
    arch = mt
    n_embd = cfg["hidden_size"]
    n_layer = cfg["num_hidden_layers"]
    n_head = cfg["num_attention_heads"]
    n_kv = cfg.get("num_key_value_heads", n_head)
    head_dim = cfg.get("head_dim") or n_embd // n_head
    vocab_size = cfg["vocab_size"]
    tied = bool(cfg.get("tie_word_embeddings", False))

    st = SafetensorsSet(d)
    names = set(st.names())

    # (gguf name, hf name, kind) in output order; kind: "norm" (F32), "bias" (F32), "w" (F16), "q", "k"
    plan = [("token_embd.weight", "model.embed_tokens.weight", "w")]
    for i in range(n_layer):
        h, b = f"model.layers.{i}.", f"blk.{i}."
        plan += [
            (b + "attn_norm.weight", h + "input_layernorm.weight", "norm"),
            (b + "attn_q.weight", h + "self_attn.q_proj.weight", "q"),
            (b + "attn_k.weight", h + "self_attn.k_proj.weight", "k"),
            (b + "attn_v.weight", h + "self_attn.v_proj.weight", "w"),
        ]
        for x in ("q", "k", "v"):
            if h + f"self_attn.{x}_proj.bias" in names:
                plan.append((b + f"attn_{x}.bias", h + f"self_attn.{x}_proj.bias", "bias_" + x))
        plan += [
            (b + "attn_output.weight", h + "self_attn.o_proj.weight", "w"),
            (b + "ffn_norm.weight", h + "post_attention_layernorm.weight", "norm"),
            (b + "ffn_gate.weight", h + "mlp.gate_proj.weight", "w"),
            (b + "ffn_up.weight", h + "mlp.up_proj.weight", "w"),
            (b + "ffn_down.weight", h + "mlp.down_proj.weight", "w"),
        ]
    plan.append(("output_norm.weight", "model.norm.weight", "norm"))
    if not tied:
        if "lm_head.weight" not in names:
            raise SystemExit("tie_word_embeddings is false but lm_head.weight is missing")
        plan.append(("output.weight", "lm_head.weight", "w"))
    missing = [hf for _, hf, _ in plan if hf not in names]
    if missing:
        raise SystemExit(f"missing tensors: {missing[:5]}")
    unused = names - {hf for _, hf, _ in plan}
    if unused:
        print(f"warning: ignoring {len(unused)} tensors, e.g. {sorted(unused)[:3]}", file=sys.stderr)

    rope_factors = llama3_rope_factors(cfg, head_dim) if arch == "llama" else None

    def convert(hf, kind):
        w = st.get(hf)
        if arch == "llama" and kind == "q":
            w = permute(w, n_head)
        elif arch == "llama" and kind == "k":
            w = permute(w, n_kv)
        elif arch == "llama" and kind.startswith("bias_") and kind[-1] in "qk":
            w = permute(w, n_head if kind[-1] == "q" else n_kv)
        dt = np.float32 if kind == "norm" or kind.startswith("bias") else np.float16
        return np.ascontiguousarray(w, dtype=dt)

    def shape_of(hf):
        path = st.where[hf]
        _, shape, _, _ = st._dtype(path, hf)
        return tuple(shape)

    w = gguf.GGUFWriter(out, arch)
    w.add_name(cfg.get("kiln_synth", {}).get("preset", os.path.basename(os.path.normpath(d))))
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_freq_base(float(cfg.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-5)))
    w.add_rope_dimension_count(head_dim)
    if head_dim != n_embd // n_head:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_vocab_size(vocab_size)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    texts, scores, types, special, tcfg = load_vocab(d, vocab_size)
    if len(texts) != vocab_size:
        raise SystemExit(f"tokenizer has {len(texts)} tokens, config vocab_size is {vocab_size}")
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(texts)
    w.add_token_scores(scores)
    w.add_token_types(types)
    if special["bos"] is not None:
        w.add_bos_token_id(special["bos"])
    if special["eos"] is not None:
        w.add_eos_token_id(special["eos"])
    if special["unk"] is not None:
        w.add_unk_token_id(special["unk"])
    w.add_add_bos_token(bool(tcfg.get("add_bos_token", True)))
    w.add_add_eos_token(bool(tcfg.get("add_eos_token", False)))

    # tensor infos first (shapes/dtypes only), then data one tensor at a time
    for gname, hf, kind in plan:
        shp = shape_of(hf)
        dt = np.float32 if kind == "norm" or kind.startswith("bias") else np.float16
        nbytes = int(np.prod(shp)) * np.dtype(dt).itemsize
        w.add_tensor_info(gname, shp, np.dtype(dt), nbytes)
    if rope_factors is not None:
        w.add_tensor_info("rope_freqs.weight", rope_factors.shape, rope_factors.dtype, rope_factors.nbytes)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for k, (gname, hf, kind) in enumerate(plan):
        t = convert(hf, kind)
        w.write_tensor_data(t)
        del t
        if (k + 1) % 20 == 0 or k + 1 == len(plan):
            print(f"  {k + 1}/{len(plan)} tensors", file=sys.stderr)
    if rope_factors is not None:
        w.write_tensor_data(rope_factors)
    w.close()
    print(f"wrote {out} ({arch}, {n_layer} layers, vocab {vocab_size}, {os.path.getsize(out)} bytes)")


if __name__ == "__main__":
    main()
