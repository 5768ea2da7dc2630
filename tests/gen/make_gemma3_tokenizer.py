#!/usr/bin/env python3
"""Build a small Gemma-3-style tokenizer.json with Hugging Face `tokenizers` and write its vectors.

Gemma 3's own tokenizer.json (262,144 pieces) cannot be fetched here, so this script builds one of
the same shape with the HF library itself and records what HF's code does with it:

  model            BPE, byte_fallback, fuse_unk, unk "<unk>", no dropout, ignore_merges false; the
                   pieces trained here (tokenizers' BpeTrainer on the first 60 modules of
                   /usr/lib/python3.11, Debian's /usr/share/common-licenses texts and the test strings
                   of make_tokenizer_vectors_hf.py, the 300 most frequent characters as the alphabet,
                   so that CJK and emoji mostly fall back to bytes; digits never merged, as Gemma's
                   split_digits), then merges of every two shorter "▁" runs into each run
  layout           Gemma 3's ids: <pad> 0, <eos> 1, <bos> 2, <unk> 3, <mask> 4, [multimodal] 5,
                   <unused0..98> 6..104, <start_of_turn> 105, <end_of_turn> 106, newline runs
                   (1..31) 107..137, "▁" runs (2..31) 138..167, HTML tags, the byte pieces <0x00>..<0xFF>
                   with <0x09> spelled "\\t" (as transformers' GemmaConverter writes it), the trained
                   pieces, <start_of_image> and <end_of_image> last, and <image_soft_token> as an added
                   token one past the vocabulary
  added tokens     the control tokens special (normalized false); the newline runs, "▁" runs and HTML
                   tags as transformers' SpmConverter converts SentencePiece's user-defined pieces:
                   normalized false, not special (matched in the raw text). The real file's exact
                   list of added tokens is not known here; these are the kinds it holds.
  normalizer       Replace(" " -> "▁")
  pre_tokenizer    Split(String " ", MergedWithPrevious), not inside a Sequence (a no-op after the
                   normalizer, as in the real file: no " " is left to split at)
  post_processor   TemplateProcessing "<bos> $A" (pair "<bos> $A <bos>:1 $B:1")
  decoder          Sequence[Replace("▁" -> " "), ByteFallback, Fuse]
  chat template    tests/data/chat-templates/gemma-3/template.jinja (google/gemma-3-*-it's), in
                   tokenizer_config.json with Gemma 3's special-token names

Writes
  tests/data/tokenizer-vectors/tokenizers/gemma3-style/{tokenizer.json,tokenizer_config.json}
      (built once; reused unless --rebuild)
  tests/data/tokenizer-vectors/gemma3-style.json
      make_tokenizer_vectors_hf.py's format and fields (ids, tokens, ids_with_special_tokens,
      ids_plain, decoded, decoded_skip_special, roundtrip) for its ~240 texts and the Gemma texts
      below, each cross-checked with transformers' AutoTokenizer on the folder
  tests/data/tokenizer-vectors/gemma3-style-splits.json
      the same model under pre-tokenizers that do split (a Split on "▁" MergedWithPrevious and
      MergedWithNext, on "▁▁" MergedWithPrevious): the texts that hold a space or "▁", and per
      variant its pre_tokenizer JSON and the ids of each text, from tokenizers, cross-checked with
      transformers
  tests/data/tokenizer-vectors/gemma3-style-chat.json
      conversations rendered by transformers' apply_chat_template(tokenize=False) on the folder
      ("expected") and tokenized (tokenize=True: "ids"), or the error it raised

Python strings cannot hold invalid UTF-8, so HF has no ids for it; the C++ test checks that stray
bytes between two texts add their byte pieces and nothing else.

Usage (from the repository root; no network):
  pip install tokenizers transformers jinja2
  python3 tests/gen/make_gemma3_tokenizer.py [--rebuild]
"""
import argparse
import glob
import json
import os
import sys

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_tokenizer_vectors_hf as base  # noqa: E402  (its texts, its vectors(), its output format)

