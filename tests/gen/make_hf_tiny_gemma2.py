#!/usr/bin/env python3
"""Generate the tiny random-weight Gemma 2 model of tests/data/hf-tiny/gemma2/ plus its references.

Gemma 2 (Gemma2ForCausalLM): Gemma 3's block (make_hf_tiny_gemma3.py: sqrt(hidden) embedding scale, (1 + w)
norms, pre/post norms around attention and the MLP, GELU-tanh gating, query_pre_attn_scalar, tied embeddings)
without the q/k norms and with one RoPE base, plus soft-capping: each scaled attention score
s -> attn_logit_softcapping * tanh(s / attn_logit_softcapping) before the mask, and the logits likewise by
final_logit_softcapping. Sliding-window and global layers alternate (layer 0 sliding).

The tiny config: 3 layers [sliding, full, sliding], sliding_window 4 (< the 7- and 12-token prompts), head_dim 16,
query_pre_attn_scalar 24 (!= head_dim), attn cap 5 and final cap 3 (small enough to bend the scores and
logits: the script prints what leaving each out would change), q/k projections of spread 0.3 so that scores
reach the cap.

Writes tests/data/hf-tiny/gemma2/:
    config.json, generation_config.json, model.safetensors   save_pretrained(safe_serialization=True)
    reference.json       {"prompts", "logits", "greedy": {"prompt", "tokens"}} as make_hf_tiny_gemma3.py
    model.gguf           GGUF v3, F32, arch gemma2 as llama.cpp's convert_hf_to_gguf.py writes it: norms with the
                         1 folded in, gemma2.attn_logit_softcapping / final_logit_softcapping /
                         attention.sliding_window keys, no query_pre_attn_scalar key (llama.cpp scales a gemma2
                         model that is not the 27B by head_dim^-0.5)
    reference-gguf.json  transformers' logits of the same weights with query_pre_attn_scalar = head_dim

Every output is verified against the float64 numpy forward pass of make_hf_tiny_gemma3.py; the GGUF is read
back with gguf-py. Usage: python3 tests/gen/make_hf_tiny_gemma2.py [--out tests/data/hf-tiny]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_hf_tiny as base  # noqa: E402  (sets torch to 1 thread, deterministic)
import make_hf_tiny_gemma3 as g3  # noqa: E402

import transformers  # noqa: E402
from transformers import Gemma2Config, Gemma2ForCausalLM  # noqa: E402

HEAD_DIM = 16
QPAS = 24
WINDOW = 4
ATTN_CAP = 5.0
FINAL_CAP = 3.0
THETA = 10000.0
LAYER_TYPES = ["sliding_attention", "full_attention", "sliding_attention"]  # Gemma 2's alternation


def np_cfg(c, scale):
    inv = base.default_inv_freq(THETA, c.head_dim)
    return dict(n_layers=c.num_hidden_layers, n_heads=c.num_attention_heads, n_kv=c.num_key_value_heads,
                head_dim=c.head_dim, eps=c.rms_norm_eps, dim=c.hidden_size, layer_types=list(c.layer_types),
                window=c.sliding_window, scale=scale, inv_freq_sliding=inv, inv_freq_full=inv,
                attn_cap=c.attn_logit_softcapping, final_cap=c.final_logit_softcapping)


def gguf_keys(c):
    def add(w):
        w.add_rope_freq_base(THETA)
        w.add_attn_logit_softcapping(float(c.attn_logit_softcapping))
        w.add_final_logit_softcapping(float(c.final_logit_softcapping))
    return add


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=base.DEFAULT_OUT)
    args = ap.parse_args()
    print("torch", torch.__version__, "transformers", transformers.__version__)
    print("gemma2")
    cfg = Gemma2Config(vocab_size=base.VOCAB, hidden_size=64, intermediate_size=64, num_hidden_layers=3,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=HEAD_DIM, query_pre_attn_scalar=QPAS,
                       sliding_window=WINDOW, layer_types=list(LAYER_TYPES), max_position_embeddings=256,
                       rms_norm_eps=1e-6, tie_word_embeddings=True, attn_logit_softcapping=ATTN_CAP,
                       final_logit_softcapping=FINAL_CAP,
                       rope_parameters={"rope_type": "default", "rope_theta": THETA}, pad_token_id=0, bos_token_id=2,
                       eos_token_id=1)
    cfg.architectures = ["Gemma2ForCausalLM"]
    m = base.build(Gemma2ForCausalLM, cfg, seed=1009)
    # Norm weights centred on 0 (the checkpoint stores w of 1 + w), a small embedding (scaled by 8 and tied, as in
    # make_hf_tiny_gemma3.py) but a final norm of ~11, q and k wide enough that the scores reach the attention cap.
    g = torch.Generator().manual_seed(3009)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name == "model.norm.weight":  # (1 + w) ~ 11: logits of a few units, which the final cap bends
                p.copy_(10 + 0.1 * torch.randn(p.shape, generator=g))
            elif "norm" in name:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif name == "model.embed_tokens.weight":
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
            elif "q_proj" in name or "k_proj" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    d = os.path.join(args.out, "gemma2")
    base.save(m, d)
    m = base.reload_f32(Gemma2ForCausalLM, d)
    c = m.config
    assert c.head_dim == HEAD_DIM and c.query_pre_attn_scalar == QPAS and list(c.layer_types) == LAYER_TYPES
    assert c.attn_logit_softcapping == ATTN_CAP and c.final_logit_softcapping == FINAL_CAP
    prompts = base.make_prompts(2009)
    lg = base.hf_logits(m, prompts)
    g3.write_reference_with_greedy(os.path.join(d, "reference.json"), prompts, lg, *g3.greedy_reference(m, prompts))
    sd = base.state_np(m)
    nc = np_cfg(c, QPAS ** -0.5)
    base.check("numpy oracle vs HF", base.maxdiff([g3.np_forward_gemma3(sd, nc, p, 1.0) for p in prompts], lg), 1e-4)
    for label, alt in (("no attention soft-cap", dict(nc, attn_cap=None)), ("no final soft-cap", dict(nc, final_cap=None)),
                       ("no sliding window", dict(nc, window=10 ** 6)), ("head_dim^-0.5 scale", dict(nc, scale=HEAD_DIM ** -0.5))):
        off = base.maxdiff([g3.np_forward_gemma3(sd, alt, p, 1.0) for p in prompts], lg)
        print("  (control: %s would be off by %.3g)" % (label, off))
        assert off > 1e-2, label  # each feature changes the logits far beyond the tests' 1e-4

    # The GGUF, and what it means to llama.cpp: the same weights scaled by head_dim^-0.5.
    path = os.path.join(d, "model.gguf")
    g3.write_gemma3_gguf(path, m, arch="gemma2", add_arch_keys=gguf_keys(c))
    cg = Gemma2Config.from_pretrained(d)
    cg.query_pre_attn_scalar = HEAD_DIM
    mg = base.build(Gemma2ForCausalLM, cg, seed=1009)
    mg.load_state_dict(m.state_dict())
    lgg = base.hf_logits(mg, prompts)
    g3.write_reference_with_greedy(os.path.join(d, "reference-gguf.json"), prompts, lgg, *g3.greedy_reference(mg, prompts))
    gw = g3.read_gemma3_gguf(path, c.num_hidden_layers, arch="gemma2")
    base.check("model.gguf (numpy, folded norms, head_dim^-0.5) vs reference-gguf.json",
               base.maxdiff([g3.np_forward_gemma3(gw, dict(nc, scale=HEAD_DIM ** -0.5), p, 0.0) for p in prompts], lgg), 1e-4)
    print("done")


if __name__ == "__main__":
    main()
