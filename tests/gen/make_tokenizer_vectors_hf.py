#!/usr/bin/env python3
"""Generate byte-level and SentencePiece-style tokenizer vectors with Hugging Face's own code.

Writes tests/data/tokenizer-vectors/<name>.json for eight tokenizers:
  qwen3, gpt2        the real tokenizer.json files in tests/data/tokenizers/
  llama3-style       byte-level BPE trained here with `tokenizers`: Llama 3's exact Split regex,
                     ByteLevel(add_prefix_space=False, use_regex=False), ignore_merges=True (with
                     whole-word vocab entries that no merge reaches, so that the flag matters),
                     TemplateProcessing "<|begin_of_text|> $A", Llama 3's special tokens, and two
                     added tokens with single_word / normalized=True
  gpt4o-style        byte-level BPE trained the same way with the o200k Split regex (GGUF pre
                     "gpt-4o": Phi-4-mini, Llama 4), merges applied (no ignore_merges), "<|endoftext|>"
  tekken-style       the same with Mistral's Tekken Split regex (GGUF pre "tekken": Mistral Nemo,
                     Ministral), ignore_merges=True, "<s> $A"
  llama2-style       SentencePiece-style BPE trained here: normalizer Prepend("▁") + Replace(" ", "▁"),
                     byte_fallback, fuse_unk, decoder Replace/ByteFallback/Fuse/Strip, "<s> $A"
  mistral-style      the same model kind with a Metaspace pre-tokenizer (prepend_scheme "first",
                     split false), [INST]/[/INST] special tokens
  gemma-style        normalizer Replace(" ", "▁") only (no dummy prefix), "<bos> $A", Gemma's
                     special tokens, and an added <mask> with lstrip/rstrip
The trained tokenizers are written to tests/data/tokenizer-vectors/tokenizers/<name>/
(tokenizer.json + tokenizer_config.json) and reused on later runs (pass --retrain to train again).

Each vector file holds, per text (about 230 texts: the ~170 below plus the 60 of the shared
vectors in tests/data/tokenizers/qwen3/vectors.json):
  ids                      Tokenizer.encode(text, add_special_tokens=False).ids
  tokens                   the same encoding's .tokens (vocabulary strings)
  ids_with_special_tokens  encode(text, add_special_tokens=True).ids
  ids_plain                encode with Tokenizer.encode_special_tokens = True, add_special_tokens=False
                           (special-token strings typed in the text are plain text)
  decoded                  decode(ids, skip_special_tokens=False)
  decoded_skip_special     decode(ids, skip_special_tokens=True)
  roundtrip                decoded == text
Every field is cross-checked against transformers' AutoTokenizer on the same folder
(encode(text) with and without special tokens, decode(ids) with clean_up_tokenization_spaces=False);
the script stops if they disagree.

Usage (from the repository root; no network: every tokenizer is local):
  pip install tokenizers transformers
  python3 tests/gen/make_tokenizer_vectors_hf.py [--retrain]
"""
import argparse
import json
import os
import sys

import tokenizers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
DATA = os.path.join(REPO, "tests", "data")
OUT = os.path.join(DATA, "tokenizer-vectors")
TRAINED = os.path.join(OUT, "tokenizers")

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# The o200k (tiktoken, GPT-4o) and Tekken (Mistral) regexes, as their tokenizer.json files hold them.
GPT4O_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
               r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
               r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
TEKKEN_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
                r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
                r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPACE = "\u2581"

