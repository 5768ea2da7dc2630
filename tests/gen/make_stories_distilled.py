#!/usr/bin/env python3
"""A larger trained model that can be built here, for the scheme-cost table of the README.

Nothing this machine reaches hosts a trained model bigger than the shipped stories260K, so this
script makes one: it samples a corpus of stories from stories260K with `kiln run` (temperature 1,
one seed per story), trains a 4-layer, dim-256 Llama on it with the same 512-token tokenizer
(torch on the CPU, fixed seeds), and writes a Hugging Face folder that kiln imports as published.
The model learns stories260K's distribution, so its perplexity on held-out samples is low and
meaningful, and its matrices (256 and 768 wide) take every group size (32, 64, 128).

Usage: make_stories_distilled.py KILN_BINARY OUT_DIR [--minutes 12]
Writes OUT_DIR/model (the HF folder) and OUT_DIR/heldout.txt (samples from seeds not trained on).
Needs torch, transformers, safetensors and tokenizers (PyPI); kiln itself never does.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time

import torch
from tokenizers import Tokenizer
from transformers import LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "data", "stories260K-hf")


def sample_stories(kiln, seeds):
    out = []
    for s in seeds:
        r = subprocess.run([kiln, "run", "-n", "256", "--temp", "1.0", "--top-k", "0", "--top-p", "1",
                            "--min-p", "0", "--seed", str(s), "-p", "Once upon a time"],
                           capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL)
        out.append("Once upon a time" + r.stdout.strip())
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("out")
    ap.add_argument("--minutes", type=float, default=12.0)
    ap.add_argument("--stories", type=int, default=6000)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(2)

    train = sample_stories(a.kiln, range(1, a.stories + 1))
    heldout = sample_stories(a.kiln, range(1_000_001, 1_000_101))
    with open(os.path.join(a.out, "heldout.txt"), "w") as f:
        f.write("\n".join(heldout) + "\n")

    tok = Tokenizer.from_file(os.path.join(SRC, "tokenizer.json"))
    ids = []
    for s in train:
        ids.extend([1] + tok.encode(s, add_special_tokens=False).ids + [2])
    data = torch.tensor(ids, dtype=torch.long)
    print(f"corpus: {len(train)} stories, {len(ids)} tokens", file=sys.stderr)

    cfg = LlamaConfig(vocab_size=512, hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                      num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=512,
                      rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True,
                      bos_token_id=1, eos_token_id=2, attn_implementation="eager")
    model = LlamaForCausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.95), weight_decay=0.1)
    seq, batch = 256, 16
    g = torch.Generator().manual_seed(1)
    deadline = time.time() + a.minutes * 60
    # A cosine schedule over the time budget: the step count adapts to the machine's speed.
    step, t0 = 0, time.time()
    model.train()
    while time.time() < deadline:
        frac = (time.time() - t0) / (deadline - t0)
        for pg in opt.param_groups:
            pg["lr"] = 2e-3 * (min(1.0, step / 50) * 0.5 * (1 + math.cos(math.pi * frac)))
        starts = torch.randint(0, len(data) - seq - 1, (batch,), generator=g)
        x = torch.stack([data[s:s + seq] for s in starts])
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.3f} ({time.time() - t0:.0f} s)", file=sys.stderr)
        step += 1

    dst = os.path.join(a.out, "model")
    model.save_pretrained(dst, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(SRC, f), os.path.join(dst, f))
    with open(os.path.join(a.out, "train.json"), "w") as f:
        json.dump({"steps": step, "tokens_seen": step * batch * seq, "corpus_tokens": len(ids),
                   "final_loss": loss.item(), "parameters": sum(p.numel() for p in model.parameters())}, f)
    print(f"done: {step} steps, final loss {loss.item():.3f}", file=sys.stderr)


if __name__ == "__main__":
    main()
