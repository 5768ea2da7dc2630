#!/usr/bin/env python3
"""Generate the tiny random-weight Gemma 3 model of tests/data/hf-tiny/gemma3/ plus its references.

Gemma 3 (Gemma3ForCausalLM, model_type gemma3_text): embeddings scaled by sqrt(hidden_size); RMSNorm
as x / rms(x) * (1 + w) (the checkpoint stores w); each layer
    h = x + post_attention_norm(attn(input_norm(x)));  x = h + post_feedforward_norm(mlp(pre_feedforward_norm(h)))
with per-head q_norm / k_norm (also 1 + w) before RoPE, attention scaled by query_pre_attn_scalar^-0.5,
sliding-window layers (RoPE base rope_parameters.sliding_attention) and global layers (their own base and
scaling), MLP down(gelu_tanh(gate(x)) * up(x)), tied embeddings.

The tiny config: 6 layers [5 x sliding, full] (Gemma 3's pattern), sliding_window 4 (< the 7- and 12-token prompts),
head_dim 32 (q width 128 != hidden 64), query_pre_attn_scalar 24 (!= head_dim), RoPE bases 1e4 (sliding)
and 1e6 with linear scaling x2 (full).

Writes tests/data/hf-tiny/gemma3/:
    config.json, generation_config.json, model.safetensors   save_pretrained(safe_serialization=True)
    reference.json       {"prompts", "logits", "greedy": {"prompt", "tokens"}} as make_hf_tiny_qwen3.py
    model.gguf           GGUF v3, F32, arch gemma3 as llama.cpp's convert_hf_to_gguf.py writes it: norm
                         weights with the 1 folded in (w + 1), gguf-py TensorNameMap names, no
                         query_pre_attn_scalar key (llama.cpp scales a gemma3 model that is not the 27B
                         by head_dim^-0.5) and no sliding-attention RoPE base (llama.cpp uses 10000)
    reference-gguf.json  transformers' logits of the same weights with query_pre_attn_scalar = head_dim:
                         what the GGUF means to llama.cpp

Every output is verified against an independent numpy (float64) forward pass; the GGUF is read back with
gguf-py. Usage: python3 tests/gen/make_hf_tiny_gemma3.py [--out tests/data/hf-tiny]
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_hf_tiny as base  # noqa: E402  (sets torch to 1 thread, deterministic)

import transformers  # noqa: E402
from transformers import Gemma3ForCausalLM, Gemma3TextConfig  # noqa: E402

HEAD_DIM = 32
QPAS = 24
WINDOW = 4
# Gemma 3's own pattern: five sliding layers, then a global one. llama.cpp assumes it for a gemma3 GGUF
# (every sixth layer global), so the GGUF needs no key for it.
LAYER_TYPES = ["sliding_attention"] * 5 + ["full_attention"]
ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "linear", "rope_theta": 1e6, "factor": 2.0}}
GREEDY_NEW = 20


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def np_forward_gemma3(w, cfg, ids, norm_offset):
    """The Gemma 3 decoder in float64. norm_offset: 1 for HF weights (1 + w), 0 for folded GGUF weights.
    Gemma 2 (make_hf_tiny_gemma2.py) is the same without the q/k norms (absent from w), with the
    scaled scores and the logits soft-capped where cfg has attn_cap / final_cap."""
    L, H, KV, D, eps = cfg["n_layers"], cfg["n_heads"], cfg["n_kv"], cfg["head_dim"], cfg["eps"]
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    i_idx, j_idx = np.arange(T)[:, None], np.arange(T)[None, :]

    def norm(x, name):
        return base.rmsnorm(x, w[name] + norm_offset, eps)
    x = w["model.embed_tokens.weight"][ids] * math.sqrt(cfg["dim"])
    for l in range(L):
        p = "model.layers.%d." % l
        sliding = cfg["layer_types"][l] == "sliding_attention"
        allowed = j_idx <= i_idx
        if sliding:
            allowed &= j_idx > i_idx - cfg["window"]
        inv = cfg["inv_freq_sliding"] if sliding else cfg["inv_freq_full"]
        h = norm(x, p + "input_layernorm.weight")
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, H, D)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, KV, D)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, KV, D)
        if p + "self_attn.q_norm.weight" in w:
            q, k = norm(q, p + "self_attn.q_norm.weight"), norm(k, p + "self_attn.k_norm.weight")
        q, k = base.rope(q, pos, inv, "half"), base.rope(k, pos, inv, "half")
        att = np.empty((T, H, D))
        for hh in range(H):
            kh = hh // (H // KV)
            sc = q[:, hh, :] @ k[:, kh, :].T * cfg["scale"]
            if cfg.get("attn_cap"):
                sc = cfg["attn_cap"] * np.tanh(sc / cfg["attn_cap"])
            sc = np.where(allowed, sc, -np.inf)
            sc = np.exp(sc - sc.max(axis=1, keepdims=True))
            sc /= sc.sum(axis=1, keepdims=True)
            att[:, hh, :] = sc @ v[:, kh, :]
        a = att.reshape(T, H * D) @ w[p + "self_attn.o_proj.weight"].T
        x = x + norm(a, p + "post_attention_layernorm.weight")
        h = norm(x, p + "pre_feedforward_layernorm.weight")
        g = h @ w[p + "mlp.gate_proj.weight"].T
        u = h @ w[p + "mlp.up_proj.weight"].T
        f = (gelu_tanh(g) * u) @ w[p + "mlp.down_proj.weight"].T
        x = x + norm(f, p + "post_feedforward_layernorm.weight")
    x = norm(x, "model.norm.weight")
    logits = x @ w["model.embed_tokens.weight"].T
    if cfg.get("final_cap"):
        logits = cfg["final_cap"] * np.tanh(logits / cfg["final_cap"])
    return logits


def np_cfg(c, scale):
    return dict(n_layers=c.num_hidden_layers, n_heads=c.num_attention_heads, n_kv=c.num_key_value_heads,
                head_dim=c.head_dim, eps=c.rms_norm_eps, dim=c.hidden_size, layer_types=list(c.layer_types),
                window=c.sliding_window, scale=scale,
                inv_freq_sliding=base.default_inv_freq(ROPE["sliding_attention"]["rope_theta"], c.head_dim),
                inv_freq_full=base.default_inv_freq(ROPE["full_attention"]["rope_theta"], c.head_dim)
                / ROPE["full_attention"]["factor"])


def greedy_of(m, prompt):
    with torch.no_grad():
        out = m.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=GREEDY_NEW,
                         min_new_tokens=GREEDY_NEW, pad_token_id=0)
    tokens = [int(t) for t in out[0, len(prompt):]]
    full = base.hf_logits(m, [prompt + tokens[:-1]])[0][len(prompt) - 1:]
    assert [int(i) for i in np.argmax(full, axis=1)] == tokens
    top2 = np.sort(full, axis=1)[:, -2:]
    gap = float(np.min((top2[:, 1] - top2[:, 0]) / np.max(np.abs(full), axis=1)))
    print("  greedy after %s: %s (smallest top-1 margin %.3g of the largest |logit|)" % (prompt, tokens, gap))
    return tokens if gap > 1e-3 else None  # a near tie: kiln's 1e-4 agreement could flip it


def greedy_reference(m, prompts):
    """The first of the longer prompts whose greedy path has no near tie, and its tokens."""
    for p in prompts[1:]:
        tokens = greedy_of(m, p)
        if tokens is not None:
            return p, tokens
    sys.exit("every greedy path has a near tie")


def write_reference_with_greedy(path, prompts, logits, prompt, tokens):
    base.write_reference(path, prompts, logits)
    with open(path) as f:
        text = f.read().rstrip()
    assert text.endswith("]}")
    with open(path, "w") as f:
        f.write(text[:-1] + ',\n "greedy": {"prompt": %s, "tokens": %s}}\n' % (prompt, tokens))
    with open(path) as f:
        assert json.load(f)["greedy"]["tokens"] == tokens


def write_gemma3_gguf(path, model, arch="gemma3", add_arch_keys=None):
    """arch gemma2: make_hf_tiny_gemma2.py passes its own RoPE and soft-cap keys as add_arch_keys(writer)."""
    import gguf
    c = model.config
    sd = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GEMMA2 if arch == "gemma2" else gguf.MODEL_ARCH.GEMMA3,
                                    c.num_hidden_layers)
    w = gguf.GGUFWriter(path, arch)
    w.add_name("kiln-test-%s-tiny" % arch)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_layer_norm_rms_eps(float(c.rms_norm_eps))
    w.add_key_length(c.head_dim)
    w.add_value_length(c.head_dim)
    if add_arch_keys:
        add_arch_keys(w)
    else:
        w.add_rope_freq_base(float(ROPE["full_attention"]["rope_theta"]))
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(float(ROPE["full_attention"]["factor"]))
    w.add_sliding_window(c.sliding_window)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(["t%d" % i for i in range(c.vocab_size)])
    w.add_token_scores([0.0] * c.vocab_size)
    w.add_token_types([1] * c.vocab_size)
    for name, a in sd.items():
        if name == "lm_head.weight":
            continue  # tied: llama.cpp's converter skips it
        if name.endswith("norm.weight"):
            a = a + 1  # as convert_hf_to_gguf.py's Gemma3Model does
        gname = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        assert gname is not None, name
        w.add_tensor(gname, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_gemma3_gguf(path, n_blocks, arch="gemma3"):
    import gguf
    r = gguf.GGUFReader(path)
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GEMMA2 if arch == "gemma2" else gguf.MODEL_ARCH.GEMMA3, n_blocks)
    hf_of = {}
    for l in range(n_blocks):
        for hf in ("input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.q_norm",
                   "self_attn.k_norm", "self_attn.o_proj", "post_attention_layernorm", "pre_feedforward_layernorm",
                   "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "post_feedforward_layernorm"):
            name = "model.layers.%d.%s" % (l, hf)
            if tmap.get_name(name) is not None:  # gemma2 has no q/k norms
                hf_of[tmap.get_name(name) + ".weight"] = name + ".weight"
    for name in ("model.embed_tokens", "model.norm"):
        hf_of[tmap.get_name(name) + ".weight"] = name + ".weight"
    w = {}
    for t in r.tensors:
        w[hf_of[t.name]] = np.array(t.data, dtype=np.float64).reshape([int(d) for d in reversed(t.shape)])
    assert len(w) == len(hf_of), sorted(set(hf_of.values()) - set(w))
    print("  gguf tensors:", " ".join(t.name for t in r.tensors if t.name.startswith("blk.0.")))
    return w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=base.DEFAULT_OUT)
    args = ap.parse_args()
    print("torch", torch.__version__, "transformers", transformers.__version__)
    print("gemma3")
    cfg = Gemma3TextConfig(vocab_size=base.VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=6,
                           num_attention_heads=4, num_key_value_heads=2, head_dim=HEAD_DIM,
                           query_pre_attn_scalar=QPAS, sliding_window=WINDOW, layer_types=list(LAYER_TYPES),
                           max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=True,
                           rope_parameters=json.loads(json.dumps(ROPE)), pad_token_id=0, bos_token_id=2,
                           eos_token_id=1)
    cfg.architectures = ["Gemma3ForCausalLM"]
    m = base.build(Gemma3ForCausalLM, cfg, seed=1007)
    # Gemma norm weights are stored as w in (1 + w): centre them on 0, not 1. The embedding, scaled
    # by sqrt(64) = 8 and tied to the classifier, gets a smaller spread (0.02) so that the layers,
    # not the token itself, decide the next token (with 0.08 greedy decoding repeats one token).
    g = torch.Generator().manual_seed(3007)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "norm" in name:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif name == "model.embed_tokens.weight":
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
    d = os.path.join(args.out, "gemma3")
    base.save(m, d)
    m = base.reload_f32(Gemma3ForCausalLM, d)
    c = m.config
    assert c.head_dim == HEAD_DIM and c.query_pre_attn_scalar == QPAS and list(c.layer_types) == LAYER_TYPES
    assert c.hidden_activation == "gelu_pytorch_tanh" and c.final_logit_softcapping is None
    prompts = base.make_prompts(2007)
    lg = base.hf_logits(m, prompts)
    write_reference_with_greedy(os.path.join(d, "reference.json"), prompts, lg, *greedy_reference(m, prompts))
    sd = base.state_np(m)
    nc = np_cfg(c, QPAS ** -0.5)
    base.check("numpy oracle vs HF", base.maxdiff([np_forward_gemma3(sd, nc, p, 1.0) for p in prompts], lg), 1e-4)
    for label, alt in (("no sliding window", dict(nc, window=10 ** 6)), ("head_dim^-0.5 scale", dict(nc, scale=HEAD_DIM ** -0.5)),
                       ("one rope base", dict(nc, inv_freq_sliding=nc["inv_freq_full"]))):
        print("  (control: %s would be off by %.3g)" % (label, base.maxdiff([np_forward_gemma3(sd, alt, p, 1.0)
                                                                              for p in prompts], lg)))

    # The GGUF, and what it means to llama.cpp: the same weights scaled by head_dim^-0.5.
    write_gemma3_gguf(os.path.join(d, "model.gguf"), m)
    cg = Gemma3TextConfig.from_pretrained(d)
    cg.query_pre_attn_scalar = HEAD_DIM
    mg = base.build(Gemma3ForCausalLM, cg, seed=1007)
    mg.load_state_dict(m.state_dict())
    lgg = base.hf_logits(mg, prompts)
    write_reference_with_greedy(os.path.join(d, "reference-gguf.json"), prompts, lgg, *greedy_reference(mg, prompts))
    gw = read_gemma3_gguf(os.path.join(d, "model.gguf"), c.num_hidden_layers)
    base.check("model.gguf (numpy, folded norms, head_dim^-0.5) vs reference-gguf.json",
               base.maxdiff([np_forward_gemma3(gw, dict(nc, scale=HEAD_DIM ** -0.5), p, 0.0) for p in prompts], lgg), 1e-4)
    print("done")


if __name__ == "__main__":
    main()