# (category, text). Written for kiln; every script and trick below is on purpose.
TEXTS = [
    # English
    ("english", "The quick brown fox jumps over the lazy dog."),
    ("english", "I'm sure you're right, but they've said it's theirs and we'll see."),
    ("english", "DON'T SHOUT. It'S fine. YOU'LL see, THEY'RE here, I'D go, WE'VE won."),
    ("english", "Contractions without apostrophe context: 's 't 're 've 'm 'll 'd"),
    ("english", "Typographic \u2019s and \u2019ll and \u201cquotes\u201d \u2014 dashes \u2013 and\u2026 ellipses"),
    ("english", "Long s and Kelvin: '\u017f '\u212a \u017ftraight"),
    ("english", "Hello, World! HELLO world hello WORLD"),
    ("english", "A sentence with a URL: https://example.com/path?query=1&b=2#frag and an email a.b@c.org."),
    ("english", "Markdown: **bold**, _italic_, `code`, [link](http://x.y), # Heading\n- item\n- item"),
    ("english", "Once upon a time, in a land far, far away, there lived a tiny dragon who loved tea."),
    ("english", "supercalifragilisticexpialidocious floccinaucinihilipilification"),
    ("english", "x"),
    ("english", "I"),
    ("english", "a b c d e f g h i j k l m n o p q r s t u v w x y z"),
    ("english", "hello_world and hello_worlds and Hello_world"),
    # Chinese
    ("chinese", "\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff0c\u6211\u4eec\u53bb\u516c\u56ed\u6563\u6b65\u5427\u3002"),
    ("chinese", "\u5927\u8bed\u8a00\u6a21\u578b\u5728\u8fb9\u7f18\u8bbe\u5907\u4e0a\u8fd0\u884c\u9700\u8981\u91cf\u5316\u548c\u9ad8\u6548\u7684\u63a8\u7406\u5f15\u64ce\u3002"),
    ("chinese", "\u751f\u6210\u5185\u5bb9\u4e71\u7801\u7684\u539f\u56e0\u901a\u5e38\u662f\u5206\u8bcd\u5668\u4e0d\u4e00\u81f4\u3002"),
    ("chinese", "\u300a\u7ea2\u697c\u68a6\u300b\u662f\u4e2d\u56fd\u53e4\u5178\u56db\u5927\u540d\u8457\u4e4b\u4e00\uff1b\u300a\u897f\u6e38\u8bb0\u300b\u4e5f\u662f\u3002"),
    ("chinese", "\u7b2c\u4e00\u7ae0\u3000\u5f15\u8a00\n\n\u3000\u3000\u8fd9\u662f\u4e00\u4e2a\u6bb5\u843d\u7684\u5f00\u59cb\u3002"),
    ("chinese", "\u6570\u5b571234567890\u548c\u4e2d\u6587\u6df7\u5408\uff0c\u4ef7\u683c\u00a5299.00\u5143"),
    ("chinese", "\u7e41\u9ad4\u4e2d\u6587\uff1a\u81fa\u7063\u7684\u98a8\u666f\u5f88\u7f8e\u9e97\uff0c\u6b61\u8fce\u4f86\u73a9\u3002"),
    ("chinese", "\u4f60\u597d"),
    ("chinese", "\u55ef\u55ef\u55ef\u55ef\u55ef\u55ef\u55ef\u55ef\u55ef\u55ef"),
    ("chinese", "\u9f98\u9f49\u9f7e\u9f95 \u9c7b\u7068\u9f8d \u3400\u4dbf \U00020000\U0002A6DF"),
    ("chinese", "\u4e2d\u6587\u6807\u70b9\uff1a\uff0c\u3002\u3001\uff1b\uff1a\uff1f\uff01\u2026\u2026\u2014\u2014\uff08\uff09\u3010\u3011"),
    ("chinese", "\u95ee\u9898\uff1a1+1=?\n\u7b54\u6848\uff1a2\u3002\n\u89e3\u91ca\uff1a\u56e0\u4e3a\u2026"),
    ("mixed_zh_en", "\u8fd9\u4e2amodel\u7684context length\u662f32K\uff0c\u652f\u6301function calling\u3002"),
    ("mixed_zh_en", "\u7528 `pip install tokenizers` \u5b89\u88c5\uff0c\u7136\u540e import \u5373\u53ef\u3002"),
    ("mixed_zh_en", "Qwen3\u662f\u963f\u91cc\u5df4\u5df4\u5f00\u53d1\u7684\u5927\u6a21\u578b\uff08LLM\uff09\u3002"),
    ("mixed_zh_en", "\u6e29\u5ea6\u662f25\u00b0C\uff0c\u6e7f\u5ea660%\uff0cPM2.5\u4e3a35\u03bcg/m\u00b3\u3002"),
    # Japanese
    ("japanese", "\u5f7c\u306f\u6bce\u671d\u30b3\u30fc\u30d2\u30fc\u3092\u98f2\u307f\u307e\u3059\u3002"),
    ("japanese", "\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a\u3068\u6f22\u5b57\u304c\u6df7\u3056\u3063\u305f\u6587\u7ae0\u3067\u3059\u3002"),
    ("japanese", "\uff76\uff80\uff76\uff85 \uff8a\uff9d\uff76\uff78 \uff76\uff9e\uff77\uff9e"),
    ("japanese", "\u304b\u3099\u304d\u3099 (decomposed dakuten) vs \u304c\u304e"),
    ("japanese", "\u3010\u901f\u5831\u3011\u6771\u4eac\u90fd\u3067\u521d\u96ea\u3001\u5e73\u5e74\u3088\u308a12\u65e5\u65e9\u304f"),
    ("japanese", "\u3042\u3042\u3042\u3042\u3042\u30fc\u30fc\u30fc\u30fc\uff01\uff01\uff01"),
    # Korean
    ("korean", "\ud55c\uad6d\uc5b4\ub294 \uc544\ub984\ub2e4\uc6b4 \uc5b8\uc5b4\uc785\ub2c8\ub2e4."),
    ("korean", "\uc624\ub298 \ub0a0\uc528\uac00 \uc815\ub9d0 \uc88b\ub124\uc694! \uc0b0\ucc45 \uac08\uae4c\uc694?"),
    ("korean", "\u1112\u1161\u11ab\u1100\u1173\u11af (conjoining jamo) vs \ud55c\uae00"),
    ("korean", "\u314e\u314e\u314b\u314b\u314b \u3160\u3160"),
    # Arabic and other right-to-left text
    ("arabic_rtl", "\u0627\u0644\u0644\u063a\u0629 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u062c\u0645\u064a\u0644\u0629 \u062c\u062f\u0627\u064b."),
    ("arabic_rtl", "\u0628\u0650\u0633\u0652\u0645\u0650 \u0627\u0644\u0644\u0651\u064e\u0647\u0650 \u0627\u0644\u0631\u0651\u064e\u062d\u0652\u0645\u064e\u0646\u0650"),
    ("arabic_rtl", "\u0627\u0644\u0623\u0631\u0642\u0627\u0645: \u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669 \u0648 123"),
    ("arabic_rtl", "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd, \u05de\u05d4 \u05e9\u05dc\u05d5\u05de\u05da?"),
    ("arabic_rtl", "\u0641\u0627\u0631\u0633\u06cc: \u0633\u0644\u0627\u0645 \u062f\u0646\u06cc\u0627 \u06f1\u06f2\u06f3"),
    # Emoji
    ("emoji", "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 family"),
    ("emoji", "\U0001F44D\U0001F3FD \U0001F44B\U0001F3FF \U0001F9D1\U0001F3FB\u200d\U0001F4BB"),
    ("emoji", "\U0001F1E8\U0001F1F3 \U0001F1FA\U0001F1F8 \U0001F1EF\U0001F1F5 flags"),
    ("emoji", "1\ufe0f\u20e3 #\ufe0f\u20e3 keycaps \u2764\ufe0f \u2764 \u263a\ufe0f"),
    ("emoji", "\U0001F600\U0001F603\U0001F604\U0001F601\U0001F606\U0001F605\U0001F923\U0001F602"),
    ("emoji", "I \u2764\ufe0f \U0001F355 and \U0001F680s!!! \U0001F525\U0001F525\U0001F525"),
    ("emoji", "\U0001F3F3\ufe0f\u200d\u26a7\ufe0f \U0001F469\u200d\u2764\ufe0f\u200d\U0001F48B\u200d\U0001F468"),
    ("emoji", "\u4eca\u5929\u5f88\u5f00\u5fc3\U0001F60A\uff01\U0001F389"),
    # Code with tabs
    ("code", "def f(x):\n\tif x:\n\t\treturn 1\n\treturn 0\n"),
    ("code", "int main() {\n\tfor (int i = 0; i < 10; ++i) {\n\t\tprintf(\"%d\\n\", i);\n\t}\n}"),
    ("code", "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;"),
    ("code", "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}, \"s\": \"\\u00e9\"}"),
    ("code", "<html>\n  <body class=\"main\">\n    <p>Hi &amp; bye</p>\n  </body>\n</html>"),
    ("code", "x = [i**2 for i in range(10) if i % 2 == 0]  # squares\ny=x[::-1];z={**a,**b}"),
    ("code", "const add = (a, b) => a + b;\nconsole.log(`sum: ${add(1, 2)}`);"),
    ("code", "\t\t\t\ttabs\t\tand\t spaces \t mixed"),
    ("code", "#!/bin/bash\nfor f in *.txt; do\n  echo \"$f\" | tr 'a-z' 'A-Z' > \"${f%.txt}.out\"\ndone"),
    ("code", "fn main() -> Result<(), Box<dyn Error>> { let x: u8 = 0xFF; Ok(()) }"),
    ("code", "    \n    \n        indented blank lines\n    "),
    ("code", "a==b!=c<=d>=e&&f||g<<h>>i->j::k..l...m"),
    # Whitespace runs
    ("whitespace", "a  b   c    d     e      f"),
    ("whitespace", "\n\n\n"),
    ("whitespace", "line1\n\nline2\n\n\nline3\n\n\n\nline4"),
    ("whitespace", "   leading three"),
    ("whitespace", "trailing three   "),
    ("whitespace", " \n \n "),
    ("whitespace", "spaces before newline   \nand after\n   x"),
    ("whitespace", "\r\n\r\nwindows\r\nline\r\nends\r\n"),
    ("whitespace", "\t \t \t"),
    ("whitespace", " "),
    ("whitespace", "  "),
    ("whitespace", "                                                  fifty spaces before"),
    ("whitespace", "\n" * 20),
    ("whitespace", "a\u00a0b\u00a0\u00a0c non-breaking"),
    ("whitespace", "\u3000\u3000ideographic\u3000space"),
    ("whitespace", "em\u2003space thin\u2009space hair\u200aspace narrow\u202fnbsp"),
    ("whitespace", "mongolian\u180evowel separator"),
    ("whitespace", "next\u0085line and line\u2028separator para\u2029graph"),
    ("whitespace", "info\x1cseparators\x1d\x1e\x1fhere"),
    ("whitespace", "\ufeffBOM at start"),
    ("whitespace", "vertical\x0btab and form\x0cfeed"),
    # Digits
    ("numbers", "3.14159265358979323846264338327950288419716939937510"),
    ("numbers", "1,234,567.89 and 1.234.567,89 and 1 234 567"),
    ("numbers", "2024-05-20T13:45:00Z"),
    ("numbers", "v1.2.3-rc.4+build.5"),
    ("numbers", "\uff11\uff12\uff13\uff14\uff15 fullwidth digits"),
    ("numbers", "x\u00b2 + y\u00b3 = z\u2074, H\u2082O"),
    ("numbers", "\u2160 \u2161 \u2162 \u216b roman and \u00bd \u00be \u2153 fractions"),
    ("numbers", "\u0968\u0966\u0968\u0966 \u0e51\u0e52\u0e53 \u1811 other digits"),
    ("numbers", "0x1F 0b1010 1e-9 -42 +7 007"),
    ("numbers", "12345678901234567890123456789012345678901234567890"),
    ("numbers", "1 22 333 4444 55555 666666 7777777"),
    # Accented Latin and other Latin
    ("accented_latin", "Ti\u1ebfng Vi\u1ec7t c\u00f3 nhi\u1ec1u d\u1ea5u: \u0111\u01b0\u1eddng, ng\u01b0\u1eddi, \u1edf"),
    ("accented_latin", "Za\u017c\u00f3\u0142\u0107 g\u0119\u015bl\u0105 ja\u017a\u0144"),
    ("accented_latin", "\u0130stanbul \u0131\u015f\u0131k \u011fa\u011f\u0131"),
    ("accented_latin", "Stra\u00dfe, Gr\u00fc\u00dfe, \u00e4\u00f6\u00fc \u00c4\u00d6\u00dc \u1e9e"),
    ("accented_latin", "\u00de\u00f3r\u00f0ur \u00e6\u00f8\u00e5 \u00c6\u00d8\u00c5 \u0153uvre \u0152"),
    ("accented_latin", "cafe\u0301 re\u0301sume\u0301 (decomposed)"),
    ("accented_latin", "n\u0303 a\u0308 o\u0302\u0323 stacked: a\u0301\u0302\u0303\u0304"),
    ("accented_latin", "\u01c4\u01c5\u01c6 \u01f1 \ufb01 \ufb02 ligatures"),
    ("accented_latin", "Espa\u00f1ol: \u00bfQu\u00e9 tal? \u00a1Muy bien!"),
    ("accented_latin", "\u0218\u021b\u0103 rom\u00e2n\u0103, \u010de\u0161tina, sloven\u010dina"),
    # Other scripts
    ("other_scripts", "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u042d\u0442\u043e \u0442\u0435\u0441\u0442."),
    ("other_scripts", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a\u0e22\u0e34\u0e19\u0e14\u0e35\u0e15\u0e49\u0e2d\u0e19\u0e23\u0e31\u0e1a"),
    ("other_scripts", "\u0939\u093f\u0928\u094d\u0926\u0940 \u092e\u0947\u0902 \u0915\u094d\u0937 \u0924\u094d\u0930 \u091c\u094d\u091e"),
    ("other_scripts", "\u0ba4\u0bae\u0bbf\u0bb4\u0bcd \u0c24\u0c46\u0c32\u0c41\u0c17\u0c41 \u0c95\u0ca8\u0ccd\u0ca8\u0ca1"),
    ("other_scripts", "\u0531\u0580\u0574\u0565\u0576\u056b\u0561 \u10e1\u10d0\u10e5\u10d0\u10e0\u10d7\u10d5\u10d4\u10da\u10dd \u12a0\u121b\u122d\u129b"),
    ("other_scripts", "\u1019\u103c\u1014\u103a\u1019\u102c \u1781\u17d2\u1798\u17c2\u179a \u0ea5\u0eb2\u0ea7"),
    ("other_scripts", "\u0391\u03b8\u03ae\u03bd\u03b1 \u03c3\u03bf\u03c6\u03af\u03b1 \u03a3\u03a3 \u03c2"),
    # Math and symbols
    ("symbols", "\u2211\u1d62 x\u1d62 \u2264 \u222b f(x) dx \u221a2 \u2248 1.414 \u221e \u2260 \u2205"),
    ("symbols", "\u20ac100 \u00a350 \u00a5300 \u20b9200 \u20a9500 $1.99 \u00a2"),
    ("symbols", "\u250c\u2500\u2500\u2510\n\u2502ab\u2502\n\u2514\u2500\u2500\u2518"),
    ("symbols", "\u2190\u2191\u2192\u2193 \u21d2 \u2714 \u2718 \u2605\u2606 \u266a\u266b"),
    ("symbols", "!!!!!!!!!!!!!!!!!!!!????????......,,,,;;;;"),
    ("symbols", "~`@#$%^&*()_+-={}[]|\\:\";'<>?,./"),
    ("symbols", "\u00a9 \u00ae \u2122 \u00a7 \u00b6 \u2020 \u2021 \u2030 \u00b0"),
    # Unusual UTF-8
    ("unusual_utf8", "\x00 NUL \x00\x00 inside"),
    ("unusual_utf8", "\x01\x02\x03\x7f\x1b[31mred\x1b[0m"),
    ("unusual_utf8", "\u0080\u0081\u009f C1 controls"),
    ("unusual_utf8", "\ufffd replacement \ufffe\uffff nonchars \U0010fffe"),
    ("unusual_utf8", "\u0301 lone combining mark at start"),
    ("unusual_utf8", "\u200d\u200c zwj zwnj \u2060 wj \u00ad soft\u00adhyphen"),
    ("unusual_utf8", "\U0001D400\U0001D401\U0001D402 math bold \U0001D7D8\U0001D7D9"),
    ("unusual_utf8", "\ue000\uf8ff private use \U000F0000"),
    ("unusual_utf8", "\u212b\u2126\u00c5\u03a9 singletons (Angstrom, Ohm)"),
    ("unusual_utf8", "\uf900\uf901\ufa30 compatibility ideographs"),
    ("unusual_utf8", "\u0344\u0958\u2adc composition exclusions"),
    ("unusual_utf8", "\u1e9b\u0323 and \u0071\u0307\u0323"),
    # Long words and repetition
    ("long_words", "a" * 300),
    ("long_words", "ab" * 100),
    ("long_words", "\u554a" * 100),
    ("long_words", "=" * 120),
    ("long_words", "Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch"),
    ("long_words", "Donaudampfschifffahrtselektrizit\u00e4tenhauptbetriebswerkbauunterbeamtengesellschaft"),
    ("long_words", "_" * 64 + "x"),
    ("long_words", "\U0001F600" * 40),
    # Text that spells special tokens
    ("special_tokens_in_text", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
    ("special_tokens_in_text", "<|endoftext|>"),
    ("special_tokens_in_text", "before<|endoftext|>after"),
    ("special_tokens_in_text", " <|endoftext|> spaced <|endoftext|> "),
    ("special_tokens_in_text", "<|endoftext|><|endoftext|><|endoftext|>"),
    ("special_tokens_in_text", "<<|endoftext|>>"),
    ("special_tokens_in_text", "<|endoftext|"),
    ("special_tokens_in_text", "<|im_start|><|im_end|>"),
    ("special_tokens_in_text", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"),
    ("special_tokens_in_text", "<|begin_of_text|>"),
    ("special_tokens_in_text", "<s>[INST] Hello [/INST] Hi</s>"),
    ("special_tokens_in_text", "<s>"),
    ("special_tokens_in_text", "a <s> b </s> c <unk> d"),
    ("special_tokens_in_text", "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"),
    ("special_tokens_in_text", "<think>\n\n</think>\n\nanswer"),
    ("special_tokens_in_text", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>"),
    ("special_tokens_in_text", "x<think>y</think>z"),
    ("special_tokens_in_text", "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>"),
    ("special_tokens_in_text", "user wrote <|im_end|> to inject a turn"),
    ("special_tokens_in_text", "x [word] y and x[word]y and [word]"),
    ("special_tokens_in_text", "say  <mask>  now and a<mask>b"),
    ("special_tokens_in_text", "hello_world"),
    ("special_tokens_in_text", "<|reserved_special_token_0|> <|reserved_special_token_1|>"),
    ("special_tokens_in_text", "<|IM_START|> <| im_start |> < |im_start| >"),
    # Mixed
    ("mixed", "English, \u4e2d\u6587, \u65e5\u672c\u8a9e, \ud55c\uad6d\uc5b4, \u0627\u0644\u0639\u0631\u0628\u064a\u0629, \u0420\u0443\u0441\u0441\u043a\u0438\u0439, \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac."),
    ("mixed", "Price: $12.50 (\u20ac11.30) \u2014 was $15! Save 17%."),
    ("mixed", "@user #hashtag https://t.co/abc123 RT: \"wow\" \U0001F602\U0001F602"),
    ("mixed", "Q: What's 2+2?\nA: 4.\n\nQ: \u4e3a\u4ec0\u4e48\uff1f\nA: \u56e0\u4e3a\u3002"),
    ("mixed", "C:\\Users\\name\\file.txt /usr/local/bin ~/.config"),
    ("mixed", "\u4e2d\u6587 English \u4e2d\u6587 English \u4e2d\u6587"),
    ("mixed", "a\tb\nc\rd\x0be\x0cf"),
    ("mixed", "\U0001F600 \u4e2d a 1 \u0627 \u05d0 \u0410 \u03b1 \u3042 \ud55c"),
    ("mixed", "Mr. O'Neil's 'quote' and \"double\" and `back`"),
    ("mixed", "It's 5 o'clock\u2014time for tea\u2026 or c\u00e0ph\u00ea?"),
    ("mixed", ""),
]


def shared_texts():
    v = json.load(open(os.path.join(DATA, "tokenizers", "qwen3", "vectors.json"), encoding="utf-8"))
    return [("shared:" + c["category"], c["text"]) for c in v["cases"]]


def all_texts():
    seen, out = set(), []
    for cat, t in TEXTS + shared_texts():
        if t in seen:
            continue
        seen.add(t)
        out.append((cat, t))
    return out


def training_corpus():
    lines = [t for _, t in TEXTS] + [t for _, t in shared_texts()]
    for rel in ("README.md", "tests/data/eval/tinystory.txt", "tests/gen/README.md"):
        p = os.path.join(REPO, rel)
        if os.path.exists(p):
            lines += open(p, encoding="utf-8").read().split("\n")
    return [l for l in lines if l] * 3


# ---------------------------------------------------------------------------------------------
# Building the tokenizers

def add_unmerged_words(vocab, regex):
    """Whole words that no merge sequence reaches: with ignore_merges they are taken whole."""
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    split = pre_tokenizers.Split(Regex(regex), behavior="isolated")
    words = []
    for _, t in TEXTS:
        for w, _ in split.pre_tokenize_str(t):
            if len(w) >= 8:
                mapped = "".join(x for x, _ in bl.pre_tokenize_str(w))
                if mapped not in vocab and mapped not in words:
                    words.append(mapped)
    for w in sorted(words, key=lambda s: (-len(s), s))[:40]:
        vocab[w] = len(vocab)


def train_byte_level(regex, ignore_merges):
    """A byte-level BPE with one Split regex, trained on the corpus (as tokenizer.json's dict)."""
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=3000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(training_corpus(), trainer)
    j = json.loads(tok.to_str())
    if ignore_merges:
        add_unmerged_words(j["model"]["vocab"], regex)
    return j


def train_llama3_style():
    j = train_byte_level(LLAMA3_REGEX, True)
    n = len(j["model"]["vocab"])
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
                "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_2|>", "<|eot_id|>"]
    added = []
    for i, s in enumerate(specials):
        added.append({"id": n + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True})
    added.append({"id": n + len(specials), "content": "[word]", "single_word": True, "lstrip": False, "rstrip": False,
                  "normalized": False, "special": False})
    added.append({"id": n + len(specials) + 1, "content": "hello_world", "single_word": False, "lstrip": False,
                  "rstrip": False, "normalized": True, "special": False})
    j["added_tokens"] = added
    j["normalizer"] = None
    bos = n
    j["post_processor"] = {
        "type": "Sequence",
        "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                      {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [bos], "tokens": ["<|begin_of_text|>"]}}},
        ],
    }
    config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>", "clean_up_tokenization_spaces": False,
              "model_max_length": 131072, "tokenizer_class": "PreTrainedTokenizerFast"}
    return j, config


def train_regex_style(regex, ignore_merges, specials, bos):
    """GPT-4o's or Tekken's style: train_byte_level with its specials and, with a BOS, "<bos> $A"."""
    j = train_byte_level(regex, ignore_merges)
    n = len(j["model"]["vocab"])
    j["added_tokens"] = [{"id": n + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, s in enumerate(specials)]
    j["normalizer"] = None
    processors_ = [{"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}]
    if bos is not None:
        processors_.append({
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [n + specials.index(bos)], "tokens": [bos]}}})
    j["post_processor"] = {"type": "Sequence", "processors": processors_}
    config = {"bos_token": bos, "eos_token": "</s>" if bos is not None else specials[0],
              "clean_up_tokenization_spaces": False, "model_max_length": 131072,
              "tokenizer_class": "PreTrainedTokenizerFast"}
    return j, config


def train_spm_style(style):
    # Train on Metaspace words (SentencePiece splits at whitespace too); the final file then gets
    # its own normalizer / pre-tokenizer.
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=1500, limit_alphabet=180, special_tokens=[], show_progress=False)
    tok.train_from_iterator(training_corpus(), trainer)
    j = json.loads(tok.to_str())
    trained = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
    if style == "gemma":
        specials = ["<pad>", "<eos>", "<bos>", "<unk>"]
    else:
        specials = ["<unk>", "<s>", "</s>"]
    vocab = {}
    for s in specials:
        vocab[s] = len(vocab)
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    extra_specials = {"mistral": ["[INST]", "[/INST]"], "gemma": ["<start_of_turn>", "<end_of_turn>"]}.get(style, [])
    for s in extra_specials:
        vocab[s] = len(vocab)
    if style == "gemma":
        vocab["<mask>"] = len(vocab)
    for piece, _ in trained:
        if piece not in vocab:
            vocab[piece] = len(vocab)
    added = []
    for s in specials + extra_specials:
        added.append({"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True})
    if style == "gemma":
        added.append({"id": vocab["<mask>"], "content": "<mask>", "single_word": False, "lstrip": True, "rstrip": True,
                      "normalized": False, "special": False})
    bos = "<bos>" if style == "gemma" else "<s>"
    unk = "<unk>"
    j["added_tokens"] = added
    j["model"]["vocab"] = vocab
    j["model"]["unk_token"] = unk
    j["model"]["byte_fallback"] = True
    j["model"]["fuse_unk"] = True
    j["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {bos: {"id": bos, "ids": [vocab[bos]], "tokens": [bos]}},
    }
    replace_dec = {"type": "Replace", "pattern": {"String": SPACE}, "content": " "}
    if style == "llama2":
        j["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPACE},
            {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}]}
        j["pre_tokenizer"] = None
        j["decoder"] = {"type": "Sequence", "decoders": [
            replace_dec, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    elif style == "mistral":
        j["normalizer"] = None
        j["pre_tokenizer"] = {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "first", "split": False}
        j["decoder"] = {"type": "Sequence", "decoders": [
            replace_dec, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    elif style == "gemma":
        j["normalizer"] = {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}
        j["pre_tokenizer"] = None
        j["decoder"] = {"type": "Sequence", "decoders": [replace_dec, {"type": "ByteFallback"}, {"type": "Fuse"}]}
    config = {"bos_token": bos, "eos_token": "<eos>" if style == "gemma" else "</s>", "unk_token": unk,
              "clean_up_tokenization_spaces": False, "model_max_length": 4096,
              "tokenizer_class": "PreTrainedTokenizerFast"}
    return j, config


def build_trained(name, retrain):
    folder = os.path.join(TRAINED, name)
    path = os.path.join(folder, "tokenizer.json")
    if os.path.exists(path) and not retrain:
        return folder
    if name == "llama3-style":
        j, config = train_llama3_style()
    elif name == "gpt4o-style":
        j, config = train_regex_style(GPT4O_REGEX, False, ["<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>"], None)
    elif name == "tekken-style":
        j, config = train_regex_style(TEKKEN_REGEX, True, ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"], "<s>")
    else:
        j, config = train_spm_style(name.split("-")[0])
    os.makedirs(folder, exist_ok=True)
    text = json.dumps(j, ensure_ascii=False, indent=1)
    Tokenizer.from_str(text)  # must load
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)
        f.write("\n")
    print("trained", path)
    return folder


# ---------------------------------------------------------------------------------------------
# Vectors

def vectors(name, folder, texts):
    from transformers import AutoTokenizer  # the cross-check

    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    plain = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    plain.encode_special_tokens = True
    hf = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    cases = []
    for i, (cat, text) in enumerate(texts):
        e = tok.encode(text, add_special_tokens=False)
        ids = e.ids
        with_special = tok.encode(text, add_special_tokens=True).ids
        ids_plain = plain.encode(text, add_special_tokens=False).ids
        decoded = tok.decode(ids, skip_special_tokens=False)
        decoded_skip = tok.decode(ids, skip_special_tokens=True)
        # transformers on the same folder must agree.
        t_ids = hf.encode(text, add_special_tokens=False)
        t_with = hf.encode(text)
        t_dec = hf.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if t_ids != ids or t_with != with_special or t_dec != decoded:
            sys.exit("%s: transformers disagrees with tokenizers on %r:\n %s %s\n %s %s\n %r %r"
                     % (name, text, ids, t_ids, with_special, t_with, decoded, t_dec))
        cases.append({"id": i, "category": cat, "text": text, "ids": ids, "tokens": e.tokens,
                      "ids_with_special_tokens": with_special, "ids_plain": ids_plain, "decoded": decoded,
                      "decoded_skip_special": decoded_skip, "roundtrip": decoded == text})
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--retrain", action="store_true", help="train the *-style tokenizers again")
    args = ap.parse_args()
    import transformers
    texts = all_texts()
    folders = {
        "qwen3": os.path.join(DATA, "tokenizers", "qwen3"),
        "gpt2": os.path.join(DATA, "tokenizers", "gpt2"),
    }
    for name in ("llama3-style", "gpt4o-style", "tekken-style", "llama2-style", "mistral-style", "gemma-style"):
        folders[name] = build_trained(name, args.retrain)
    for name, folder in folders.items():
        cases = vectors(name, folder, texts)
        doc = {
            "tokenizer": os.path.relpath(os.path.join(folder, "tokenizer.json"), REPO),
            "generator": "tests/gen/make_tokenizer_vectors_hf.py with tokenizers %s, cross-checked with transformers %s"
                         % (tokenizers.__version__, transformers.__version__),
            "fields": {
                "ids": "Tokenizer.encode(text, add_special_tokens=False).ids; special-token strings typed in the text are matched",
                "tokens": "the vocabulary strings of ids",
                "ids_with_special_tokens": "encode(text, add_special_tokens=True).ids",
                "ids_plain": "encode(text, add_special_tokens=False) with encode_special_tokens=True: special tokens typed "
                             "in the text are plain text (added tokens that are not special still match)",
                "decoded": "decode(ids, skip_special_tokens=False)",
                "decoded_skip_special": "decode(ids, skip_special_tokens=True)",
                "roundtrip": "decoded == text",
            },
            "cases": cases,
        }
        out = os.path.join(OUT, name + ".json")
        head = {k: v for k, v in doc.items() if k != "cases"}
        with open(out, "w", encoding="utf-8") as f:  # one case a line, for readable diffs
            f.write(json.dumps(head, ensure_ascii=True)[:-1] + ', "cases": [\n')
            f.write(",\n".join(json.dumps(c, ensure_ascii=True) for c in cases))
            f.write("\n]}\n")
        rt = sum(c["roundtrip"] for c in cases)
        print("%-14s %d cases, %d round-trip, -> %s" % (name, len(cases), rt, os.path.relpath(out, REPO)))


if __name__ == "__main__":
    main()
