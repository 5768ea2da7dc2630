#!/usr/bin/env python3
"""Generate tests/data/hf-tiny/minicpm/: a tiny random-weight MiniCPM (MiniCPMForCausalLM) as a Hugging Face folder and as
the GGUF llama.cpp's converter writes (arch minicpm), with llama.cpp's own logits as the reference (transformers has no
MiniCPM class without the checkpoint's remote code).

MiniCPM is Llama with three scales: the embedding times scale_emb, each residual branch (attention and MLP outputs) times
scale_depth / sqrt(num_hidden_layers), and the final norm's output divided by hidden_size / dim_model_base before the
(tied) classifier. The tiny config: 2 layers, hidden 64, 4 heads / 2 KV heads of 16, scale_emb 12, scale_depth 1.4,
dim_model_base 16 (logits input / 4), tied embeddings; the layers' weights drawn with std 0.2 (with 0.08 the scaled
embedding drowned them: every greedy path repeated its last token).

Writes tests/data/hf-tiny/minicpm/:
    config.json, model.safetensors   the weights under HF names, q/k rows for rotate-half RoPE
    model.gguf      GGUF v3, F32, arch minicpm: q/k rows permuted for adjacent-pair RoPE (as the converter's
                    LlamaModel.permute), minicpm.embedding_scale / residual_scale / logit_scale keys (logit_scale is
                    hidden_size / dim_model_base, which llama.cpp divides by), a 300-token llama vocabulary
    reference.json  llama.cpp's logits of model.gguf (tests/gen/llama_logits.c, one pass over each prompt), the prompts
                    of make_hf_tiny.py; checked here against a float64 numpy pass of the HF weights (within 1e-6)
    reference-residual-2b.json  llama.cpp's logits of model.gguf with minicpm.residual_scale set to MiniCPM-2B's
                    1.4 / sqrt(40) ("residual_scale", as float32), checked against the numpy pass
    model-<type>.gguf, reference-<type>.json  llama-quantize's Q8_0, Q4_0, Q4_K_M and Q5_0 of model.gguf, llama.cpp's logits of
                    each and a float64 numpy pass over its dequantized values ("exact")
    greedy.json     llama.cpp's greedy continuations of model.gguf (tests/gen/llama_logits.c --greedy: the prompt in one pass, then
                    a token a step): {"paths": [{"prompt", "tokens"}]}, 40 tokens after each of those prompts, each path's
                    smallest top-1 margin above 1e-3 of the largest |logit| (no near tie), each token the numpy pass's argmax

With --wide, tests/data/hf-tiny/minicpm-wide/ instead: the same model at hidden 256, intermediate 512, heads of 64
(every row a whole number of 256-element k-quant super-blocks, so that llama-quantize keeps Q4_K, Q5_K and Q6_K
tensors), only model-<type>.gguf and reference-<type>.json for its Q4_K_M, Q5_K_M and Q6_K (no F32 file, no HF folder).

Usage: python3 tests/gen/make_minicpm_llamacpp.py LLAMA_CPP_DIR [--out tests/data/hf-tiny] [--wide]
LLAMA_CPP_DIR: a llama.cpp checkout built with CMake into build/ (e.g. vendor/llama.cpp of PyPI's llama-cpp-python).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_hf_tiny as base  # noqa: E402

L, D, FF, H, KV, HD, V = 2, 64, 96, 4, 2, 16, 300
SCALE_EMB, SCALE_DEPTH, DIM_BASE, THETA, EPS = 12.0, 1.4, 16, 10000.0, 1e-5
LAYER_STD = 0.2
GREEDY_NEW = 40
STRONG_RES = 1.4 / math.sqrt(40)  # MiniCPM-2B's residual scale (40 layers): far from the tiny model's 0.99
QUANTIZED = ("Q8_0", "Q4_0", "Q4_K_M", "Q5_0")  # llama-quantize's types; a Q4_K_M of these widths holds Q5_0 and Q8_0
WIDE_QUANTIZED = ("Q4_K_M", "Q5_K_M", "Q6_K")  # at --wide's widths: the k-quant blocks themselves


def weights(seed):
    rng = np.random.default_rng(seed)
    w = {"model.embed_tokens.weight": 0.02 * rng.standard_normal((V, D)),
         "model.norm.weight": 1 + 0.1 * rng.standard_normal(D)}
    for l in range(L):
        p = "model.layers.%d." % l
        w[p + "input_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(D)
        w[p + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(D)
        for name, shape in (("self_attn.q_proj", (H * HD, D)), ("self_attn.k_proj", (KV * HD, D)),
                            ("self_attn.v_proj", (KV * HD, D)), ("self_attn.o_proj", (D, H * HD)),
                            ("mlp.gate_proj", (FF, D)), ("mlp.up_proj", (FF, D)), ("mlp.down_proj", (D, FF))):
            w[p + name + ".weight"] = LAYER_STD * rng.standard_normal(shape)
    return {k: v.astype(np.float32) for k, v in w.items()}


def np_forward(w, ids, style="half", res=SCALE_DEPTH / math.sqrt(L)):
    """MiniCPM in float64, HF layout (rotate-half RoPE), or a GGUF's (style "pairs": q/k rows permuted)."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    inv = base.default_inv_freq(THETA, HD)
    allowed = np.arange(T)[None, :] <= np.arange(T)[:, None]
    x = w["model.embed_tokens.weight"][ids] * SCALE_EMB
    for l in range(L):
        p = "model.layers.%d." % l
        h = base.rmsnorm(x, w[p + "input_layernorm.weight"], EPS)
        q = base.rope((h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, H, HD), pos, inv, style)
        k = base.rope((h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, KV, HD), pos, inv, style)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, KV, HD)
        att = np.empty((T, H, HD))
        for hh in range(H):
            sc = np.where(allowed, q[:, hh] @ k[:, hh // (H // KV)].T / math.sqrt(HD), -np.inf)
            sc = np.exp(sc - sc.max(axis=1, keepdims=True))
            att[:, hh] = (sc / sc.sum(axis=1, keepdims=True)) @ v[:, hh // (H // KV)]
        x = x + res * (att.reshape(T, H * HD) @ w[p + "self_attn.o_proj.weight"].T)
        h = base.rmsnorm(x, w[p + "post_attention_layernorm.weight"], EPS)
        g, u = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
        x = x + res * ((g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T)
    x = base.rmsnorm(x, w["model.norm.weight"], EPS) / (D / DIM_BASE)
    return x @ w["model.embed_tokens.weight"].T


def permute(a, heads):
    """convert_hf_to_gguf.py's LlamaModel.permute: rotate-half rows to adjacent pairs."""
    return a.reshape(heads, 2, a.shape[0] // heads // 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)


def write_gguf(path, w, res=SCALE_DEPTH / math.sqrt(L)):
    import gguf
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MINICPM, L)
    g = gguf.GGUFWriter(path, "minicpm")
    g.add_name("kiln-test-minicpm-tiny")
    g.add_context_length(256)
    g.add_embedding_length(D)
    g.add_block_count(L)
    g.add_feed_forward_length(FF)
    g.add_head_count(H)
    g.add_head_count_kv(KV)
    g.add_rope_dimension_count(HD)
    g.add_rope_freq_base(THETA)
    g.add_layer_norm_rms_eps(EPS)
    g.add_embedding_scale(SCALE_EMB)
    g.add_residual_scale(res)
    g.add_logit_scale(D / DIM_BASE)
    g.add_file_type(gguf.LlamaFileType.ALL_F32)
    g.add_tokenizer_model("llama")
    g.add_token_list(["<unk>", "<s>", "</s>"] + ["t%d" % i for i in range(3, V)])
    g.add_token_scores([0.0] * V)
    g.add_token_types([2, 3, 3] + [1] * (V - 3))
    g.add_bos_token_id(1)
    g.add_eos_token_id(2)
    for name, a in w.items():
        if name.endswith("q_proj.weight"):
            a = permute(a, H)
        elif name.endswith("k_proj.weight"):
            a = permute(a, KV)
        gname = tmap.get_name(name, try_suffixes=(".weight",))
        assert gname is not None, name
        g.add_tensor(gname, a)
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()


def gguf_weights(path):
    """A GGUF's tensors dequantized (gguf-py) under the HF names, q/k rows as the file holds them (adjacent pairs)."""
    import gguf
    from gguf.quants import dequantize
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MINICPM, L)
    hf_of = {tmap.get_name(n, try_suffixes=(".weight",)): n for n in weights(1013)}
    out, types = {}, {}
    for t in gguf.GGUFReader(path).tensors:
        name = hf_of[t.name]
        out[name] = dequantize(t.data, t.tensor_type).reshape([int(d) for d in reversed(t.shape)])
        types[name] = t.tensor_type.name
    assert len(out) == len(hf_of)
    return out, types


def quantized_references(llama, exe, d, f32_gguf, prompts, types=QUANTIZED):
    """model-<type>.gguf made by llama-quantize from model.gguf, and reference-<type>.json: llama.cpp's logits of it
    ("logits") and a float64 numpy pass over its dequantized values with MiniCPM's scales applied exactly ("exact"):
    what folding them into the quantized blocks is measured against."""
    for qtype in types:
        name = qtype.lower()
        path = os.path.join(d, "model-%s.gguf" % name)
        subprocess.run([os.path.join(llama, "build", "bin", "llama-quantize"), f32_gguf, path, qtype], check=True,
                       capture_output=True)
        logits = []
        for p in prompts:
            out = subprocess.run([exe, path] + [str(t) for t in p], check=True, capture_output=True, text=True).stdout
            logits.append(np.array([[float(v) for v in line.split()] for line in out.strip().split("\n")], dtype=np.float32))
        w, types = gguf_weights(path)
        exact = [np_forward(w, p, style="pairs") for p in prompts]
        print("  %s: %s; llama.cpp vs the exact pass over its values: %.3g" % (
            qtype, " ".join(sorted({"%s %s" % (n.split(".")[-2], t) for n, t in types.items()})), base.maxdiff(logits, exact)))
        ref = os.path.join(d, "reference-%s.json" % name)
        base.write_reference(ref, prompts, logits)
        with open(ref) as f:
            text = f.read().rstrip()
        assert text.endswith("]}")
        rows = ",\n".join("  [" + ",\n   ".join("[" + ", ".join(base.fmt(v) for v in row) + "]" for row in lg) + "]"
                          for lg in exact)
        with open(ref, "w") as f:
            f.write(text[:-1] + ',\n "exact": [\n' + rows + "\n ]}\n")
        with open(ref) as f:
            assert len(json.load(f)["exact"]) == len(prompts)


def logits_tool(llama, tmp):
    exe = os.path.join(tmp, "llama_logits")
    subprocess.run(["cc", "-O1", os.path.join(os.path.dirname(os.path.abspath(__file__)), "llama_logits.c"),
                    "-I" + llama + "/include", "-I" + llama + "/ggml/include", "-L" + llama + "/build/bin", "-lllama",
                    "-lm", "-Wl,-rpath," + llama + "/build/bin", "-o", exe], check=True)
    return exe


def wide(args):
    global D, FF, HD
    D, FF, HD = 256, 512, 64
    d = os.path.join(args.out, "minicpm-wide")
    os.makedirs(d, exist_ok=True)
    w = weights(1017)
    with tempfile.TemporaryDirectory() as tmp:
        exe = logits_tool(args.llama_cpp, tmp)
        f32 = os.path.join(tmp, "model.gguf")
        write_gguf(f32, w)
        quantized_references(args.llama_cpp, exe, d, f32, base.make_prompts(2013), WIDE_QUANTIZED)
    print("done")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("llama_cpp")
    ap.add_argument("--out", default=base.DEFAULT_OUT)
    ap.add_argument("--wide", action="store_true")
    args = ap.parse_args()
    if args.wide:
        wide(args)
        return
    d = os.path.join(args.out, "minicpm")
    os.makedirs(d, exist_ok=True)
    w = weights(1013)
    from safetensors.numpy import save_file
    save_file(w, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    config = {"architectures": ["MiniCPMForCausalLM"], "model_type": "minicpm", "hidden_size": D, "intermediate_size": FF,
              "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": KV, "vocab_size": V,
              "max_position_embeddings": 256, "rms_norm_eps": EPS, "rope_theta": THETA, "rope_scaling": None,
              "hidden_act": "silu", "scale_emb": SCALE_EMB, "scale_depth": SCALE_DEPTH, "dim_model_base": DIM_BASE,
              "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    gguf_path = os.path.join(d, "model.gguf")
    write_gguf(gguf_path, w)

    llama = args.llama_cpp
    with tempfile.TemporaryDirectory() as tmp:
        exe = logits_tool(llama, tmp)
        prompts = base.make_prompts(2013)
        logits = []
        for p in prompts:
            out = subprocess.run([exe, gguf_path] + [str(t) for t in p], check=True, capture_output=True, text=True).stdout
            logits.append(np.array([[float(v) for v in line.split()] for line in out.strip().split("\n")], dtype=np.float32))
        paths = []
        for p in prompts:
            out = subprocess.run([exe, gguf_path, "--greedy", str(GREEDY_NEW)] + [str(t) for t in p], check=True,
                                 capture_output=True, text=True).stdout
            rows = [line.split() for line in out.strip().split("\n")]
            tokens, margin = [int(r[0]) for r in rows], min(float(r[1]) for r in rows)
            print("  llama.cpp greedy after %s: %s (smallest top-1 margin %.3g)" % (p, tokens, margin))
            assert len(tokens) == GREEDY_NEW and margin > 1e-3, "a near tie on this path: kiln's 1e-6 agreement could flip it"
            full = np_forward(w, p + tokens[:-1])[len(p) - 1:]
            assert [int(t) for t in np.argmax(full, axis=1)] == tokens, "the numpy pass's greedy path differs"
            assert len(set(tokens)) > GREEDY_NEW // 4, "a degenerate path (%d distinct tokens)" % len(set(tokens))
            paths.append({"prompt": p, "tokens": tokens})
        quantized_references(llama, exe, d, gguf_path, prompts)
        # The same weights with MiniCPM-2B's residual scale (the GGUF key alone changed).
        strong = os.path.join(tmp, "strong.gguf")
        write_gguf(strong, w, res=STRONG_RES)
        strong_logits = []
        for p in prompts:
            out = subprocess.run([exe, strong] + [str(t) for t in p], check=True, capture_output=True, text=True).stdout
            strong_logits.append(np.array([[float(v) for v in line.split()] for line in out.strip().split("\n")], dtype=np.float32))
    base.check("llama.cpp vs the numpy pass, residual scale %.6g" % STRONG_RES,
               base.maxdiff(strong_logits, [np_forward(w, p, res=STRONG_RES) for p in prompts]), 1e-6)
    ref = os.path.join(d, "reference-residual-2b.json")
    base.write_reference(ref, prompts, strong_logits)
    with open(ref) as f:
        text = f.read().rstrip()
    with open(ref, "w") as f:
        f.write(text[:-1] + ',\n "residual_scale": %s}\n' % base.fmt(np.float32(STRONG_RES)))
    base.check("llama.cpp vs the numpy pass", base.maxdiff(logits, [np_forward(w, p) for p in prompts]), 1e-6)
    base.write_reference(os.path.join(d, "reference.json"), prompts, logits)
    with open(os.path.join(d, "greedy.json"), "w") as f:
        f.write('{"paths": [\n  %s\n]}\n' % ",\n  ".join(json.dumps(g) for g in paths))
    print("done")


if __name__ == "__main__":
    main()
