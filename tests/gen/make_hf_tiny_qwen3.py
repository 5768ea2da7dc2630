#!/usr/bin/env python3
"""Generate the tiny random-weight Qwen3 model of tests/data/hf-tiny/qwen3/ plus its references.

Qwen3 (Qwen3ForCausalLM) is the Qwen2 decoder without q/k/v biases, with an RMSNorm over each head
of q and of k (weights q_norm, k_norm of width head_dim) before RoPE. The tiny config uses a
head_dim (24) other than hidden_size / heads (64 / 4 = 16), as Qwen3-0.6B does (128, not 64).

Writes tests/data/hf-tiny/qwen3/:
    config.json, generation_config.json, model.safetensors   save_pretrained(safe_serialization=True)
    reference.json   {"prompts": [[ids]...], "logits": [[[vocab floats] per position] per prompt],
                      "greedy": {"prompt": [ids], "tokens": [20 ids]}}: transformers' logits, and the
                     tokens of model.generate(do_sample=False) after that prompt
    model.gguf       GGUF v3 (gguf-py GGUFWriter), arch qwen3, all F32, tensors named by gguf-py's
                     TensorNameMap for MODEL_ARCH.QWEN3 (llama.cpp's names: blk.N.attn_q_norm.weight, ...),
                     keys as convert_hf_to_gguf.py writes them (attention.key_length/value_length = head_dim)

Every output is verified here against an independent numpy (float64) forward pass, which also
reads the GGUF back with gguf-py's reader.

Usage:  python3 tests/gen/make_hf_tiny_qwen3.py [--out tests/data/hf-tiny]
CPU only, deterministic (fixed seeds, 1 torch thread). The shared helpers are make_hf_tiny.py's.
"""
import argparse
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_hf_tiny as base  # noqa: E402  (sets torch to 1 thread, deterministic)

import transformers  # noqa: E402
from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402

HEAD_DIM = 24
GREEDY_NEW = 20


def np_forward_qwen3(w, cfg, ids, inv_freq):
    """The Qwen3 decoder in float64: base.np_forward plus the per-head q/k norms before RoPE."""
    L, H, KV, D, eps = cfg["n_layers"], cfg["n_heads"], cfg["n_kv"], cfg["head_dim"], cfg["eps"]
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    x = w["model.embed_tokens.weight"][ids]
    allowed = np.arange(T)[None, :] <= np.arange(T)[:, None]
    for l in range(L):
        p = "model.layers.%d." % l
        h = base.rmsnorm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, H, D)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, KV, D)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, KV, D)
        q = base.rmsnorm(q, w[p + "self_attn.q_norm.weight"], eps)  # over the last axis: each head
        k = base.rmsnorm(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k = base.rope(q, pos, inv_freq, "half"), base.rope(k, pos, inv_freq, "half")
        att = np.empty((T, H, D))
        for hh in range(H):
            kh = hh // (H // KV)
            sc = q[:, hh, :] @ k[:, kh, :].T / math.sqrt(D)
            sc = np.where(allowed, sc, -np.inf)
            sc = np.exp(sc - sc.max(axis=1, keepdims=True))
            sc /= sc.sum(axis=1, keepdims=True)
            att[:, hh, :] = sc @ v[:, kh, :]
        x = x + att.reshape(T, H * D) @ w[p + "self_attn.o_proj.weight"].T
        h = base.rmsnorm(x, w[p + "post_attention_layernorm.weight"], eps)
        g = h @ w[p + "mlp.gate_proj.weight"].T
        u = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    x = base.rmsnorm(x, w["model.norm.weight"], eps)
    return x @ w["lm_head.weight"].T


def gguf_name_map(n_blocks):
    import gguf
    return gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN3, n_blocks)


