#!/usr/bin/env python3
"""Generate tests/data/chat-templates/<family>/{template.jinja, cases.json}.

Every expected prompt is rendered by Hugging Face transformers itself:
PreTrainedTokenizerFast.apply_chat_template(messages, tools=..., add_generation_prompt=...,
tokenize=False, **kwargs) on a tokenizer that carries the family's real chat template and
special tokens (for Qwen3, the real tokenizer folder from shared/testdata is loaded with
AutoTokenizer).  So the references include everything apply_chat_template does around Jinja:
dropping None-valued message keys, aliasing reasoning fields, passing bos_token/eos_token/...,
`tools`, `documents`, and HF's Jinja environment (sandboxed, trim_blocks, lstrip_blocks, its
tojson, raise_exception, strftime_now).  A case whose rendering raises stores the exception's
type and message instead of text.

Where the templates come from (see tests/data/chat-templates/README.md):
  - llama.cpp's models/templates/*.jinja, as shipped inside the llama-cpp-python source package
    on PyPI (`pip download --no-binary :all: --no-deps llama-cpp-python`); pass its folder with
    --templates, or let the script download and unpack the package into a temporary folder;
  - Qwen3: shared/testdata/tokenizers/qwen3/tokenizer_config.json (KILN_TESTDATA overrides the
    testdata root);
  - Gemma 3: embedded below (google/gemma-3-*-it tokenizer_config.json chat_template).

strftime_now is made deterministic by pinning the clock transformers reads (datetime.now) to
FIXED_NOW; cases that need it say so in "now".

Usage: python3 tests/gen/make_chat_templates.py [--templates DIR] [--out DIR]
"""
import argparse
import datetime as real_datetime
import glob
import json
import os
import subprocess
import sys
import tarfile
import tempfile

import jinja2
import transformers
import transformers.utils.chat_template_utils as ctu
from tokenizers import Tokenizer, models
from transformers import AutoTokenizer, PreTrainedTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "chat-templates")
SHARED = os.environ.get("KILN_TESTDATA", os.path.normpath(os.path.join(REPO, "..", "shared", "testdata")))
QWEN3_DIR = os.path.join(SHARED, "tokenizers", "qwen3")

FIXED_NOW = real_datetime.datetime(2025, 3, 15, 10, 30, 0)


class _FixedClock(real_datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return FIXED_NOW


# strftime_now() in transformers' Jinja environment calls datetime.now() through this module global.
ctu.datetime = _FixedClock

# Gemma 3's chat_template, as its tokenizer_config.json stores it (a JSON string).
GEMMA3_TEMPLATE_JSON = r'''"{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}\n    {%- if messages[0]['content'] is string -%}\n        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n    {%- else -%}\n        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}\n    {%- endif -%}\n    {%- set loop_messages = messages[1:] -%}\n{%- else -%}\n    {%- set first_user_prefix = \"\" -%}\n    {%- set loop_messages = messages -%}\n{%- endif -%}\n{%- for message in loop_messages -%}\n    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n    {%- endif -%}\n    {%- if (message['role'] == 'assistant') -%}\n        {%- set role = \"model\" -%}\n    {%- else -%}\n        {%- set role = message['role'] -%}\n    {%- endif -%}\n    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}\n    {%- if message['content'] is string -%}\n        {{ message['content'] | trim }}\n    {%- elif message['content'] is iterable -%}\n        {%- for item in message['content'] -%}\n            {%- if item['type'] == 'image' -%}\n                {{ '<start_of_image>' }}\n            {%- elif item['type'] == 'text' -%}\n                {{ item['text'] | trim }}\n            {%- endif -%}\n        {%- endfor -%}\n    {%- else -%}\n        {{ raise_exception(\"Invalid content type\") }}\n    {%- endif -%}\n    {{ '<end_of_turn>\n' }}\n{%- endfor -%}\n{%- if add_generation_prompt -%}\n    {{'<start_of_turn>model\n'}}\n{%- endif -%}\n"'''

# ---------------------------------------------------------------- conversations

SYSTEM = "You are a helpful assistant. Answer briefly and cite no sources."
U1 = "Hello! What's the capital of France?"
A1 = "  The capital of France is Paris.  \n"  # padded: templates that trim show it
U2 = "请用中文回答：巴黎有多少人口？🇫🇷 Thanks — “quotes”, 'apostrophes' & <tags>\n\tand a tab."
A2 = "Paris has about 2.1 million people (巴黎约有210万人口)."

SYS2 = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": U1}]
SYS4 = SYS2 + [{"role": "assistant", "content": A1}, {"role": "user", "content": U2}]
PLAIN2 = [{"role": "user", "content": U1}, {"role": "assistant", "content": A1}]
PLAIN4 = PLAIN2 + [{"role": "user", "content": U2}, {"role": "assistant", "content": A2}]
NOT_ALTERNATING = [{"role": "user", "content": U1}, {"role": "user", "content": U2}]
WITH_NONE = [{"role": "system", "content": SYSTEM, "name": None}, {"role": "user", "content": U1, "tool_calls": None}]

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris or 東京"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}]
TOOL_CALL = {"type": "function", "id": "call0a1b2",
             "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}
TOOL_CONV = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "What's the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
    {"role": "tool", "content": "{\"temperature\": 21, \"condition\": \"sunny\"}", "tool_call_id": "call0a1b2",
     "name": "get_weather"},
    {"role": "assistant", "content": "It is 21 °C and sunny in Paris."},
]

THINK_CONV = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": U1},
    {"role": "assistant", "content": "<think>\nThe user asks a geography question.\n</think>\n\nParis."},
    {"role": "user", "content": U2},
]
REASONING_CONV = [
    {"role": "user", "content": U1},
    {"role": "assistant", "content": "Paris.", "reasoning_content": "Easy: France's capital is Paris."},
    {"role": "user", "content": U2},
]


