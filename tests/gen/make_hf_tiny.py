#!/usr/bin/env python3
"""Generate tiny random-weight Hugging Face models plus reference logits.

Writes tests/data/hf-tiny/<name>/ for six models (see tests/data/hf-tiny/README.md):
    qwen2, llama32, llama-unshared, mistral, llama3-f16-sharded, llama-bf16
Each folder gets what `save_pretrained(safe_serialization=True)` writes plus
`reference.json` = {"prompts": [[ids]...], "logits": [[[vocab floats] per position] per prompt]}.
Extra files:
    llama-unshared/llama2c.bin   llama2.c legacy checkpoint of the same weights
    qwen2/model.gguf             GGUF v3 (gguf-py GGUFWriter), arch qwen2, all F32

Every output is verified here against an independent numpy (float64) forward pass.

Usage:  python3 tests/gen/make_hf_tiny.py [--out tests/data/hf-tiny]
CPU only, deterministic (fixed seeds, 1 torch thread).
"""
import argparse
import json
import math
import os
import shutil
import struct
import sys

import numpy as np
import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

import transformers  # noqa: E402
from transformers import (  # noqa: E402
    LlamaConfig, LlamaForCausalLM,
    MistralConfig, MistralForCausalLM,
    Qwen2Config, Qwen2ForCausalLM,
)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "data", "hf-tiny"))

VOCAB = 300
PROMPT_LENGTHS = (1, 7, 12)


# --------------------------------------------------------------------------- utilities

def randomize(model, seed, std=0.08):
    """Overwrite every parameter with seeded random values.

    Norm weights ~ 1 + 0.1*N(0,1), biases ~ 0.05*N(0,1), all other weights ~ std*N(0,1).
    Tied parameters appear once in named_parameters(), so tying is preserved.
    """
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if "norm" in name:
                v = 1.0 + 0.1 * r
            elif name.endswith(".bias"):
                v = 0.05 * r
            else:
                v = std * r
            p.copy_(v.to(p.dtype))


def make_prompts(seed):
    rng = np.random.default_rng(seed)
    return [[int(t) for t in rng.integers(0, VOCAB, size=n)] for n in PROMPT_LENGTHS]


def hf_logits(model, prompts):
    out = []
    with torch.no_grad():
        for p in prompts:
            ids = torch.tensor([p], dtype=torch.long)
            out.append(model(input_ids=ids).logits[0].to(torch.float32).numpy())
    return out


def fmt(x):
    return "%.9g" % float(x)


def write_reference(path, prompts, logits):
    lines = ['{"prompts": ' + json.dumps(prompts) + ',', ' "logits": [']
    for pi, lg in enumerate(logits):
        lines.append('  [')
        for t in range(lg.shape[0]):
            row = "   [" + ", ".join(fmt(v) for v in lg[t]) + "]"
            lines.append(row + ("," if t + 1 < lg.shape[0] else ""))
        lines.append('  ]' + ("," if pi + 1 < len(logits) else ""))
    lines.append(' ]}')
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def read_reference_logits(path):
    with open(path) as f:
        ref = json.load(f)
    return ref["prompts"], [np.array(l, dtype=np.float64) for l in ref["logits"]]


def state_np(model):
    """State dict as float64 numpy, with lm_head filled in when tied."""
    sd = {k: v.detach().to(torch.float64).numpy() for k, v in model.state_dict().items()}
    if "lm_head.weight" not in sd or model.config.tie_word_embeddings:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    return sd


# --------------------------------------------------------------------------- numpy oracle

def default_inv_freq(theta, head_dim):
    return 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)