def write_qwen3_gguf(path, model):
    import gguf
    c = model.config
    sd = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    tmap = gguf_name_map(c.num_hidden_layers)
    w = gguf.GGUFWriter(path, "qwen3")
    w.add_name("kiln-test-qwen3-tiny")
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_key_length(c.head_dim)
    w.add_value_length(c.head_dim)
    w.add_rope_freq_base(float(c.rope_parameters["rope_theta"]))
    w.add_layer_norm_rms_eps(float(c.rms_norm_eps))
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(["t%d" % i for i in range(c.vocab_size)])
    w.add_token_types([1] * c.vocab_size)
    w.add_token_merges(["t 0"])  # see make_hf_tiny.write_qwen2_gguf
    allowed = {gguf.TENSOR_NAMES[t] for t in gguf.MODEL_TENSORS[gguf.MODEL_ARCH.QWEN3]}
    for name, a in sd.items():
        # NOT permuted: llama.cpp runs qwen3 with NEOX (rotate-half) rope, as HF does.
        gname = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        assert gname is not None, name
        stem = gname.rsplit(".", 1)[0]
        assert any(stem == t.format(bid=l) for t in allowed for l in range(c.num_hidden_layers)) or stem in allowed, gname
        w.add_tensor(gname, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_qwen3_gguf(path, n_blocks):
    """Independent reader: gguf-py's GGUFReader, names mapped back through the same TensorNameMap."""
    import gguf
    r = gguf.GGUFReader(path)
    tmap = gguf_name_map(n_blocks)
    hf_of = {}
    for l in range(n_blocks):
        for hf in ("input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.q_norm",
                   "self_attn.k_norm", "self_attn.o_proj", "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj",
                   "mlp.down_proj"):
            name = "model.layers.%d.%s" % (l, hf)
            hf_of[tmap.get_name(name) + ".weight"] = name + ".weight"
    for name in ("model.embed_tokens", "model.norm", "lm_head"):
        hf_of[tmap.get_name(name) + ".weight"] = name + ".weight"
    w = {}
    for t in r.tensors:
        assert t.tensor_type == gguf.GGMLQuantizationType.F32, t.name
        w[hf_of[t.name]] = np.array(t.data, dtype=np.float64).reshape([int(d) for d in reversed(t.shape)])
    assert len(w) == len(hf_of), sorted(set(hf_of.values()) - set(w))

    def kv(key):
        f = r.fields[key]
        return f.parts[f.data[0]][0]
    cfg = dict(n_layers=int(kv("qwen3.block_count")), n_heads=int(kv("qwen3.attention.head_count")),
               n_kv=int(kv("qwen3.attention.head_count_kv")), head_dim=int(kv("qwen3.attention.key_length")),
               eps=float(kv("qwen3.attention.layer_norm_rms_epsilon")))
    assert int(kv("qwen3.attention.value_length")) == cfg["head_dim"]
    return w, cfg, float(kv("qwen3.rope.freq_base"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=base.DEFAULT_OUT)
    args = ap.parse_args()
    print("torch", torch.__version__, "transformers", transformers.__version__)
    print("qwen3")
    cfg = Qwen3Config(vocab_size=base.VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=HEAD_DIM, max_position_embeddings=256,
                      rms_norm_eps=1e-6, tie_word_embeddings=False,
                      rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                      bos_token_id=None, eos_token_id=None)
    m = base.build(Qwen3ForCausalLM, cfg, seed=1006)
    d = os.path.join(args.out, "qwen3")
    base.save(m, d)
    m = base.reload_f32(Qwen3ForCausalLM, d)
    assert m.config.head_dim == HEAD_DIM != m.config.hidden_size // m.config.num_attention_heads
    assert not m.config.attention_bias and not m.config.use_sliding_window
    print("  config: head_dim=%d (hidden/heads=%d) layer_types=%s" %
          (m.config.head_dim, m.config.hidden_size // m.config.num_attention_heads, m.config.layer_types))
    prompts = base.make_prompts(2006)
    lg = base.hf_logits(m, prompts)

    # Greedy continuation of the 7-token prompt, by transformers' own generate.
    gp = prompts[1]
    with torch.no_grad():
        out = m.generate(torch.tensor([gp]), do_sample=False, max_new_tokens=GREEDY_NEW, min_new_tokens=GREEDY_NEW,
                         pad_token_id=0)
    greedy = [int(t) for t in out[0, len(gp):]]
    assert len(greedy) == GREEDY_NEW
    # The smallest gap between the best and second-best logit along the greedy path: kiln's 1e-4
    # agreement must not be able to flip a choice.
    full = base.hf_logits(m, [gp + greedy[:-1]])[0][len(gp) - 1:]
    top2 = np.sort(full, axis=1)[:, -2:]
    gap = float(np.min((top2[:, 1] - top2[:, 0]) / np.max(np.abs(full), axis=1)))
    assert [int(i) for i in np.argmax(full, axis=1)] == greedy
    print("  greedy after %s: %s (smallest top-1 margin %.3g of the largest |logit|)" % (gp, greedy, gap))
    assert gap > 1e-3, "a near tie on the greedy path"

    ref_path = os.path.join(d, "reference.json")
    base.write_reference(ref_path, prompts, lg)
    with open(ref_path) as f:
        text = f.read().rstrip()
    assert text.endswith("]}")
    text = text[:-1] + ',\n "greedy": {"prompt": %s, "tokens": %s}}\n' % (gp, greedy)
    with open(ref_path, "w") as f:
        f.write(text)
    import json
    with open(ref_path) as f:
        assert json.load(f)["greedy"]["tokens"] == greedy

    c = base.cfg_of(m.config)
    assert c["head_dim"] == HEAD_DIM
    inv = base.default_inv_freq(1e6, HEAD_DIM)
    sd = base.state_np(m)
    base.check("numpy oracle vs HF", base.maxdiff([np_forward_qwen3(sd, c, p, inv) for p in prompts], lg), 1e-4)
    no_norm = dict(sd)
    for k in list(no_norm):
        if k.endswith("q_norm.weight") or k.endswith("k_norm.weight"):
            no_norm[k] = np.ones_like(no_norm[k])
    print("  (control: q/k norm weights set to 1 would be off by %.3g)" %
          base.maxdiff([np_forward_qwen3(no_norm, c, p, inv) for p in prompts], lg))

    write_qwen3_gguf(os.path.join(d, "model.gguf"), m)
    gw, gc, gtheta = read_qwen3_gguf(os.path.join(d, "model.gguf"), c["n_layers"])
    base.check("model.gguf (numpy, rotate-half rope) vs reference",
               base.maxdiff([np_forward_qwen3(gw, gc, p, base.default_inv_freq(gtheta, gc["head_dim"]))
                             for p in prompts], lg), 1e-4)
    print("done")


if __name__ == "__main__":
    main()