def basic_cases(system_ok=True):
    """2- and 4-message conversations, with and without a system prompt, with and without add_generation_prompt."""
    out = []
    for name, msgs in [("sys2", SYS2), ("sys4", SYS4), ("plain2", PLAIN2), ("plain4", PLAIN4)]:
        for agp in (False, True):
            out.append(dict(name=f"{name}{'-gen' if agp else ''}", messages=msgs, add_generation_prompt=agp))
    out.append(dict(name="none-valued-keys", messages=WITH_NONE, add_generation_prompt=True))
    return out


FAMILIES = [
    dict(name="llama-3.1", file="meta-llama-Llama-3.1-8B-Instruct.jinja",
         special={"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
         cases=basic_cases() + [
             dict(name="date-string", messages=SYS2, add_generation_prompt=True, kwargs={"date_string": "01 Jan 2025"}),
             dict(name="tools-in-user-message", messages=SYS4, tools=TOOLS, add_generation_prompt=True),
             dict(name="tools-in-system", messages=SYS2, tools=TOOLS, add_generation_prompt=True,
                  kwargs={"tools_in_user_message": False}),
             dict(name="tool-call", messages=TOOL_CONV, tools=TOOLS),
             dict(name="builtin-tools", messages=SYS2, add_generation_prompt=True,
                  kwargs={"builtin_tools": ["brave_search", "wolfram_alpha", "code_interpreter"]}),
             dict(name="two-tool-calls-error", messages=[{"role": "user", "content": U1},
                                                        {"role": "assistant", "tool_calls": [TOOL_CALL, TOOL_CALL]}]),
         ]),
    dict(name="llama-3.2", file="meta-llama-Llama-3.2-3B-Instruct.jinja",
         special={"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
         default_kwargs={"date_string": "15 Mar 2025"},
         cases=basic_cases() + [
             dict(name="strftime-now", messages=SYS2, add_generation_prompt=True, kwargs={}, now=True,
                  no_default_kwargs=True),
             dict(name="tools", messages=SYS4, tools=TOOLS, add_generation_prompt=True),
             dict(name="tool-call", messages=TOOL_CONV, tools=TOOLS),
         ]),
    dict(name="llama-3.3", file="meta-llama-Llama-3.3-70B-Instruct.jinja",
         special={"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
         cases=basic_cases() + [dict(name="tools", messages=SYS4, tools=TOOLS, add_generation_prompt=True)]),
    dict(name="qwen2.5", file="Qwen-Qwen2.5-7B-Instruct.jinja",
         special={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
         cases=basic_cases() + [
             dict(name="tools", messages=SYS4, tools=TOOLS, add_generation_prompt=True),
             dict(name="tools-no-system", messages=PLAIN2, tools=TOOLS, add_generation_prompt=True),
             dict(name="tool-call", messages=TOOL_CONV, tools=TOOLS, add_generation_prompt=True),
         ]),
    dict(name="qwen3", qwen3=True,
         cases=basic_cases() + [
             dict(name="thinking-off", messages=SYS4, add_generation_prompt=True, kwargs={"enable_thinking": False}),
             dict(name="thinking-on", messages=SYS4, add_generation_prompt=True, kwargs={"enable_thinking": True}),
             dict(name="thinking-off-no-gen", messages=SYS2, kwargs={"enable_thinking": False}),
             dict(name="think-in-history", messages=THINK_CONV, add_generation_prompt=True),
             dict(name="think-in-last-turn", messages=THINK_CONV[:3]),
             dict(name="reasoning-content", messages=REASONING_CONV, add_generation_prompt=True,
                  kwargs={"enable_thinking": False}),
             dict(name="tools", messages=SYS4, tools=TOOLS, add_generation_prompt=True),
             dict(name="tool-call", messages=TOOL_CONV, tools=TOOLS, add_generation_prompt=True,
                  kwargs={"enable_thinking": False}),
         ]),
    dict(name="mistral-nemo", file="mistralai-Mistral-Nemo-Instruct-2407.jinja",
         special={"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
         cases=basic_cases() + [
             dict(name="not-alternating-error", messages=NOT_ALTERNATING),
             dict(name="tools", messages=SYS4, tools=TOOLS, add_generation_prompt=True),
             dict(name="tool-call", messages=TOOL_CONV, tools=TOOLS),
         ]),
    dict(name="mistral-v0.2", inline="mistral-v0.2",
         special={"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
         cases=basic_cases() + [dict(name="not-alternating-error", messages=NOT_ALTERNATING)]),
    dict(name="gemma-2", file="google-gemma-2-2b-it.jinja",
         special={"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"},
         cases=basic_cases() + [dict(name="not-alternating-error", messages=NOT_ALTERNATING)]),
    dict(name="gemma-3", inline="gemma-3",
         special={"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"},
         cases=basic_cases() + [
             dict(name="not-alternating-error", messages=NOT_ALTERNATING),
             dict(name="content-parts", add_generation_prompt=True, messages=[
                 {"role": "system", "content": [{"type": "text", "text": "Describe images."}]},
                 {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "  What is this?  "}]}]),
             dict(name="invalid-content-error", messages=[{"role": "user", "content": 42}]),
         ]),
    dict(name="phi-3.5", file="microsoft-Phi-3.5-mini-instruct.jinja",
         special={"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>", "pad_token": "<|endoftext|>"},
         cases=basic_cases() + [
             dict(name="empty-system", messages=[{"role": "system", "content": ""}, {"role": "user", "content": U1}],
                  add_generation_prompt=True)]),
]

# The Mistral-7B-Instruct-v0.2 template (mistralai "v1", with a system prompt), as llama.cpp's
# tests/test-chat-template.cpp quotes it.
MISTRAL_V02_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content'] %}\n"
    "    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages %}\n{%- endif %}\n\n"
    "{{- bos_token }}\n{%- for message in loop_messages %}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n"
    "        {{- raise_exception('After the optional system message, conversation roles must alternate "
    "user/assistant/user/assistant/...') }}\n    {%- endif %}\n    {%- if message['role'] == 'user' %}\n"
    "        {%- if loop.first and system_message is defined %}\n"
    "            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}\n"
    "        {%- else %}\n            {{- ' [INST] ' + message['content'] + ' [/INST]' }}\n        {%- endif %}\n"
    "    {%- elif message['role'] == 'assistant' %}\n        {{- ' ' + message['content'] + eos_token}}\n"
    "    {%- else %}\n        {{- raise_exception('Only user and assistant roles are supported, with the exception "
    "of an initial optional system message!') }}\n    {%- endif %}\n{%- endfor %}\n")


# ---------------------------------------------------------------- semantic probes
# Small templates, each exercising a corner of Jinja2 and of Python's values, rendered with the
# same apply_chat_template call (their own chat_template) on SYS4 and llama-like special tokens.
PROBE_SPECIAL = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
PROBES = [
    ("ws-lstrip-trim", "  {% if true %}\n  x\n  {% endif %}\n  y  \n"),
    ("ws-dash", "{{- ' a ' -}}   {{ 'b' }}  \n {%- if true -%}  c  {%- endif -%} \n d"),
    ("ws-plus", "  {%+ if true %}x{% endif +%}\n y"),
    ("ws-mixed", "{%- for message in messages %}\n    {{- message.role }}\n    {% if loop.last %}\n        LAST\n    {% endif %}\n{% endfor %}\n  {{ 'tail' }}\n"),
    ("ws-var-no-lstrip", "a\n    {{ 'v' }}\n    {% if true %}b{% endif %}\n"),
    ("ws-trailing-newlines", "x\n\n"),
    ("ws-crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\r\n"),
    ("ws-unicode-space", "\u3000{% if true %}x{% endif %}\u00a0{{- 'y' }}"),
    ("comments", "a {# c #}\n b {#- c -#}  c\n  {# x #}\nd {#- x #}\n e"),
    ("raw", "{% raw %}{{ not parsed }}{% endraw %}|{%- raw -%}  {% x %}  {%- endraw -%}  |"),
    ("literals", "{{ [1, 'a', none, true, 1.5, {'k': \"it's\"}] }}|{{ (1,) }}|{{ () }}|{{ {} }}|{{ [] }}|{{ 'a' 'b' }}|{{ True }}{{ None }}"),
    ("floats", "{{ 1.0 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }} {{ 1/3 }} {{ 10/2 }} {{ 0.1 + 0.2 }} {{ 2.5e-7 }} {{ 123456789.123456789 }} {{ 1e300 * 1e300 }} {{ 1.5e300 * -1e300 }} {{ 2 ** 0.5 }}"),
    ("ints", "{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ -2 ** 2 }} {{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ true + 1 }} {{ 3 - 5 }} {{ -(-3) }} {{ +4 }}"),
    ("repeat-concat", "{{ 'ab' * 3 }} {{ 3 * 'x' }} {{ [1] * 2 }} {{ 'a' ~ 1 ~ none ~ 2.0 ~ true }} {{ 'x' * 0 }}|{{ [1] + [2, 3] }} {{ (1,) + (2,) }}"),
    ("escapes", r"""{{ 'tab\there\nnl \u00e9 \x41 \101 \q \\ \' \"' }}|{{ "\U0001F600" }}|{{ '\é' }}"""),
    ("and-or-not", "{{ true and 'x' }}|{{ 0 or '' }}|{{ [] or 'e' }}|{{ none or 0 }}|{{ 'a' and none }}|{{ not 0 }}|{{ not 'a' }}|{{ 1 and 2 or 3 }}|{{ 0 and 2 or 3 }}"),
    ("compare", "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 'a' != 'a' }} {{ 2 >= 2 }} {{ none == none }} {{ 'B' < 'a' }} {{ 'é' > 'z' }} {{ [1, 2] == [1, 2] }} {{ (1, 2) == [1, 2] }} {{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }} {{ 1 <= 1.5 }}"),
    ("in", "{{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'x' not in ['y'] }} {{ 'role' in messages[0] }} {{ 'tool_calls' in messages[0] }} {{ '' in 'abc' }} {{ (1, 2) in [(1, 2)] }} {{ x in [1] }} {{ 'a' in x }}"),
    ("ternary", "{{ 'y' if true else 'n' }}|{{ 'y' if false }}|{{ 'a' if 0 else 'b' if 1 else 'c' }}|{{ ('y' if false) is defined }}|{{ 'a' if messages else 'b' }}"),
    ("slices", "{{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ 'héllo'[::-2] }} {{ [1, 2, 3, 4][1:] }} {{ [1, 2, 3, 4][:-1] }} {{ [1, 2, 3, 4][::2] }} {{ [1, 2, 3][-1] }} {{ messages[-1].role }} {{ messages[1:]|length }} {{ range(10)[2:8:3] }} {{ range(10)[::-1] }} {{ 'abc'[5] }}|{{ [1][3] }}|{{ 'abc'[-10:10] }} {{ [1, 2, 3][5:] }} {{ (1, 2, 3)[1:] }} {{ 'abcdef'[4:1:-1] }} {{ 'abc'[:] }} {{ 'héllo'[1] }}"),
    ("access", "{{ messages[0]['role'] }} {{ messages[0].role }} {{ messages[0].get('role') }} {{ messages[0].get('nope', 'dflt') }} {{ messages[0].get('nope') }} {{ messages.0.role }} {{ messages[0]['get'] is defined }} {{ messages[0].items is defined }} {{ messages[0].nope is defined }} {{ 'abc'.upper is defined }} {{ messages[0]['content'][:8] }}"),
    ("tests", "{{ none is none }} {{ 1 is number }} {{ true is number }} {{ true is integer }} {{ 1.5 is float }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is iterable }} {{ 'a' is iterable }} {{ {} is sequence }} {{ x is defined }} {{ x is undefined }} {{ 3 is odd }} {{ 4 is even }} {{ 6 is divisibleby 3 }} {{ 6 is divisibleby(4) }} {{ 'ab' is lower }} {{ 'AB' is upper }} {{ 'A1' is upper }} {{ '1' is lower }} {{ 1 is eq 1 }} {{ 2 is gt 1 }} {{ 'a' is in 'abc' }} {{ true is true }} {{ false is false }} {{ 0 is false }} {{ true is boolean }} {{ namespace is callable }} {{ x is not defined }} {{ 1 is not none }} {{ none is sameas none }} {{ 'trim' is filter }} {{ 'odd' is test }} {{ 1 is ne 2 }} {{ 2 is ge 2 }} {{ 1 is lt 2 }} {{ 3 is le 2 }} {{ 'a' is escaped }} {{ x is iterable }} {{ x is sequence }} {{ 'a' is mapping }} {{ 1 is iterable }}"),
    ("string-filters", "{{ '  x  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'hello world'|title }}|{{ 'hello-world (foo) [bar] <b>x'|title }}|{{ 'hELLO wORLD'|capitalize }}|{{ 'abc'|upper }}|{{ 'ABC'|lower }}|{{ 'a-b-c'|replace('-', '+') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'ab'|replace('', '-') }}|{{ 'hi'|center(7) }}|{{ 'one two  three'|wordcount }}|{{ 'ÀÉÎ straße ΣΑΣ Привет'|lower }}|{{ 'àéî straße σας привет'|upper }}|{{ 'éLAN'|capitalize }}|{{ 42|trim }}|{{ 'x'|string|length }}"),
    ("collection-filters", "{{ 'héllo'|length }} {{ [1, 2]|length }} {{ {'a': 1}|length }} {{ x|length }} {{ 'ab'|list }} {{ {'a': 1, 'b': 2}|list }} {{ [1, 2, 3]|join(', ') }} {{ ['a', 'b']|join }} {{ [1, 2]|first }} {{ [1, 2]|last }} {{ 'abc'|first }} {{ 'abc'|last }} {{ []|first }}| {{ {'k': 1}|first }} {{ messages|count }} {{ (1, 2)|list }} {{ range(3)|list }} {{ messages|join(',', attribute='role') }}"),
    ("default", "{{ x|default('d') }} {{ none|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ 0|d('z', boolean=true) }} {{ x|default }}| {{ messages[0].nope|default('nd') }}"),
    ("numbers", "{{ '42'|int }} {{ ' 7 '|int }} {{ '4.9'|int }} {{ 'x'|int }} {{ 'x'|int(5) }} {{ 3.9|int }} {{ -3.9|int }} {{ '1_000'|int }} {{ 'ff'|int(base=16) }} {{ '0x1A'|int(0, 16) }} {{ '2.5'|float }} {{ 'x'|float }} {{ 3|float }} {{ ' 1e3 '|float }} {{ 1.0|string }} {{ none|string }} {{ -3|abs }} {{ -2.5|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.1|round(method='ceil') }} {{ 2.9|round(method='floor') }} {{ 5|round }} {{ 1234|round(-2) }} {{ true|int }} {{ none|int }}"),
    ("tojson", "{{ {'a': 'é\"\\n\\t\\u0001', 'b': [1, 2.0, none, true], 'c': {}}|tojson }}|{{ [1, {'x': []}, 'y']|tojson(indent=2) }}|{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ 'é😀'|tojson(ensure_ascii=true) }}|{{ {'a': 1, 'b': [2]}|tojson(separators=(',', ':')) }}|{{ '<script>&\\'\\u2028'|tojson }}|{{ messages[0]|tojson }}|{{ {'a': [1, 2]}|tojson(indent='\\t') }}|{{ {1: 'x', true: 'y', none: 'z', 2.5: 'w'}|tojson }}|{{ (1, 2)|tojson }}|{{ 1e16|tojson }} {{ 0.5|tojson }}|{{ [[]]|tojson(indent=0) }}"),
    ("items-dictsort", "{% for k, v in {'b': 1, 'a': 2}|items %}{{ k }}={{ v }};{% endfor %}|{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}{{ v }}{% endfor %}|{{ {'b': 1, 'a': 2}|dictsort }}|{{ {'B': 1, 'a': 2, 'c': 0}|dictsort(by='value', reverse=true) }}|{{ {'B': 1, 'a': 2}|dictsort }}|{{ {'B': 1, 'a': 2}|dictsort(true) }}|{{ {'a': 1}.keys()|list }}|{{ {'a': 1}.values()|list }}|{{ {'a': 1}.items() }}|{{ {'a': 1}.keys() }}|{{ x|items|list }}"),
    ("select-map", "{{ messages|selectattr('role', 'equalto', 'user')|list|length }}|{{ messages|rejectattr('role', 'eq', 'user')|map(attribute='role')|join(',') }}|{{ [1, 2, 3, 4]|select('odd')|list }}|{{ [1, 2, 3, 4]|reject('even')|list }}|{{ [0, 1, '', 2]|select|list }}|{{ ['a', 'B']|map('upper')|list }}|{{ messages|map(attribute='missing', default='-')|join }}|{{ [[1, 2], [3]]|map('length')|list }}|{{ messages|selectattr('role')|list|length }}|{{ [1, 2, 3]|select('>', 1)|list }}|{{ [{'a': {'b': 1}}, {'a': {'b': 2}}]|map(attribute='a.b')|list }}|{{ [[1, 2], [3, 4]]|map(attribute='0')|list }}|{{ ['x', 'y']|map('replace', 'x', 'z')|list }}|{{ messages|selectattr('role', 'in', ['system', 'assistant'])|map(attribute='role')|list }}|{{ [1, 2]|map('string')|join('+') }}"),
    ("sort-unique-aggregate", "{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ [3, 1, 2]|sort(reverse=true) }} {{ messages|sort(attribute='role')|map(attribute='role')|join(',') }} {{ [1, 2, 1, 'a', 'A']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }} {{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ []|max }}| {{ ['b', 'A']|min }} {{ [1, 2, 3]|sum }} {{ [1.5, 2]|sum }} {{ [1, 2, 3]|reverse|list }} {{ 'abc'|reverse }} {{ [[1], [2]]|sum(start=[]) }} {{ messages|map(attribute='content')|map('length')|sum }} {{ [{'n': 2}, {'n': 1}]|sort(attribute='n')|map(attribute='n')|list }}"),
    ("batch-indent", "{{ [1, 2, 3, 4, 5]|batch(2)|list }}|{{ [1, 2, 3]|batch(2, 0)|list }}|{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('> ', blank=true) }}|{{ 'x\\n'|indent }}"),
    ("str-methods", "{{ '  x  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ '\\n\\nhi\\n'.lstrip('\\n') }}|{{ 'hi  '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ ' a b c '.rsplit(None, 1) }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'aXbXc'.replace('X', '-') }}|{{ 'hi'.upper() }}|{{ 'HI'.lower() }}|{{ 'hello world'.title() }}|{{ \"it's 1st\".title() }}|{{ 'héllo'.find('l') }}|{{ 'hello'.rfind('l') }}|{{ 'hello'.count('l') }}|{{ '-'.join(['a', 'b']) }}|{{ 'l1\\nl2\\r\\nl3'.splitlines() }}|{{ 'ab'.capitalize() }}|{{ '42'.isdigit() }}|{{ 'a4'.isalnum() }}|{{ ' '.isspace() }}|{{ 'x'.zfill(3) }}|{{ 'x'.ljust(3) }}.|{{ 'x'.rjust(3, '*') }}|{{ 'abc'.removeprefix('a') }}|{{ 'abc'.removesuffix('c') }}|{{ '{} and {}'.format(1, 'b') }}|{{ '{name}!'.format(name='N') }}|{{ '{0}{1}{0}'.format('a', 'b') }}|{{ 'a=b=c'.partition('=') }}|{{ 'a=b=c'.rpartition('=') }}|{{ 'Hi'.swapcase() }}|{{ 'x y'.split(' ') }}"),
    ("percent-format", "{{ '%s-%d' % ('a', 3) }}|{{ '%05.2f' % 3.14159 }}|{{ '%x' % 255 }}|{{ '%s' % none }}|{{ '%(a)s' % {'a': 1} }}|{{ '%-4s|' % 'x' }}|{{ '%r' % 'x' }}|{{ '%d%%' % 50 }}|{{ 'a %s'|format('b') }}|{{ '%s and %s'|format(1, [2]) }}|{{ '%(n)s!'|format(n='kw') }}|{{ '%s' % [1, 2] }}|{{ '%s' % {'a': 1} }}|{{ '%e' % 12345.678 }}|{{ '%g' % 0.00001 }}|{{ '%5d|%-5d|%+d' % (42, 42, 42) }}|{{ '%.3s' % 'abcdef' }}|{{ '%c' % 65 }}"),
    ("loop-vars", "{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }}/{{ loop.previtem.role if loop.previtem is defined else '-' }}/{{ loop.nextitem.role if loop.nextitem else '-' }}/{{ loop.cycle('odd', 'even') }}/{{ loop.depth }}{{ loop.depth0 }};{% endfor %}{{ loop is defined }}"),
    ("for-forms", "{% for x in [] %}a{% else %}empty{% endfor %}|{% for x in [1, 2, 3, 4, 5] if x is odd %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% endfor %}|{% for x in range(10) %}{% if x == 3 %}{% break %}{% endif %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}|{% for a, b in [[1, 2], (3, 4)] %}{{ a }}{{ b }}{% endfor %}|{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}|{% for c in 'hé' %}[{{ c }}]{% endfor %}|{% for (a, b) in {'p': 1}.items() %}{{ a }}{{ b }}{% endfor %}|{% for x in [1, 2] if x > 5 %}no{% else %}filtered-empty{% endfor %}|{% for m in messages[::-1] %}{{ (messages|length - 1) - loop.index0 }}{{ m.role[0] }}{% endfor %}|{% for x in x %}u{% else %}undef-empty{% endfor %}|{% for i in range(3) %}{% for j in range(2) %}{{ i }}{{ j }}{{ loop.index }} {% endfor %}{{ loop.index }};{% endfor %}"),
    ("scoping", "{% set x = 0 %}{% for i in [1, 2, 3] %}{{ x }}{% set x = i %}{{ x }};{% endfor %}{{ x }}|{% set i = 9 %}{% for i in [1] %}{{ i }}{% endfor %}{{ i }}|{% if true %}{% set y = 5 %}{% endif %}{{ y }}|{% for a in [1] %}{% for b in [2] %}{% set a = 7 %}{{ a }}{% endfor %}{{ a }}{% endfor %}|{% for q in [1, 2] %}{% if q == 2 %}[{{ w }}]{% endif %}{% set w = q %}{% endfor %}|{% set messages = messages[1:] %}{{ messages|length }}"),
    ("namespace", "{% set ns = namespace(count=0, items=[]) %}{% for m in messages %}{% set ns.count = ns.count + 1 %}{% set ns.items = ns.items + [m.role] %}{% endfor %}{{ ns.count }} {{ ns.items }} {{ ns.missing }}|{{ ns['count'] }}|{% set n2 = namespace() %}{% set n2.a = 1 %}{{ n2.a }}|{{ ns }}|{% set n3 = namespace({'k': 'v'}, z=1) %}{{ n3.k }}{{ n3.z }}|{% set ns.count %}block{% endset %}{{ ns.count }}"),
    ("macros", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }} {{ greet() }}|{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(3) }}|{% macro v() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, 2, k=3) }}|{% macro d(a, b=a ~ '!') %}{{ b }}{% endmacro %}{{ d('x') }}|{{ greet('D')|upper }}|{{ greet is defined }}|{% macro m2() %}{{ z }}{% endmacro %}{% set z = 5 %}{{ m2() }}|{% for i in [1, 2] %}{% macro inner() %}{{ i }}{% endmacro %}{{ inner() }}{% endfor %}|{% macro setter() %}{% set hidden = 1 %}{% endmacro %}{{ setter() }}{{ hidden is defined }}"),
    ("call-block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ messages|length }}{% endcall %}|{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(x) each([1, 2]) %}[{{ x }}]{% endcall %}"),
    ("block-set-filter", "{% set block %}  A {{ 1 + 1 }}  {% endset %}[{{ block }}]|{% set t | trim | upper %}  shout  {% endset %}[{{ t }}]|{% filter upper %}quiet {{ 'words' }}{% endfilter %}|{% filter replace('a', 'o') | title %}banana {% endfilter %}"),
    ("with", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}|{{ a }}|{% with %}{% set inner = 1 %}{% endwith %}{{ inner }}"),
    ("printing", "{{ none }}|{{ true }}|{{ x }}|{{ [x] if false else 'n' }}|{{ messages[0] }}|{{ range(3) }}|{{ range(1, 10, 2) }}|{{ (1, 'a') }}|{{ {'a': (1,)} }}|{{ ['\\'', '\"', '\\'\"'] }}|{{ ['a\\nb', 'é', '\\x00\\x7f\\xa0\\u200b\\u3000\\U0001F600'] }}|{{ [1.5, -0.0, 1e100] }}|{{ {'k': none} }}|{{ [x] }}"),
    ("generation-tag", "{% generation %}A{% set q = 1 %}{% endgeneration %}{{ q is defined }}|"),
    ("markup", "{{ ('<b>'|safe) + '<i>' }}|{{ '<a>'|e }}|{{ '&'|escape|escape }}|{{ ('x'|safe) ~ '<' }}|{{ '<'|forceescape }}|{{ '<x>'|safe }}|{{ ('a'|safe) is escaped }}"),
    ("strftime", "{{ strftime_now('%Y-%m-%d %H:%M:%S %A %a %B %b %j %d %e') }}", dict(now=True)),
    ("globals", "{{ dict(a=1, b='x') }}|{{ dict([('k', 'v')]) }}|{{ dict({'a': 1}, b=2) }}|{{ range(5)|list }}|{{ range(2, 5)|list }}|{{ range(10, 0, -3)|list }}|{{ range(0)|list }}|{{ range(3)|length }}|{{ raise_exception is defined }}|{{ strftime_now is defined }}|{{ lipsum is defined }}"),
    ("kwargs-data", "{{ extra }}|{{ extra|tojson }}|{{ extra.list[1].k }}|{{ extra.n is none }}|{{ extra.big * 2 }}|{{ extra.f }}|{{ extra.u }}|{{ flag }}|{{ flag is false }}",
     dict(kwargs={"extra": {"list": [1, {"k": "v"}], "n": None, "f": 1.5, "big": 12345678901234, "u": "ü😀"}, "flag": False})),
    ("special-tokens", "{{ bos_token }}{{ eos_token }}{{ unk_token }}|{{ pad_token is defined }}|{{ add_generation_prompt }}|{{ tools }}|{{ documents }}|{{ tools is none }}|{{ tools is defined }}"),
    ("assign-forms", "{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set c = 1, 2 %}{{ c }}|{% set (d, e) = ['x', 'y'] %}{{ d }}{{ e }}|{% set f = [1, 2] %}{% set g = f + [3] %}{{ f }}{{ g }}"),
    ("undefined", "{{ x }}|{{ x|upper }}|{{ x|list }}|{{ x|trim }}|{% for a in x %}a{% endfor %}|{{ x is none }}|{{ x == x }}|{{ x ~ 'y' }}|{{ x|length }}|{{ messages[0].missing }}|{{ messages[9] }}|{{ none.attr }}|{{ x|string }}|{{ x|join }}|{{ x|first }}|{{ not x }}"),
    ("error-undefined-int", "{{ x|int }}"),
    ("undefined-reverse", "{{ x|reverse|list }}"),
    ("precedence", "{{ not true is false }}|{{ -1|abs }}|{{ (1 + 2)|string ~ 'x' }}|{{ 1 + 2 * 3 ** 2 }}|{{ 2 ** 3 ** 2 }}|{{ 10 - 2 - 3 }}|{{ messages|length is divisibleby 2 }}|{{ not 1 == 2 }}|{{ 1 if true else 2 ~ 'x' }}|{{ [1, 2, 3]|length > 2 and 'long' or 'short' }}|{{ - 2|abs }}"),
    ("real-world", "{%- set system = messages[0].content if messages[0].role == 'system' else none -%}\n{%- for m in messages -%}\n  {%- if m.role == 'user' -%}\n    {{- '<|user|>\\n' + m.content | trim + '<|end|>\\n' -}}\n  {%- elif m.role == 'assistant' -%}\n    {{- '<|assistant|>\\n' + (m.content.split('</think>')[-1] | trim) + '<|end|>\\n' -}}\n  {%- endif -%}\n{%- endfor -%}\n{{ system | default('none', true) }}"),
    ("error-add-str-int", "{{ 'a' + 1 }}"),
    ("error-concat-precedence", "{{ 'a' ~ 1 + 2 }}"),
    ("error-undefined-attr", "{{ x.y }}"),
    ("error-compare-types", "{{ 1 < 'a' }}"),
    ("error-raise", "{{ raise_exception('boom ' ~ messages|length) }}"),
    ("error-call-undefined", "{{ x() }}"),
    ("error-filter-precedence", "{{ 1 + 2|string }}"),
    ("error-tojson-undefined", "{{ x|tojson }}"),
    ("error-unpack", "{% for a, b in [[1, 2, 3]] %}{% endfor %}"),
    ("error-append", "{{ messages.append(1) }}"),
    ("error-range", "{{ range(200000)|length }}"),
    ("error-ns-underscore", "{% set ns = namespace() %}{% set ns._x = 1 %}"),
    ("error-unknown-filter", "{{ foo|frobnicate }}"),
    ("error-syntax", "{% if %}"),
    ("error-zero-division", "{{ 1 // 0 }}"),
    ("error-slice-undefined", "{{ 'abc'[x:] }}"),
    ("error-dictsort-int", "{{ 1|dictsort }}"),
    ("error-in-string", "{{ 1 in 'abc' }}"),
    ("error-unknown-test", "{{ 1 is frob }}"),
    ("error-macro-args", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
    ("error-not-callable", "{{ 'a'() }}"),
    ("error-set-attr", "{% set x = {} %}{% set x.a = 1 %}"),
    ("error-unclosed", "{% for m in messages %}"),
    ("error-endtag", "{% if true %}{% endfor %}"),
]