REPO = base.REPO
OUT = base.OUT
FOLDER = os.path.join(base.TRAINED, "gemma3-style")
TEMPLATE = os.path.join(base.DATA, "chat-templates", "gemma-3", "template.jinja")
SPACE = base.SPACE

NEWLINE_RUNS = ["\n" * k for k in range(1, 32)]
SPACE_RUNS = [SPACE * k for k in range(2, 32)]
HTML_TAGS = ["<table>", "<caption>", "<thead>", "<tbody>", "<tfoot>", "<tr>", "<th>", "<td>",
             "</table>", "</caption>", "</thead>", "</tbody>", "</tfoot>", "</tr>", "</th>", "</td>",
             "<h1>", "<h2>", "<h3>", "<h4>", "<h5>", "<h6>", "</h1>", "</h2>", "</h3>", "</h4>", "</h5>", "</h6>",
             "<blockquote>", "</blockquote>", "<b>", "</b>", "<i>", "</i>", "<u>", "</u>", "<code>", "</code>",
             "<pre>", "</pre>", "<p>", "</p>", "<br>", "<hr>", "<li>", "</li>", "<ul>", "</ul>"]

# Texts for what is Gemma's own: its control tokens typed, tabs (a piece of their own), "▁" typed,
# newline and space runs longer than the longest piece, HTML tags, code and licence text.
GEMMA_TEXTS = [
    ("gemma", "<start_of_turn>user\nHi there!<end_of_turn>\n<start_of_turn>model\n"),
    ("gemma", "<bos><start_of_turn>system\nBe brief.<end_of_turn>\n"),
    ("gemma", " <start_of_turn> spaced <end_of_turn> "),
    ("gemma", "<bos>"),
    ("gemma", "<eos><pad><unk><mask>[multimodal]"),
    ("gemma", "<unused0> <unused42><unused98>"),
    ("gemma", "look: <start_of_image><image_soft_token><image_soft_token><end_of_image> done"),
    ("gemma", "<start_of_turn"),
    ("gemma", "<<end_of_turn>>"),
    ("gemma", "tabs\tin\t\ttext\t"),
    ("gemma", "\t"),
    ("gemma", "\t\t\t\t\t\t\t\t"),
    ("gemma", "typed \u2581 U+2581 \u2581\u2581 twice \u2581\u2581\u2581 thrice"),
    ("gemma", "\u2581leading and trailing\u2581"),
    ("gemma", "\u2581" * 40),
    ("gemma", "a" + " " * 40 + "b"),
    ("gemma", "a" + "\n" * 40 + "b"),
    ("gemma", "a\nb\n\nc\n\n\nd\n\n\n\ne"),
    ("gemma", " leading space"),
    ("gemma", "trailing space "),
    ("gemma", "  both sides  "),
    ("gemma", "\n leading newline and space"),
    ("gemma", "<table><tr><td>a</td><td>b</td></tr></table>"),
    ("gemma", "<h1>Title</h1>\n<p>Some <b>bold</b> and <code>x = 1</code>.</p>"),
    ("gemma", "<table> spaced </table>"),
    ("gemma", "def __init__(self, *args, **kwargs):\n        super().__init__(*args, **kwargs)\n        self._lock = threading.RLock()\n"),
    ("gemma", "    if not isinstance(value, (int, float)):\n        raise TypeError(f\"expected a number, got {type(value).__name__!r}\")\n"),
    ("gemma", "This program is free software; you can redistribute it and/or modify\nit under the terms of the GNU General Public License"),
    ("gemma", "Licensed under the Apache License, Version 2.0 (the \"License\");"),
    ("gemma", "1234567890 12 345 6789.01"),
    ("gemma", "\u4f60\u597d\uff0c\u4e16\u754c\uff01 \U0001F44B\U0001F30D \u3053\u3093\u306b\u3061\u306f"),
    ("gemma", "\r\n\r\n"),
]