def llama3_inv_freq(theta, head_dim, factor, low, high, orig):
    inv = default_inv_freq(theta, head_dim)
    wavelen = 2 * math.pi / inv
    low_wl, high_wl = orig / low, orig / high
    out = np.empty_like(inv)
    for i, (f, wl) in enumerate(zip(inv, wavelen)):
        if wl < high_wl:
            out[i] = f
        elif wl > low_wl:
            out[i] = f / factor
        else:
            s = (orig / wl - low) / (high - low)
            out[i] = (1 - s) * f / factor + s * f
    return out


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, inv_freq, style):
    """x: [T, H, D]. style 'half' = HF rotate_half (NEOX); 'pairs' = llama2.c adjacent pairs."""
    ang = pos[:, None] * inv_freq[None, :]           # [T, D/2]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    y = np.empty_like(x)
    if style == "half":
        h = x.shape[-1] // 2
        a, b = x[..., :h], x[..., h:]
        y[..., :h] = a * c - b * s
        y[..., h:] = b * c + a * s
    else:
        a, b = x[..., 0::2], x[..., 1::2]
        y[..., 0::2] = a * c - b * s
        y[..., 1::2] = a * s + b * c
    return y


def np_forward(w, cfg, ids, inv_freq, style="half", window=None):
    """Reference decoder forward pass (float64). w uses HF tensor names.

    window: None = full causal; W = key j visible to query i iff i - W < j <= i.
    """
    L, H, KV, D = cfg["n_layers"], cfg["n_heads"], cfg["n_kv"], cfg["head_dim"]
    eps = cfg["eps"]
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    x = w["model.embed_tokens.weight"][ids]
    i_idx, j_idx = np.arange(T)[:, None], np.arange(T)[None, :]
    allowed = j_idx <= i_idx
    if window is not None:
        allowed &= j_idx > i_idx - window
    for l in range(L):
        p = "model.layers.%d." % l
        h = rmsnorm(x, w[p + "input_layernorm.weight"], eps)

        def lin(name, inp):
            y = inp @ w[p + name + ".weight"].T
            if (p + name + ".bias") in w:
                y = y + w[p + name + ".bias"]
            return y
        q = lin("self_attn.q_proj", h).reshape(T, H, D)
        k = lin("self_attn.k_proj", h).reshape(T, KV, D)
        v = lin("self_attn.v_proj", h).reshape(T, KV, D)
        q, k = rope(q, pos, inv_freq, style), rope(k, pos, inv_freq, style)
        att = np.empty((T, H, D))
        for hh in range(H):
            kh = hh // (H // KV)
            sc = q[:, hh, :] @ k[:, kh, :].T / math.sqrt(D)
            sc = np.where(allowed, sc, -np.inf)
            sc = np.exp(sc - sc.max(axis=1, keepdims=True))
            sc /= sc.sum(axis=1, keepdims=True)
            att[:, hh, :] = sc @ v[:, kh, :]
        x = x + lin("self_attn.o_proj", att.reshape(T, H * D))
        h = rmsnorm(x, w[p + "post_attention_layernorm.weight"], eps)
        g = lin("mlp.gate_proj", h)
        u = lin("mlp.up_proj", h)
        x = x + lin("mlp.down_proj", g / (1 + np.exp(-g)) * u)
    x = rmsnorm(x, w["model.norm.weight"], eps)
    return x @ w["lm_head.weight"].T


def cfg_of(c):
    return dict(n_layers=c.num_hidden_layers, n_heads=c.num_attention_heads,
                n_kv=c.num_key_value_heads, head_dim=getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
                eps=c.rms_norm_eps)


def maxdiff(a_list, b_list):
    return max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)))) for a, b in zip(a_list, b_list))


def check(label, diff, tol):
    status = "OK" if diff <= tol else "FAIL"
    print("  [%s] %s: max|diff| = %.3g (tol %.1g)" % (status, label, diff, tol))
    if diff > tol:
        sys.exit("verification failed: " + label)


# --------------------------------------------------------------------------- exporters

