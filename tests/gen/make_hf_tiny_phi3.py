#!/usr/bin/env python3
"""Generate the tiny random-weight Phi-3 model of tests/data/hf-tiny/phi3/ plus its references.

Phi-3 (Phi3ForCausalLM, model_type phi3) is the Llama decoder with two fused projections: self_attn.qkv_proj
(rows: q, then k, then v) and mlp.gate_up_proj (rows: gate, then up; the MLP is down(silu(gate) * up)),
and, in Phi-3-mini-4k, sliding-window attention on every layer (sliding_window 2047). The tiny config
uses grouped-query attention (4 heads, 2 KV heads: the three parts of qkv_proj have different widths)
and sliding_window 5 (< the 7- and 12-token prompts), RoPE base 10000, no scaling.

Writes tests/data/hf-tiny/phi3/:
    config.json, generation_config.json, model.safetensors   save_pretrained(safe_serialization=True)
    reference.json   {"prompts", "logits", "greedy": {"prompt", "tokens"}}: transformers' logits, and the
                     tokens of model.generate(do_sample=False) after the first prompt without a near tie
    model.gguf       GGUF v3, arch phi3, all F32, as llama.cpp's convert_hf_to_gguf.py writes it: the fused
                     blk.N.attn_qkv.weight and blk.N.ffn_up.weight (gate rows first), gguf-py TensorNameMap
                     names, phi3.attention.sliding_window, phi3.rope.dimension_count = head_dim

And tests/data/hf-tiny/phi3-longrope/, the same shapes with LongRoPE (Phi-3-mini-128k, Phi-3.5-mini):
rope_parameters {rope_type longrope, short_factor, long_factor}, original_max_position_embeddings 64 of 256
(factor 4, attention factor sqrt(1 + ln 4 / ln 64)); the prompts stay within 64 positions, where transformers
uses the short factors. Its reference_long.json holds an 80-token prompt (past the original 64), transformers'
logits of it in one forward pass (which turns every position by the long factors, as a max position + 1 > 64
makes it choose long_inv_freq) and the 20 greedy tokens after it (positions 80..99, long factors still). Its model.gguf carries rope_factors_short/rope_factors_long tensors and the
rope.scaling.attn_factor and original_context_length keys, as convert_hf_to_gguf.py writes them.

And tests/data/hf-tiny/phi3-partial/, RoPE over half of each head (partial_rotary_factor 0.5: 8 of 16
elements turn, as Phi-4-mini turns 96 of 128) with tied embeddings (as Phi-4-mini); its model.gguf has
phi3.rope.dimension_count 8.

Every output is verified against an independent numpy (float64) forward pass; the GGUF is read back with
gguf-py. Usage: python3 tests/gen/make_hf_tiny_phi3.py [--out tests/data/hf-tiny]
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
import make_hf_tiny_gemma3 as gemma  # noqa: E402  (the greedy reference helpers)

import transformers  # noqa: E402
from transformers import Phi3Config, Phi3ForCausalLM  # noqa: E402

WINDOW = 5
LONG_PROMPT = 80  # reference_long.json's prompt: past phi3-longrope's original context of 64


def unfused(sd, cfg):
    """The state dict with qkv_proj and gate_up_proj split into Llama's names (for base.np_forward)."""
    H, KV, D, F = cfg["n_heads"], cfg["n_kv"], cfg["head_dim"], cfg["ffn"]
    w = dict(sd)
    for l in range(cfg["n_layers"]):
        p = "model.layers.%d." % l
        qkv = w.pop(p + "self_attn.qkv_proj.weight")
        w[p + "self_attn.q_proj.weight"] = qkv[: H * D]
        w[p + "self_attn.k_proj.weight"] = qkv[H * D: (H + KV) * D]
        w[p + "self_attn.v_proj.weight"] = qkv[(H + KV) * D:]
        gu = w.pop(p + "mlp.gate_up_proj.weight")
        w[p + "mlp.gate_proj.weight"] = gu[:F]
        w[p + "mlp.up_proj.weight"] = gu[F:]
    return w