def texts():
    seen, out = set(), []
    for cat, t in base.all_texts() + GEMMA_TEXTS:
        if t not in seen:
            seen.add(t)
            out.append((cat, t))
    return out


def training_corpus():
    lines = []
    for path in sorted(glob.glob("/usr/lib/python3.11/*.py"))[:60] + sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(path):
            lines += open(path, encoding="utf-8", errors="replace").read().split("\n")
    lines += [t for _, t in base.TEXTS]
    # The 300 most frequent characters (ties by code point, so that two runs agree: the trainer's
    # own limit_alphabet breaks ties at random); the rest are left to byte fallback.
    counts = {}
    for l in lines:
        for ch in l:
            counts[ch] = counts.get(ch, 0) + 1
    keep = set(sorted(counts, key=lambda ch: (-counts[ch], ch))[:300])
    return ["".join(ch if ch in keep else " " for ch in l) for l in lines if l]


def build():
    """The tokenizer, made with the HF library: train the pieces, lay them out as Gemma 3 does."""
    trainer_tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    # SentencePiece cuts at whitespace and (Gemma) between digits; newlines are added tokens.
    trainer_tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex("\n+"), behavior="removed"),
        pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="never", split=True),
        pre_tokenizers.Digits(individual_digits=True),
    ])
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=[], show_progress=False)
    trainer_tok.train_from_iterator(training_corpus(), trainer)
    trained = json.loads(trainer_tok.to_str())["model"]

    controls = (["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "[multimodal]"] + ["<unused%d>" % i for i in range(99)]
                + ["<start_of_turn>", "<end_of_turn>"])
    vocab = {}
    for p in controls + NEWLINE_RUNS + SPACE_RUNS + HTML_TAGS:
        vocab[p] = len(vocab)
    assert vocab["<start_of_turn>"] == 105 and vocab["\n"] == 107 and vocab[SPACE * 2] == 138
    for b in range(256):
        vocab["\t" if b == 9 else "<0x%02X>" % b] = len(vocab)
    for piece, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]):
        if piece not in vocab:
            vocab[piece] = len(vocab)
    for p in ("<start_of_image>", "<end_of_image>"):
        vocab[p] = len(vocab)
    # "▁" runs are reached by merges of every two shorter runs (first, as their SentencePiece scores
    # are high); then the trained ones.
    merges = [(SPACE * i, SPACE * (k - i)) for k in range(2, 32) for i in range(1, k)]
    merges += [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained["merges"]]
    for a, b in merges:
        assert a in vocab and b in vocab and a + b in vocab, (a, b)

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True,
                               dropout=None))
    tok.normalizer = normalizers.Replace(" ", SPACE)
    tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous", invert=False)
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", pair="<bos> $A <bos>:1 $B:1",
                                                       special_tokens=[("<bos>", vocab["<bos>"])])
    user_defined = NEWLINE_RUNS + SPACE_RUNS + HTML_TAGS
    specials = controls + ["<start_of_image>", "<end_of_image>", "<image_soft_token>"]
    added = [(vocab.get(s, len(vocab)), AddedToken(s, normalized=False, special=True)) for s in specials]
    added += [(vocab[s], AddedToken(s, normalized=False, special=False)) for s in user_defined]
    for _, a in sorted(added, key=lambda x: x[0]):
        if a.special:
            tok.add_special_tokens([a])
        else:
            tok.add_tokens([a])
    j = json.loads(tok.to_str())

    # The structure Gemma 3's file has, as the library wrote it.
    assert j["normalizer"] == {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}, j["normalizer"]
    assert j["pre_tokenizer"] == {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                                  "invert": False}, j["pre_tokenizer"]
    assert j["decoder"] == {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": SPACE}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]}
    assert j["model"]["byte_fallback"] and j["model"]["fuse_unk"] and not j["model"]["ignore_merges"]
    ids = {a["content"]: a["id"] for a in j["added_tokens"]}
    assert ids["<end_of_turn>"] == 106 and ids["<image_soft_token>"] == len(vocab), ids["<image_soft_token>"]

    config = {
        "add_bos_token": True, "add_eos_token": False,
        "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>",
        "boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>",
        "chat_template": open(TEMPLATE, encoding="utf-8").read(),
        "clean_up_tokenization_spaces": False, "model_max_length": 131072, "padding_side": "left",
        "spaces_between_special_tokens": False, "tokenizer_class": "GemmaTokenizer",
        "use_default_system_prompt": False,
    }
    os.makedirs(FOLDER, exist_ok=True)
    # One merge a line (indent=1 would spend four on each).
    merges_json = "[\n" + ",\n".join("  " + json.dumps(m, ensure_ascii=False) for m in j["model"]["merges"]) + "\n ]"
    j["model"]["merges"] = "@MERGES@"
    text = json.dumps(j, ensure_ascii=False, indent=1).replace('"@MERGES@"', merges_json)
    assert Tokenizer.from_str(text).to_str() == tok.to_str()  # loads, and is the library's tokenizer
    with open(os.path.join(FOLDER, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    with open(os.path.join(FOLDER, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("built", os.path.relpath(FOLDER, REPO), "with", len(vocab), "pieces and", len(merges), "merges")


def write_lines(path, head, key, items):
    """One item a line, for readable diffs (make_tokenizer_vectors_hf.py's layout)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(head, ensure_ascii=True)[:-1] + ', "%s": [\n' % key)
        f.write(",\n".join(json.dumps(c, ensure_ascii=True) for c in items))
        f.write("\n]}\n")


def split_variants(all_texts):
    """The texts holding a space or a "▁" (where a split can matter), once; the ids of each variant."""
    from transformers import PreTrainedTokenizerFast

    chosen = [t for _, t in all_texts if (" " in t or SPACE in t) and len(t) <= 400]
    variants = []
    for name, pre in (("split-space-piece-merged-with-previous", pre_tokenizers.Split(SPACE, "merged_with_previous")),
                      ("split-space-piece-merged-with-next", pre_tokenizers.Split(SPACE, "merged_with_next")),
                      ("split-two-space-pieces-merged-with-previous",
                       pre_tokenizers.Split(SPACE * 2, "merged_with_previous"))):
        tok = Tokenizer.from_file(os.path.join(FOLDER, "tokenizer.json"))
        tok.pre_tokenizer = pre
        hf = PreTrainedTokenizerFast(tokenizer_object=tok)
        ids = []
        for text in chosen:
            e = tok.encode(text, add_special_tokens=False).ids
            if hf.encode(text, add_special_tokens=False) != e:
                sys.exit("%s: transformers disagrees on %r" % (name, text))
            ids.append(e)
        variants.append({"name": name, "pre_tokenizer": json.loads(tok.to_str())["pre_tokenizer"], "ids": ids})
    return chosen, variants


CONVERSATIONS = [
    ("user", [{"role": "user", "content": "Hello! What's the capital of France?"}]),
    ("system-user", [{"role": "system", "content": "You are a helpful assistant. Answer briefly."},
                     {"role": "user", "content": "Write a haiku about autumn."}]),
    ("system-user-assistant-user", [
        {"role": "system", "content": "  Reply in the user's language.  "},
        {"role": "user", "content": "\u4eca\u5929\u5929\u6c14\u600e\u4e48\u6837\uff1f"},
        {"role": "assistant", "content": "\u6674\u5929\uff0c25\u00b0C \u2600\ufe0f\u3002"},
        {"role": "user", "content": "And tomorrow?  \n"}]),
    ("code-and-whitespace", [
        {"role": "user", "content": "Fix this:\n\tdef f(x):\n\t\treturn x  +  1\n\n\n\n```python\nprint(f(2))\n```"},
        {"role": "assistant", "content": "def f(x):\n    return x + 1"},
        {"role": "user", "content": "Thanks \U0001F44D   and   a <b>tag</b>."}]),
    ("content-parts", [
        {"role": "system", "content": [{"type": "text", "text": "Describe images."}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " What is this? "}]}]),
]


def chat_cases():
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(FOLDER, local_files_only=True)
    cases = []
    for name, messages in CONVERSATIONS:
        for gen in (False, True):
            text = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
            enc = hf.apply_chat_template(messages, tokenize=True, add_generation_prompt=gen)
            ids = enc["input_ids"] if hasattr(enc, "keys") else enc
            if ids != hf.encode(text, add_special_tokens=False):
                sys.exit("chat %s: tokenize=True differs from encoding the text" % name)
            cases.append({"name": name + ("-gen" if gen else ""), "messages": messages, "add_generation_prompt": gen,
                          "expected": text, "ids": ids})
    bad = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    try:
        hf.apply_chat_template(bad, tokenize=False)
        sys.exit("the template accepted two user turns in a row")
    except Exception as e:  # jinja2's TemplateError, raised by raise_exception()
        cases.append({"name": "roles-must-alternate", "messages": bad, "add_generation_prompt": False,
                      "error": {"type": type(e).__name__, "message": str(e)}})
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rebuild", action="store_true", help="train and build the tokenizer again")
    args = ap.parse_args()
    import jinja2
    import transformers

    if args.rebuild or not os.path.exists(os.path.join(FOLDER, "tokenizer.json")):
        build()
    versions = "tokenizers %s, transformers %s, jinja2 %s" % (tokenizers.__version__, transformers.__version__,
                                                              jinja2.__version__)
    rel = os.path.relpath(os.path.join(FOLDER, "tokenizer.json"), REPO)
    all_texts = texts()

    cases = base.vectors("gemma3-style", FOLDER, all_texts)
    head = {"tokenizer": rel, "generator": "tests/gen/make_gemma3_tokenizer.py with " + versions +
            " (make_tokenizer_vectors_hf.py's vectors(), cross-checked with transformers)",
            "fields": "as tests/gen/make_tokenizer_vectors_hf.py's"}
    write_lines(os.path.join(OUT, "gemma3-style.json"), head, "cases", cases)
    print("gemma3-style   %d cases, %d round-trip" % (len(cases), sum(c["roundtrip"] for c in cases)))

    chosen, variants = split_variants(all_texts)
    doc = {"tokenizer": rel, "generator": "tests/gen/make_gemma3_tokenizer.py with " + versions + ", cross-checked with "
           "transformers' PreTrainedTokenizerFast",
           "fields": {"texts": "the texts of gemma3-style.json that hold a space or a \u2581 (at most 400 characters)",
                      "variants": "per variant: the pre_tokenizer that replaces the file's, and per text "
                                  "Tokenizer.encode(text, add_special_tokens=False).ids"},
           "texts": chosen, "variants": variants}
    with open(os.path.join(OUT, "gemma3-style-splits.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps({k: v for k, v in doc.items() if k != "variants"}, ensure_ascii=True)[:-1] + ', "variants": [\n')
        f.write(",\n".join(json.dumps(v, ensure_ascii=True, separators=(",", ":")) for v in variants))
        f.write("\n]}\n")
    print("splits         %d variants x %d texts" % (len(variants), len(chosen)))

    chats = chat_cases()
    head = {"folder": os.path.relpath(FOLDER, REPO), "generator": "tests/gen/make_gemma3_tokenizer.py with " + versions,
            "fields": {"expected": "AutoTokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt)",
                       "ids": "the same with tokenize=True",
                       "error": "what apply_chat_template raised instead"}}
    write_lines(os.path.join(OUT, "gemma3-style-chat.json"), head, "cases", chats)
    print("chat           %d cases" % len(chats))


if __name__ == "__main__":
    main()
