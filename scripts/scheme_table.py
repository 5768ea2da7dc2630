#!/usr/bin/env python3
"""Regenerate the README's "What each scheme costs" tables from the current build (issue 23 row 22).

For each scheme: `kiln compile MODEL -q ... -o tmp.kiln`, its size and weights section
(`kiln inspect --json`), then `kiln ppl tmp.kiln --file TEXT` for each text; prints one Markdown
table. Python's standard library only.

    scripts/scheme_table.py --kiln build/release/kiln --model models/stories260K/stories260K.bin \
        --text tests/data/eval/tinystory.txt
    scripts/scheme_table.py --model DISTILLED/model --text DISTILLED/heldout.txt \
        --text tests/data/eval/tinystory.txt --groups        # the 3.3M model (tests/gen/make_stories_distilled.py)
"""
import argparse
import json
import os
import re
import subprocess
import tempfile

BASE = [("f32", "-q f32"), ("f16", "-q f16"), ("bf16", "-q bf16"), ("w8a16", "-q w8a16"), ("w8a8", "-q w8a8"),
        ("w4a16 g32", "-q w4a16 --group 32")]
GROUPS = [("w4a16 g64", "-q w4a16 --group 64"), ("w4a16 g128", "-q w4a16 --group 128")]
TAIL = [("w4a16 g32 asym", "-q w4a16 --asym"), ("w4a8 g32", "-q w4a8"),
        ("w4a16 g32, `--quantize-classifier`", "-q w4a16 --quantize-classifier"),
        ("w8a16, `--quantize-classifier`", "-q w8a16 --quantize-classifier")]


def run(args):
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default="build/release/kiln")
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", action="append", required=True)
    ap.add_argument("--groups", action="store_true", help="also w4a16 g64 and g128")
    args = ap.parse_args()
    rows = BASE + (GROUPS if args.groups else []) + TAIL
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "s.kiln")
        table = []
        for label, flags in rows:
            run([args.kiln, "compile", args.model, "-o", out] + flags.split())
            info = json.loads(run([args.kiln, "inspect", "--json", out]))
            weights = next(s["bytes"] for s in info["sections"] if s["kind"] == "weights")
            ppls = []
            for text in args.text:
                r = json.loads(run([args.kiln, "ppl", out, "--file", text, "--json"]))
                ppls.append((r["ppl"], r["tokens"]))
            table.append((label, os.path.getsize(out), weights, ppls))
    head = "| scheme | .kiln bytes | weight bytes |" + "".join(
        f" ppl, {os.path.basename(t)} ({n:,} tokens) | vs FP32 |" for t, (_, n) in zip(args.text, table[0][3]))
    print(head)
    print("| --- | ---: | ---: |" + " ---: | ---: |" * len(args.text))
    for label, size, weights, ppls in table:
        cells = ""
        for (p, _), (p0, _) in zip(ppls, table[0][3]):
            delta = "—" if label == "f32" else f"{100 * (p / p0 - 1):+.2f} %"
            cells += f" {p:.4f} | {delta} |"
        print(f"| {label} | {size:,} | {weights:,} |{cells}")


if __name__ == "__main__":
    main()