def np_forward_scaled(w, cfg, ids, inv, window, attention_factor):
    """base.np_forward with LongRoPE's attention factor: cos and sin scaled by it, so q.k by its square."""
    saved = base.rope

    def scaled_rope(x, pos, inv_freq, style):
        return saved(x, pos, inv_freq, style) * attention_factor
    base.rope = scaled_rope
    try:
        return base.np_forward(w, cfg, ids, inv, window=window)
    finally:
        base.rope = saved


def np_forward_partial(w, cfg, ids, inv, rot):
    """base.np_forward with RoPE over the first `rot` elements of each head; the rest pass."""
    saved = base.rope

    def partial_rope(x, pos, inv_freq, style):
        y = x.copy()
        y[..., :rot] = saved(x[..., :rot], pos, inv_freq, style)
        return y
    base.rope = partial_rope
    try:
        return base.np_forward(w, cfg, ids, inv)
    finally:
        base.rope = saved


def write_phi3_gguf(path, model, longrope=None, rope_dims=None):
    import gguf
    c = model.config
    sd = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.PHI3, c.num_hidden_layers)
    w = gguf.GGUFWriter(path, "phi3")
    w.add_name("kiln-test-phi3-tiny")
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_layer_norm_rms_eps(float(c.rms_norm_eps))
    w.add_rope_dimension_count(rope_dims or c.hidden_size // c.num_attention_heads)
    w.add_rope_freq_base(float(c.rope_parameters["rope_theta"]))
    if c.sliding_window is not None:
        w.add_sliding_window(c.sliding_window)
    if longrope is not None:
        w.add_rope_scaling_attn_factors(longrope["attention_factor"])
        w.add_rope_scaling_orig_ctx_len(longrope["original"])
        w.add_tensor("rope_factors_long.weight", np.array(longrope["long"], dtype=np.float32))
        w.add_tensor("rope_factors_short.weight", np.array(longrope["short"], dtype=np.float32))
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(["t%d" % i for i in range(c.vocab_size)])
    w.add_token_scores([0.0] * c.vocab_size)
    w.add_token_types([1] * c.vocab_size)
    for name, a in sd.items():
        if name == "lm_head.weight" and c.tie_word_embeddings:
            continue  # tied: llama.cpp's converter leaves output.weight out
        gname = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        assert gname is not None, name
        w.add_tensor(gname, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_phi3_gguf(path, n_blocks):
    import gguf
    r = gguf.GGUFReader(path)
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.PHI3, n_blocks)
    hf_of = {}
    for l in range(n_blocks):
        for hf in ("input_layernorm", "self_attn.qkv_proj", "self_attn.o_proj", "post_attention_layernorm",
                   "mlp.gate_up_proj", "mlp.down_proj"):
            name = "model.layers.%d.%s" % (l, hf)
            hf_of[tmap.get_name(name) + ".weight"] = name + ".weight"
    for name in ("model.embed_tokens", "model.norm", "lm_head"):
        hf_of[tmap.get_name(name) + ".weight"] = name + ".weight"
    if not any(t.name == "output.weight" for t in r.tensors):  # tied
        del hf_of["output.weight"]
    w = {}
    for t in r.tensors:
        if t.name.startswith("rope_factors_"):
            continue
        w[hf_of[t.name]] = np.array(t.data, dtype=np.float64).reshape([int(d) for d in reversed(t.shape)])
    assert len(w) == len(hf_of), sorted(set(hf_of.values()) - set(w))
    print("  gguf tensors:", " ".join(t.name for t in r.tensors if t.name.startswith("blk.0.")))
    return w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=base.DEFAULT_OUT)
    args = ap.parse_args()
    print("torch", torch.__version__, "transformers", transformers.__version__)
    print("phi3")
    cfg = Phi3Config(vocab_size=base.VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                     original_max_position_embeddings=256, rms_norm_eps=1e-5, sliding_window=WINDOW,
                     tie_word_embeddings=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    cfg.architectures = ["Phi3ForCausalLM"]
    m = base.build(Phi3ForCausalLM, cfg, seed=1013)
    d = os.path.join(args.out, "phi3")
    base.save(m, d)
    m = base.reload_f32(Phi3ForCausalLM, d)
    c = m.config
    assert c.sliding_window == WINDOW and c.rope_parameters.get("partial_rotary_factor", 1.0) == 1.0
    prompts = base.make_prompts(2011)
    lg = base.hf_logits(m, prompts)
    gemma.write_reference_with_greedy(os.path.join(d, "reference.json"), prompts, lg,
                                      *gemma.greedy_reference(m, prompts))
    nc = dict(base.cfg_of(c), ffn=c.intermediate_size)
    inv = base.default_inv_freq(c.rope_parameters["rope_theta"], nc["head_dim"])
    sd = unfused(base.state_np(m), nc)
    base.check("numpy oracle vs HF", base.maxdiff([base.np_forward(sd, nc, p, inv, window=WINDOW) for p in prompts], lg),
               1e-4)
    print("  (control: no sliding window would be off by %.3g)"
          % base.maxdiff([base.np_forward(sd, nc, p, inv) for p in prompts], lg))

    write_phi3_gguf(os.path.join(d, "model.gguf"), m)
    gw = unfused(read_phi3_gguf(os.path.join(d, "model.gguf"), c.num_hidden_layers), nc)
    base.check("model.gguf (numpy) vs reference.json",
               base.maxdiff([base.np_forward(gw, nc, p, inv, window=WINDOW) for p in prompts], lg), 1e-4)
    with open(os.path.join(d, "config.json")) as f:
        assert json.load(f)["model_type"] == "phi3"
    make_longrope(args.out)
    make_partial(args.out)
    print("done")


def make_longrope(out):
    print("phi3-longrope")
    rng = np.random.default_rng(3013)
    half = 8  # head_dim 16
    short = [float(v) for v in np.round(1.0 + rng.random(half), 4)]
    long_ = [float(v) for v in np.round(1.0 + 7.0 * rng.random(half), 4)]
    orig = 64
    cfg = Phi3Config(vocab_size=base.VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                     original_max_position_embeddings=orig, rms_norm_eps=1e-5, sliding_window=None,
                     rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": short,
                                      "long_factor": long_, "original_max_position_embeddings": orig},
                     tie_word_embeddings=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    cfg.architectures = ["Phi3ForCausalLM"]
    m = base.build(Phi3ForCausalLM, cfg, seed=1013)
    d = os.path.join(out, "phi3-longrope")
    base.save(m, d)
    m = base.reload_f32(Phi3ForCausalLM, d)
    c = m.config
    assert c.rope_parameters["rope_type"] == "longrope", c.rope_parameters
    prompts = base.make_prompts(2011)
    assert max(len(p) for p in prompts) <= orig
    lg = base.hf_logits(m, prompts)
    gemma.write_reference_with_greedy(os.path.join(d, "reference.json"), prompts, lg,
                                      *gemma.greedy_reference(m, prompts))
    nc = dict(base.cfg_of(c), ffn=c.intermediate_size)
    af = math.sqrt(1 + math.log(256 / orig) / math.log(orig))
    inv = base.default_inv_freq(10000.0, nc["head_dim"]) / np.array(short)
    sd = unfused(base.state_np(m), nc)
    base.check("numpy oracle (short factors, attention factor %.6f) vs HF" % af,
               base.maxdiff([np_forward_scaled(sd, nc, p, inv, None, af) for p in prompts], lg), 1e-4)
    print("  (control: without the attention factor off by %.3g, with the long factors by %.3g)" % (
        base.maxdiff([np_forward_scaled(sd, nc, p, inv, None, 1.0) for p in prompts], lg),
        base.maxdiff([np_forward_scaled(sd, nc, p, base.default_inv_freq(10000.0, nc["head_dim"]) / np.array(long_),
                                        None, af) for p in prompts], lg)))
    write_phi3_gguf(os.path.join(d, "model.gguf"), m,
                    longrope={"attention_factor": af, "original": orig, "short": short, "long": long_})
    gw = unfused(read_phi3_gguf(os.path.join(d, "model.gguf"), c.num_hidden_layers), nc)
    base.check("model.gguf (numpy) vs reference.json",
               base.maxdiff([np_forward_scaled(gw, nc, p, inv, None, af) for p in prompts], lg), 1e-4)

    # Past the original context: one 80-token prompt, every position by the long factors.
    long_prompt = [int(t) for t in np.random.default_rng(2027).integers(0, base.VOCAB, size=LONG_PROMPT)]
    assert orig < LONG_PROMPT and LONG_PROMPT + gemma.GREEDY_NEW <= 256
    long_lg = base.hf_logits(m, [long_prompt])
    tokens = gemma.greedy_of(m, long_prompt)
    assert tokens is not None, "the long prompt's greedy path has a near tie"
    gemma.write_reference_with_greedy(os.path.join(d, "reference_long.json"), [long_prompt], long_lg, long_prompt, tokens)
    inv_long = base.default_inv_freq(10000.0, nc["head_dim"]) / np.array(long_)
    base.check("numpy oracle (long factors, %d positions) vs HF" % LONG_PROMPT,
               base.maxdiff([np_forward_scaled(sd, nc, long_prompt, inv_long, None, af)], long_lg), 1e-4)
    print("  (control: the short factors past the original context would be off by %.3g)"
          % base.maxdiff([np_forward_scaled(sd, nc, long_prompt, inv, None, af)], long_lg))
    base.check("model.gguf (numpy, long factors) vs reference_long.json",
               base.maxdiff([np_forward_scaled(gw, nc, long_prompt, inv_long, None, af)], long_lg), 1e-4)


def make_partial(out):
    print("phi3-partial")
    cfg = Phi3Config(vocab_size=base.VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                     original_max_position_embeddings=256, rms_norm_eps=1e-5, sliding_window=None,
                     rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
                     tie_word_embeddings=True, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    cfg.architectures = ["Phi3ForCausalLM"]
    m = base.build(Phi3ForCausalLM, cfg, seed=1013)
    d = os.path.join(out, "phi3-partial")
    base.save(m, d)
    m = base.reload_f32(Phi3ForCausalLM, d)
    c = m.config
    assert c.rope_parameters["partial_rotary_factor"] == 0.5 and c.tie_word_embeddings
    prompts = base.make_prompts(2011)
    lg = base.hf_logits(m, prompts)
    gemma.write_reference_with_greedy(os.path.join(d, "reference.json"), prompts, lg,
                                      *gemma.greedy_reference(m, prompts))
    nc = dict(base.cfg_of(c), ffn=c.intermediate_size)
    rot = nc["head_dim"] // 2
    inv = base.default_inv_freq(10000.0, rot)
    sd = unfused(base.state_np(m), nc)
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    base.check("numpy oracle (RoPE over %d of %d) vs HF" % (rot, nc["head_dim"]),
               base.maxdiff([np_forward_partial(sd, nc, p, inv, rot) for p in prompts], lg), 1e-4)
    print("  (control: RoPE over the whole head would be off by %.3g)" % base.maxdiff(
        [base.np_forward(sd, nc, p, base.default_inv_freq(10000.0, nc["head_dim"])) for p in prompts], lg))
    write_phi3_gguf(os.path.join(d, "model.gguf"), m, rope_dims=rot)
    gw = unfused(read_phi3_gguf(os.path.join(d, "model.gguf"), c.num_hidden_layers), nc)
    gw["lm_head.weight"] = gw["model.embed_tokens.weight"]
    base.check("model.gguf (numpy) vs reference.json",
               base.maxdiff([np_forward_partial(gw, nc, p, inv, rot) for p in prompts], lg), 1e-4)


if __name__ == "__main__":
    main()