def unpermute(w, n_heads):
    """HF rotate-half row order -> llama2.c / GGUF(llama) adjacent-pair order.

    Per head, HF row (e, j) (e in {0,1} = half, j = pair index) becomes row (j, e).
    Same as llama2.c export.py permute_reverse and llama.cpp convert_hf_to_gguf's
    LlamaModel.permute undoes."""
    rows, cols = w.shape
    hd = rows // n_heads
    return w.reshape(n_heads, 2, hd // 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def write_llama2c(path, model, seq_len=256):
    c = model.config
    sd = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    L, dim, hidden = c.num_hidden_layers, c.hidden_size, c.intermediate_size
    H, KV = c.num_attention_heads, c.num_key_value_heads
    hs = dim // H
    assert c.head_dim == hs, "llama2.c requires head_dim == dim / n_heads"
    shared = c.tie_word_embeddings
    vocab = c.vocab_size if shared else -c.vocab_size
    lay = lambda l, n: sd["model.layers.%d.%s" % (l, n)]
    parts = [sd["model.embed_tokens.weight"]]
    parts += [lay(l, "input_layernorm.weight") for l in range(L)]
    parts += [unpermute(lay(l, "self_attn.q_proj.weight"), H) for l in range(L)]
    parts += [unpermute(lay(l, "self_attn.k_proj.weight"), KV) for l in range(L)]
    parts += [lay(l, "self_attn.v_proj.weight") for l in range(L)]
    parts += [lay(l, "self_attn.o_proj.weight") for l in range(L)]
    parts += [lay(l, "post_attention_layernorm.weight") for l in range(L)]
    parts += [lay(l, "mlp.gate_proj.weight") for l in range(L)]
    parts += [lay(l, "mlp.down_proj.weight") for l in range(L)]
    parts += [lay(l, "mlp.up_proj.weight") for l in range(L)]
    parts += [sd["model.norm.weight"]]
    parts += [np.zeros(seq_len * hs // 2, np.float32), np.zeros(seq_len * hs // 2, np.float32)]
    if not shared:
        parts += [sd["lm_head.weight"]]
    with open(path, "wb") as f:
        f.write(struct.pack("<7i", dim, hidden, L, H, KV, vocab, seq_len))
        for a in parts:
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())


def read_llama2c(path):
    """Independent reader: returns (HF-named weights with q/k in pair order, cfg, seq_len)."""
    raw = open(path, "rb").read()
    dim, hidden, L, H, KV, vocab, seq_len = struct.unpack("<7i", raw[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    hs = dim // H
    data = np.frombuffer(raw, dtype="<f4", offset=28).astype(np.float64)
    off = 0

    def take(*shape):
        nonlocal off
        n = int(np.prod(shape))
        a = data[off:off + n].reshape(shape)
        off += n
        return a
    w = {}
    w["model.embed_tokens.weight"] = take(vocab, dim)
    rms_att = take(L, dim)
    wq = take(L, H * hs, dim)
    wk = take(L, KV * hs, dim)
    wv = take(L, KV * hs, dim)
    wo = take(L, dim, H * hs)
    rms_ffn = take(L, dim)
    w1 = take(L, hidden, dim)
    w2 = take(L, dim, hidden)
    w3 = take(L, hidden, dim)
    w["model.norm.weight"] = take(dim)
    take(seq_len * hs // 2)
    take(seq_len * hs // 2)
    w["lm_head.weight"] = w["model.embed_tokens.weight"] if shared else take(vocab, dim)
    assert off == data.size, (off, data.size)
    for l in range(L):
        p = "model.layers.%d." % l
        w[p + "input_layernorm.weight"] = rms_att[l]
        w[p + "self_attn.q_proj.weight"] = wq[l]
        w[p + "self_attn.k_proj.weight"] = wk[l]
        w[p + "self_attn.v_proj.weight"] = wv[l]
        w[p + "self_attn.o_proj.weight"] = wo[l]
        w[p + "post_attention_layernorm.weight"] = rms_ffn[l]
        w[p + "mlp.gate_proj.weight"] = w1[l]
        w[p + "mlp.down_proj.weight"] = w2[l]
        w[p + "mlp.up_proj.weight"] = w3[l]
    cfg = dict(n_layers=L, n_heads=H, n_kv=KV, head_dim=hs, eps=1e-5)
    return w, cfg


GGUF_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def write_qwen2_gguf(path, model):
    import gguf
    c = model.config
    sd = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    w = gguf.GGUFWriter(path, "qwen2")
    w.add_name("kiln-test-qwen2-tiny")
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_rope_freq_base(float(c.rope_parameters["rope_theta"]))
    w.add_layer_norm_rms_eps(float(c.rms_norm_eps))
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(["t%d" % i for i in range(c.vocab_size)])
    w.add_token_types([1] * c.vocab_size)
    # gguf-py's GGUFWriter silently drops empty arrays (and _pack_val rejects them), so an empty
    # merges list cannot be written; llama.cpp refuses a "gpt2" vocab without the merges key.
    # One merge "t 0" (whose result "t0" is token 0) keeps the key present and self-consistent.
    w.add_token_merges(["t 0"])
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    for l in range(c.num_hidden_layers):
        for hf, gg in GGUF_NAMES.items():
            # NOT permuted: llama.cpp runs qwen2 with NEOX (rotate-half) rope, same as HF.
            w.add_tensor("blk.%d.%s" % (l, gg), sd["model.layers.%d.%s" % (l, hf)])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    assert "lm_head.weight" not in sd or c.tie_word_embeddings
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_qwen2_gguf(path):
    import gguf
    r = gguf.GGUFReader(path)
    inv = {v: k for k, v in GGUF_NAMES.items()}
    w = {}
    for t in r.tensors:
        assert t.tensor_type == gguf.GGMLQuantizationType.F32, t.name
        a = np.array(t.data, dtype=np.float64).reshape([int(d) for d in reversed(t.shape)])
        if t.name == "token_embd.weight":
            w["model.embed_tokens.weight"] = a
        elif t.name == "output_norm.weight":
            w["model.norm.weight"] = a
        else:
            _, l, rest = t.name.split(".", 2)
            w["model.layers.%s.%s" % (l, inv[rest])] = a
    w["lm_head.weight"] = w["model.embed_tokens.weight"]

    def kv(key):
        f = r.fields[key]
        return f.parts[f.data[0]][0]
    cfg = dict(n_layers=int(kv("qwen2.block_count")), n_heads=int(kv("qwen2.attention.head_count")),
               n_kv=int(kv("qwen2.attention.head_count_kv")),
               eps=float(kv("qwen2.attention.layer_norm_rms_epsilon")))
    cfg["head_dim"] = int(kv("qwen2.embedding_length")) // cfg["n_heads"]
    return w, cfg, float(kv("qwen2.rope.freq_base"))


# --------------------------------------------------------------------------- models

def build(cls, config, seed, std=0.08):
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    m = cls(config).eval()
    randomize(m, seed, std)
    return m


def save(model, folder, **kw):
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)
    model.save_pretrained(folder, safe_serialization=True, **kw)


def reload_f32(cls, folder):
    m = cls.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    assert m.dtype == torch.float32
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()
    out = args.out
    os.makedirs(out, exist_ok=True)
    print("torch", torch.__version__, "transformers", transformers.__version__)

    # ---------------- (a) qwen2
    print("qwen2")
    cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                      bos_token_id=None, eos_token_id=None)
    m = build(Qwen2ForCausalLM, cfg, seed=1001)
    d = os.path.join(out, "qwen2")
    save(m, d)
    m = reload_f32(Qwen2ForCausalLM, d)
    print("  config: use_sliding_window=%s sliding_window=%s layer_types=%s" %
          (m.config.use_sliding_window, m.config.sliding_window, m.config.layer_types))
    prompts = make_prompts(2001)
    lg = hf_logits(m, prompts)
    write_reference(os.path.join(d, "reference.json"), prompts, lg)
    c = cfg_of(m.config)
    inv = default_inv_freq(1e6, c["head_dim"])
    check("numpy oracle vs HF", maxdiff([np_forward(state_np(m), c, p, inv) for p in prompts], lg), 1e-4)
    write_qwen2_gguf(os.path.join(d, "model.gguf"), m)
    gw, gc, gtheta = read_qwen2_gguf(os.path.join(d, "model.gguf"))
    check("model.gguf (numpy, rotate-half rope) vs reference",
          maxdiff([np_forward(gw, gc, p, default_inv_freq(gtheta, gc["head_dim"])) for p in prompts], lg), 1e-4)

    # ---------------- (b) llama32 (llama3 rope scaling)
    print("llama32")
    rp = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                      tie_word_embeddings=True, rope_parameters=dict(rp))
    m = build(LlamaForCausalLM, cfg, seed=1002)
    d = os.path.join(out, "llama32")
    save(m, d)
    m = reload_f32(LlamaForCausalLM, d)
    prompts = make_prompts(2002)
    lg = hf_logits(m, prompts)
    write_reference(os.path.join(d, "reference.json"), prompts, lg)
    c = cfg_of(m.config)
    inv3 = llama3_inv_freq(500000.0, 16, 8.0, 1.0, 4.0, 64)
    inv0 = default_inv_freq(500000.0, 16)
    print("  inv_freq default:", " ".join("%.6g" % v for v in inv0))
    print("  inv_freq llama3 :", " ".join("%.6g" % v for v in inv3))
    hf_inv = m.model.rotary_emb.inv_freq.double().numpy()
    check("HF inv_freq vs numpy llama3 formula (relative)", float(np.max(np.abs(hf_inv - inv3) / inv3)), 1e-6)
    sd = state_np(m)
    check("numpy oracle (llama3 rope) vs HF", maxdiff([np_forward(sd, c, p, inv3) for p in prompts], lg), 1e-4)
    cfg_plain = LlamaConfig.from_pretrained(d)
    cfg_plain.rope_parameters = {"rope_type": "default", "rope_theta": 500000.0}
    cfg_plain._attn_implementation = "eager"
    mp = LlamaForCausalLM(cfg_plain).eval()
    mp.load_state_dict(m.state_dict())
    lgp = hf_logits(mp, prompts)
    for p, a, b in zip(prompts, lg, lgp):
        print("  llama3 scaling effect, prompt len %2d: max|logits(llama3) - logits(no scaling)| = %.4g"
              " (per position: %s)" % (len(p), np.abs(a - b).max(),
                                       " ".join("%.2g" % v for v in np.abs(a - b).max(axis=1))))
    assert np.abs(lg[2] - lgp[2]).max() > 1e-3, "llama3 scaling had no effect"

    # ---------------- (c) llama-unshared (+ llama2c.bin) and (f) llama-bf16
    print("llama-unshared")
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                      rms_norm_eps=1e-5, tie_word_embeddings=False,
                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    m = build(LlamaForCausalLM, cfg, seed=1003)
    d = os.path.join(out, "llama-unshared")
    save(m, d)
    m = reload_f32(LlamaForCausalLM, d)
    prompts_c = make_prompts(2003)
    lg = hf_logits(m, prompts_c)
    write_reference(os.path.join(d, "reference.json"), prompts_c, lg)
    c = cfg_of(m.config)
    inv = default_inv_freq(10000.0, c["head_dim"])
    check("numpy oracle vs HF", maxdiff([np_forward(state_np(m), c, p, inv) for p in prompts_c], lg), 1e-4)
    write_llama2c(os.path.join(d, "llama2c.bin"), m)
    bw, bc = read_llama2c(os.path.join(d, "llama2c.bin"))
    _, ref_lg = read_reference_logits(os.path.join(d, "reference.json"))
    check("llama2c.bin (numpy, adjacent-pair rope) vs reference.json",
          maxdiff([np_forward(bw, bc, p, default_inv_freq(10000.0, bc["head_dim"]), style="pairs")
                   for p in prompts_c], ref_lg), 1e-4)
    wrong = maxdiff([np_forward(bw, bc, p, default_inv_freq(10000.0, bc["head_dim"]), style="half")
                     for p in prompts_c[1:]], ref_lg[1:])
    print("  (control: llama2c.bin with rotate-half rope is off by %.3g, so the unpermute matters)" % wrong)

    print("llama-bf16")
    mb = build(LlamaForCausalLM, LlamaConfig.from_pretrained(d), seed=1003)   # same weights as (c)
    mb.load_state_dict(m.state_dict())
    mb = mb.to(torch.bfloat16)
    d = os.path.join(out, "llama-bf16")
    save(mb, d)
    mb = reload_f32(LlamaForCausalLM, d)
    lgb = hf_logits(mb, prompts_c)
    write_reference(os.path.join(d, "reference.json"), prompts_c, lgb)
    check("numpy oracle vs HF", maxdiff([np_forward(state_np(mb), c, p, inv) for p in prompts_c], lgb), 1e-4)
    print("  bf16 rounding effect vs llama-unshared f32 logits: max|diff| = %.4g" % maxdiff(lgb, lg))

    # ---------------- (d) mistral (sliding window 5, head_dim 24)
    print("mistral")
    cfg = MistralConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=24, sliding_window=5,
                        max_position_embeddings=256, tie_word_embeddings=False,
                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    m = build(MistralForCausalLM, cfg, seed=1004)
    d = os.path.join(out, "mistral")
    save(m, d)
    m = reload_f32(MistralForCausalLM, d)
    assert m.config.sliding_window == 5
    prompts = make_prompts(2004)
    lg = hf_logits(m, prompts)
    write_reference(os.path.join(d, "reference.json"), prompts, lg)
    c = cfg_of(m.config)
    inv = default_inv_freq(10000.0, 24)
    sd = state_np(m)
    check("numpy oracle (window: i-5 < j <= i) vs HF",
          maxdiff([np_forward(sd, c, p, inv, window=5) for p in prompts], lg), 1e-4)
    alt = maxdiff([np_forward(sd, c, p, inv, window=6) for p in prompts], lg)
    print("  (control: window i-5 <= j <= i would be off by %.3g)" % alt)
    cfg_full = MistralConfig.from_pretrained(d)
    cfg_full.sliding_window = None
    cfg_full._attn_implementation = "eager"
    mf = MistralForCausalLM(cfg_full).eval()
    mf.load_state_dict(m.state_dict())
    p12 = prompts[2]
    a, b = hf_logits(m, [p12])[0], hf_logits(mf, [p12])[0]
    per = np.abs(a - b).max(axis=1)
    print("  sliding_window=5 vs None, 12-token prompt, max|diff| per position:")
    print("   " + " ".join("%d:%.2g" % (i, v) for i, v in enumerate(per)))
    first = int(np.argmax(per > 0))
    print("  first differing position = %d -> a query at position i sees keys i-%d..i (i - j < 5)"
          % (first, first - 1))
    assert first == 5 and np.all(per[:5] == 0)

    # ---------------- (e) llama3-f16-sharded
    print("llama3-f16-sharded")
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=160, num_hidden_layers=3,
                      num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=512,
                      tie_word_embeddings=False,
                      rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
    m = build(LlamaForCausalLM, cfg, seed=1005).to(torch.float16)
    d = os.path.join(out, "llama3-f16-sharded")
    save(m, d, max_shard_size="120KB")
    shards = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
    assert len(shards) >= 2 and os.path.exists(os.path.join(d, "model.safetensors.index.json")), shards
    print("  shards:", shards)
    m = reload_f32(LlamaForCausalLM, d)
    prompts = make_prompts(2005)
    lg = hf_logits(m, prompts)
    write_reference(os.path.join(d, "reference.json"), prompts, lg)
    c = cfg_of(m.config)
    check("numpy oracle vs HF", maxdiff([np_forward(state_np(m), c, p, default_inv_freq(500000.0, 8))
                                         for p in prompts], lg), 1e-4)
    print("done")


if __name__ == "__main__":
    main()
