#!/usr/bin/env python3
"""Generate tests/data/hf-tiny/gemma3-multimodal/: a tiny Gemma3ForConditionalGeneration checkpoint (model_type gemma3),
the layout of the published Gemma 3 4B/12B/27B: the language model's config nested under text_config, its tensors under
language_model.model.* (as the published files and transformers 5's save_pretrained name them; transformers 5 holds them as
model.language_model.* in memory), a vision tower (the tiniest SigLIP transformers
accepts) and a multimodal projector beside it, which kiln does not read.

reference.json: transformers' logits of the conditional-generation model on text alone (input_ids, no pixels), as
make_hf_tiny.py writes them, checked equal to Gemma3ForCausalLM loaded with the same language-model weights and to
make_hf_tiny_gemma3.py's numpy float64 pass. The text model: 2 layers [sliding, full], hidden 32, 2 heads / 1 KV head of 16,
query_pre_attn_scalar 16, sliding_window 4, RoPE bases 1e4 (sliding) and 1e6 (full), tied embeddings.

Usage: python3 tests/gen/make_hf_tiny_gemma3_multimodal.py [--out tests/data/hf-tiny]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_hf_tiny as base  # noqa: E402  (sets torch to 1 thread, deterministic)
import make_hf_tiny_gemma3 as g3  # noqa: E402

import transformers  # noqa: E402
from transformers import (Gemma3Config, Gemma3ForCausalLM, Gemma3ForConditionalGeneration,  # noqa: E402
                          Gemma3TextConfig, SiglipVisionConfig)

ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "default", "rope_theta": 1e6}}
LAYER_TYPES = ["sliding_attention", "full_attention"]


def text_config():
    return Gemma3TextConfig(vocab_size=base.VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                            num_attention_heads=2, num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=16,
                            sliding_window=4, layer_types=list(LAYER_TYPES), max_position_embeddings=256,
                            rms_norm_eps=1e-6, rope_parameters={k: dict(v) for k, v in ROPE.items()}, pad_token_id=0,
                            bos_token_id=2, eos_token_id=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=base.DEFAULT_OUT)
    args = ap.parse_args()
    print("torch", torch.__version__, "transformers", transformers.__version__)
    print("gemma3-multimodal")
    vision = SiglipVisionConfig(hidden_size=16, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
                                image_size=28, patch_size=14)
    cfg = Gemma3Config(text_config=text_config().to_dict(), vision_config=vision.to_dict(), mm_tokens_per_image=4,
                       image_token_index=299, boi_token_index=297, eoi_token_index=298, tie_word_embeddings=True)
    cfg.architectures = ["Gemma3ForConditionalGeneration"]
    m = base.build(Gemma3ForConditionalGeneration, cfg, seed=1011)
    g = torch.Generator().manual_seed(3011)
    with torch.no_grad():  # as make_hf_tiny_gemma3.py: norms centred on 0 (1 + w), a small tied embedding
        for name, p in m.named_parameters():
            if "language_model" in name and "norm" in name:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("language_model.embed_tokens.weight"):
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
    d = os.path.join(args.out, "gemma3-multimodal")
    base.save(m, d)
    m = base.reload_f32(Gemma3ForConditionalGeneration, d)
    from safetensors import safe_open
    with safe_open(os.path.join(d, "model.safetensors"), "pt") as f:
        names = sorted(f.keys())
    print("  tensors:", len(names), "e.g.", [n for n in names if "layers.0.self_attn.q_proj" in n or "vision" in n][:3])
    # transformers 5 writes the published checkpoints' names (in memory they are model.language_model.*).
    assert any(n.startswith("language_model.model.layers.0.") for n in names)
    assert any(n.startswith("vision_tower.") for n in names) and any(n.startswith("multi_modal_projector.") for n in names)
    print("  outside the layers:", [n for n in names if ".layers." not in n])
    prompts = base.make_prompts(2011)
    lg = base.hf_logits(m, prompts)
    base.write_reference(os.path.join(d, "reference.json"), prompts, lg)

    # The same weights as a text-only Gemma3ForCausalLM, and the numpy pass, give the same logits.
    tc = text_config()
    tc.architectures = ["Gemma3ForCausalLM"]
    t = base.build(Gemma3ForCausalLM, tc, seed=1011)
    sd = {k.replace("model.language_model.", "model."): v for k, v in m.state_dict().items()
          if k.startswith("model.language_model.") or k == "lm_head.weight"}
    t.load_state_dict(sd)
    base.check("Gemma3ForCausalLM with the language model's weights", base.maxdiff(base.hf_logits(t, prompts), lg), 1e-5)
    nc = dict(n_layers=2, n_heads=2, n_kv=1, head_dim=16, eps=1e-6, dim=32, layer_types=LAYER_TYPES, window=4,
              scale=16 ** -0.5, inv_freq_sliding=base.default_inv_freq(1e4, 16), inv_freq_full=base.default_inv_freq(1e6, 16))
    base.check("numpy oracle", base.maxdiff([g3.np_forward_gemma3(base.state_np(t), nc, p, 1.0) for p in prompts], lg), 1e-4)
    print("done")


if __name__ == "__main__":
    main()
