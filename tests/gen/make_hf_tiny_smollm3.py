#!/usr/bin/env python3
"""Generate the tiny random-weight SmolLM3 model of tests/data/hf-tiny/smollm3/ plus its references.

SmolLM3 (SmolLM3ForCausalLM) is a Llama decoder whose every 4th layer applies no RoPE (NoPE:
`no_rope_layers`, derived from `no_rope_layer_interval` = 4, 1 = RoPE). The tiny config has 4
layers, so layer 3 is NoPE, as in llama.cpp's smollm3 (which fixes the step at 4), and tied
embeddings, as the published model.

Writes tests/data/hf-tiny/smollm3/:
    config.json, generation_config.json, model.safetensors   save_pretrained(safe_serialization=True)
    reference.json   {"prompts", "logits", "greedy": {"prompt", "tokens"}}: transformers' logits and
                     generate(do_sample=False), as make_hf_tiny_qwen3.py writes them
    model.gguf       GGUF v3 (gguf-py GGUFWriter), arch smollm3, all F32, llama.cpp's tensor names,
                     q/k rows permuted to adjacent pairs as convert_hf_to_gguf.py's LlamaModel does
A control: the same weights with RoPE in every layer give other logits (the NoPE layer matters).

Usage:  python3 tests/gen/make_hf_tiny_smollm3.py [--out tests/data/hf-tiny]
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_hf_tiny as base  # noqa: E402

import transformers  # noqa: E402
from transformers import SmolLM3Config, SmolLM3ForCausalLM  # noqa: E402

GREEDY_NEW = 20


def write_smollm3_gguf(path, model):
    import gguf
    c = model.config
    sd = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.SMOLLM3, c.num_hidden_layers)
    w = gguf.GGUFWriter(path, "smollm3")
    w.add_name("kiln-test-smollm3-tiny")
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
    w.add_token_merges(["t 0"])
    for name, a in sd.items():
        if name == "lm_head.weight":
            continue  # tied: llama.cpp's converter writes token_embd only
        if name.endswith("q_proj.weight"):
            a = base.unpermute(a, c.num_attention_heads)
        elif name.endswith("k_proj.weight"):
            a = base.unpermute(a, c.num_key_value_heads)
        gname = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        assert gname is not None, name
        w.add_tensor(gname, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=base.DEFAULT_OUT)
    args = ap.parse_args()
    print("torch", torch.__version__, "transformers", transformers.__version__)
    cfg = SmolLM3Config(vocab_size=base.VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                        rms_norm_eps=1e-6, tie_word_embeddings=True,
                        rope_parameters={"rope_type": "default", "rope_theta": 5e4},
                        bos_token_id=None, eos_token_id=None, pad_token_id=None)
    m = base.build(SmolLM3ForCausalLM, cfg, seed=1008)
    d = os.path.join(args.out, "smollm3")
    base.save(m, d)
    m = base.reload_f32(SmolLM3ForCausalLM, d)
    assert list(m.config.no_rope_layers) == [1, 1, 1, 0], m.config.no_rope_layers
    prompts = base.make_prompts(2008)
    lg = base.hf_logits(m, prompts)

    gp = prompts[1]
    with torch.no_grad():
        out = m.generate(torch.tensor([gp]), do_sample=False, max_new_tokens=GREEDY_NEW, min_new_tokens=GREEDY_NEW,
                         pad_token_id=0)
    greedy = [int(t) for t in out[0, len(gp):]]
    full = base.hf_logits(m, [gp + greedy[:-1]])[0][len(gp) - 1:]
    top2 = np.sort(full, axis=1)[:, -2:]
    gap = float(np.min((top2[:, 1] - top2[:, 0]) / np.max(np.abs(full), axis=1)))
    assert [int(i) for i in np.argmax(full, axis=1)] == greedy
    assert gap > 1e-3, "a near tie on the greedy path"
    print("  greedy after %s: %s (smallest top-1 margin %.3g)" % (gp, greedy, gap))

    ref_path = os.path.join(d, "reference.json")
    base.write_reference(ref_path, prompts, lg)
    with open(ref_path) as f:
        text = f.read().rstrip()
    text = text[:-1] + ',\n "greedy": {"prompt": %s, "tokens": %s}}\n' % (gp, greedy)
    with open(ref_path, "w") as f:
        f.write(text)
    with open(ref_path) as f:
        assert json.load(f)["greedy"]["tokens"] == greedy

    # Control: RoPE in every layer changes the logits, so a kiln that ignored NoPE would fail.
    m.config.no_rope_layers = [1, 1, 1, 1]
    for layer in m.model.layers:
        layer.self_attn.use_rope = 1
    print("  (control: RoPE in layer 3 too would be off by %.3g)" % base.maxdiff(base.hf_logits(m, prompts), lg))
    m = base.reload_f32(SmolLM3ForCausalLM, d)
    write_smollm3_gguf(os.path.join(d, "model.gguf"), m)
    print("done")


if __name__ == "__main__":
    main()