def probe_cases():
    tok = make_tokenizer("{{ '' }}", PROBE_SPECIAL)
    out = []
    for entry in PROBES:
        name, template = entry[0], entry[1]
        opts = entry[2] if len(entry) > 2 else {}
        case = dict(name=name, messages=SYS4, add_generation_prompt=True, kwargs=opts.get("kwargs", {}),
                    now=opts.get("now"))
        c = render(tok, case, {}, template)
        out.append({"name": name, "template": template, **{k: v for k, v in c.items() if k != "name"}})
    return tok, out


def llama_cpp_set(tdir, origin_pkg, out, gen):
    """Every other template llama.cpp ships: 8 cases each (SYS2, SYS4, PLAIN4, TOOL_CONV with tools; each with and
    without add_generation_prompt), generic special tokens, the clock pinned for strftime_now."""
    used = {f["file"] for f in FAMILIES if "file" in f}
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    convs = [("sys2", SYS2, None), ("sys4", SYS4, None), ("plain4", PLAIN4, None), ("tool", TOOL_CONV, TOOLS)]
    count = 0
    for path in sorted(glob.glob(os.path.join(tdir, "*.jinja"))):
        fname = os.path.basename(path)
        if fname in used:
            continue
        with open(path, encoding="utf-8") as f:
            template = f.read()
        tok = make_tokenizer(template, special)
        cases = [render(tok, dict(name=f"{n}{'-gen' if agp else ''}", messages=msgs, tools=tools,
                                  add_generation_prompt=agp, now=True), {})
                 for n, msgs, tools in convs for agp in (False, True)]
        folder = os.path.join(out, "llama.cpp", fname[:-len(".jinja")])
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "template.jinja"), "w", encoding="utf-8", newline="") as f:
            f.write(template)
        doc = {"family": fname[:-len(".jinja")], "template_origin": f"llama.cpp models/templates/{fname} from {origin_pkg}",
               "generator": gen, "special_tokens": tok.special_tokens_map, "cases": cases}
        with open(os.path.join(folder, "cases.json"), "w", encoding="utf-8", newline="\n") as f:
            json.dump(doc, f, ensure_ascii=False)
            f.write("\n")
        count += len(cases)
    return count


def fetch_templates(tmp):
    """Download llama-cpp-python's source package and return its models/templates folder."""
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
                    "-d", tmp, "llama-cpp-python"], check=True)
    sdist = glob.glob(os.path.join(tmp, "llama_cpp_python-*.tar.gz"))[0]
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if "/vendor/llama.cpp/models/templates/" in m.name]
        tar.extractall(tmp, members=members, filter="data")
    return glob.glob(os.path.join(tmp, "llama_cpp_python-*", "vendor", "llama.cpp", "models", "templates"))[0], \
        os.path.basename(sdist)


def make_tokenizer(template, special):
    tok = Tokenizer(models.WordLevel({"<unk-placeholder>": 0}, unk_token="<unk-placeholder>"))
    return PreTrainedTokenizerFast(tokenizer_object=tok, chat_template=template, **special)


def render(tok, case, default_kwargs, template=None):
    kwargs = {} if case.get("no_default_kwargs") else dict(default_kwargs)
    kwargs.update(case.get("kwargs", {}))
    out = {"name": case["name"], "messages": case["messages"], "tools": case.get("tools"),
           "add_generation_prompt": case.get("add_generation_prompt", False), "kwargs": kwargs,
           "now": FIXED_NOW.isoformat() if case.get("now") else None}
    try:
        extra = {"chat_template": template} if template is not None else {}
        text = tok.apply_chat_template(json.loads(json.dumps(case["messages"])), tools=case.get("tools"),
                                       add_generation_prompt=out["add_generation_prompt"], tokenize=False, **extra,
                                       **kwargs)
        out["expected"] = text
    except Exception as e:  # the reference is the error itself
        out["error"] = {"type": type(e).__name__, "message": str(e)}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--templates", help="llama.cpp models/templates folder (default: download llama-cpp-python)")
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    origin_pkg = "llama-cpp-python (models/templates)"
    tdir = args.templates
    if tdir is None:
        tdir, origin_pkg = fetch_templates(tmp)
    gen = {"transformers": transformers.__version__, "jinja2": jinja2.__version__}
    total = 0
    for fam in FAMILIES:
        if fam.get("qwen3"):
            tok = AutoTokenizer.from_pretrained(QWEN3_DIR)
            template = tok.chat_template
            origin = "shared/testdata/tokenizers/qwen3/tokenizer_config.json (Qwen/Qwen3, Apache-2.0)"
        else:
            if "file" in fam:
                with open(os.path.join(tdir, fam["file"]), encoding="utf-8") as f:
                    template = f.read()
                origin = f"llama.cpp models/templates/{fam['file']} from {origin_pkg}"
            elif fam["inline"] == "gemma-3":
                template = json.loads(GEMMA3_TEMPLATE_JSON)
                origin = "google/gemma-3-*-it tokenizer_config.json chat_template"
            else:
                template = MISTRAL_V02_TEMPLATE
                origin = "mistralai/Mistral-7B-Instruct-v0.2 template as quoted in llama.cpp tests/test-chat-template.cpp"
            tok = make_tokenizer(template, fam["special"])
        cases = [render(tok, c, fam.get("default_kwargs", {})) for c in fam["cases"]]
        folder = os.path.join(args.out, fam["name"])
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "template.jinja"), "w", encoding="utf-8", newline="") as f:
            f.write(template)
        doc = {"family": fam["name"], "template_origin": origin, "generator": gen,
               "special_tokens": tok.special_tokens_map, "cases": cases}
        with open(os.path.join(folder, "cases.json"), "w", encoding="utf-8", newline="\n") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)
            f.write("\n")
        errors = sum(1 for c in cases if "error" in c)
        total += len(cases)
        print(f"{fam['name']:14s} {len(cases):3d} cases ({errors} expected errors)")
    tok, cases = probe_cases()
    folder = os.path.join(args.out, "semantics")
    os.makedirs(folder, exist_ok=True)
    doc = {"family": "semantics", "template_origin": "written for kiln's tests (each case holds its template)",
           "generator": gen, "special_tokens": tok.special_tokens_map, "cases": cases}
    with open(os.path.join(folder, "cases.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum(1 for c in cases if "error" in c)
    print(f"{'semantics':14s} {len(cases):3d} probes ({errors} expected errors)")
    print(f"total {total} family cases")
    n = llama_cpp_set(tdir, origin_pkg, args.out, gen)
    print(f"llama.cpp set: {n} cases")


if __name__ == "__main__":
    main()
