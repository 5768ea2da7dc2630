"""Constrained output, tool calling and speculative decoding in kiln serve, with the openai client.

The tiny models here write noise, so what is tested is what the grammar guarantees: a
response_format reply parses and validates against its schema, a required or named tool call is a
call to a given tool whose arguments validate against its parameters, streamed deltas add up to
the non-streamed reply, and speculation leaves greedy text unchanged. The tests at the end need
the real Qwen2.5-Coder-0.5B-Instruct GGUF (scripts/fetch-qwen.sh) and skip without it."""
import json
import os
import shutil
from pathlib import Path

import jsonschema
import openai
import pytest
import requests

from conftest import ROOT, STORIES

QWEN_TEMPLATE = (ROOT / "tests" / "data" / "chat-templates" / "qwen2.5" / "template.jinja").read_text()
QWEN_GGUF = Path(os.environ.get("KILN_QWEN05_GGUF",
                                Path.home() / ".cache/kiln/qwen/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"))

# Schemas whose every value is bounded, so that even a model writing noise ends within max_tokens.
SCHEMAS = [
    {"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}}, "required": ["color"],
     "additionalProperties": False},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 12}, "ok": {"type": "boolean"}},
     "required": ["n", "ok"], "additionalProperties": False},
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                      "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1,
                                               "maxItems": 3}},
     "required": ["name", "tags"], "additionalProperties": False},
    {"type": "object", "properties": {"point": {"type": "object", "properties": {
        "x": {"type": "integer", "minimum": -5, "maximum": 5}, "y": {"type": "integer", "minimum": 0, "maximum": 9}},
        "required": ["x", "y"], "additionalProperties": False},
        "label": {"anyOf": [{"const": "origin"}, {"type": "null"}]}},
     "required": ["point"], "additionalProperties": False},
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99}, "minItems": 2, "maxItems": 4},
]

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome", "Oslo"]},
                                                        "unit": {"enum": ["C", "F"]}},
                       "required": ["city"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "The time in a zone",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 6}},
                       "required": ["zone"], "additionalProperties": False}}},
]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


@pytest.fixture(scope="module")
def tools_model(tmp_path_factory, chat_model):
    """The tiny chat model with Qwen2.5's real template (tools in the system turn, <tool_call>)."""
    folder = tmp_path_factory.mktemp("models") / "tools-tiny-qwen2"
    shutil.copytree(chat_model, folder)
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    cfg["chat_template"] = QWEN_TEMPLATE
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    return folder


@pytest.fixture(scope="module")
def srv(start_server, chat_model, tools_model):
    return start_server("--model", f"chat={chat_model}", "--model", f"tools={tools_model}", "--parallel", "2",
                        "--threads", "2", "--ctx", "2048")


@pytest.fixture()
def cl(srv):
    return openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0, timeout=120)


def schema_format(schema):
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}


def streamed(cl, **kw):
    """A chat stream's content and its tool calls (id, name, arguments joined), and the finish reason."""
    content, calls, finish = "", {}, None
    for chunk in cl.chat.completions.create(stream=True, **kw):
        choice = chunk.choices[0]
        finish = choice.finish_reason or finish
        if choice.delta.content:
            content += choice.delta.content
        for tc in choice.delta.tool_calls or []:
            if tc.index not in calls:
                # The first delta of a call carries its id, type and name, and no arguments yet.
                assert tc.id and tc.type == "function" and tc.function.name, tc
                calls[tc.index] = {"id": tc.id, "name": tc.function.name, "arguments": tc.function.arguments or ""}
            else:
                assert tc.id is None and tc.function.name is None, tc
                calls[tc.index]["arguments"] += tc.function.arguments
    return content, [calls[i] for i in sorted(calls)], finish


@pytest.mark.parametrize("i", range(len(SCHEMAS)))
@pytest.mark.parametrize("temperature", [0, 1.0])
def test_json_schema_reply_validates(cl, i, temperature):
    r = cl.chat.completions.create(model="chat", messages=[{"role": "user", "content": "Answer in JSON."}],
                                   response_format=schema_format(SCHEMAS[i]), temperature=temperature, seed=i,
                                   max_tokens=300)
    assert r.choices[0].finish_reason == "stop", r
    jsonschema.validate(json.loads(r.choices[0].message.content), SCHEMAS[i])


def test_json_schema_on_completions_and_llama_server_grammar(srv):
    body = {"model": "chat", "prompt": "x", "temperature": 0, "max_tokens": 100,
            "response_format": schema_format(SCHEMAS[1])}
    r = requests.post(srv.base_url + "/completions", json=body).json()
    jsonschema.validate(json.loads(r["choices"][0]["text"]), SCHEMAS[1])
    body = {"model": "chat", "prompt": "x", "temperature": 1, "seed": 3, "max_tokens": 20,
            "grammar": 'root ::= "yes" | "no"'}
    r = requests.post(srv.base_url + "/completions", json=body).json()
    assert r["choices"][0]["text"] in ("yes", "no") and r["choices"][0]["finish_reason"] == "stop"


def test_json_object_is_an_object(cl):
    for seed in range(3):
        r = cl.chat.completions.create(model="chat", messages=[{"role": "user", "content": "JSON please"}],
                                       response_format={"type": "json_object"}, temperature=0.7, seed=seed,
                                       max_tokens=400)
        if r.choices[0].finish_reason == "stop":
            assert isinstance(json.loads(r.choices[0].message.content), dict)
        else:  # noise may fill max_tokens inside a string; what came is still an object's start
            assert r.choices[0].message.content.lstrip().startswith("{")


def test_json_schema_streamed_equals_non_streamed(cl):
    kw = dict(model="chat", messages=[{"role": "user", "content": "go"}], response_format=schema_format(SCHEMAS[2]),
              temperature=0, max_tokens=300)
    whole = cl.chat.completions.create(**kw).choices[0].message.content
    content, calls, finish = streamed(cl, **kw)
    assert content == whole and calls == [] and finish == "stop"


def test_unsupported_schema_keyword_is_a_400_naming_it(cl):
    for schema, keyword in [({"type": "object", "patternProperties": {"^a": {}}}, "patternProperties"),
                            ({"type": "string", "contentEncoding": "base64"}, "contentEncoding"),
                            ({"type": "object", "properties": {"a": {"not": {"type": "string"}}}}, "not")]:
        with pytest.raises(openai.BadRequestError) as e:
            cl.chat.completions.create(model="chat", messages=[{"role": "user", "content": "x"}],
                                       response_format=schema_format(schema))
        assert e.value.body["param"] == "response_format"
        assert "'" + keyword + "'" in e.value.body["message"], e.value.body


@pytest.mark.parametrize("temperature", [0, 1.0])
def test_tool_choice_required_always_calls(cl, temperature):
    for seed in range(3):
        r = cl.chat.completions.create(model="tools", messages=[{"role": "user", "content": "weather in Rome?"}],
                                       tools=TOOLS, tool_choice="required", parallel_tool_calls=False,
                                       temperature=temperature, seed=seed, max_tokens=200)
        c = r.choices[0]
        assert c.finish_reason == "tool_calls" and c.message.content is None, r
        assert len(c.message.tool_calls) == 1
        call = c.message.tool_calls[0]
        assert call.type == "function" and call.id.startswith("call_")
        jsonschema.validate(json.loads(call.function.arguments), PARAMS[call.function.name])


def test_named_tool_choice_calls_that_tool(cl):
    for name in PARAMS:
        r = cl.chat.completions.create(model="tools", messages=[{"role": "user", "content": "hi"}], tools=TOOLS,
                                       tool_choice={"type": "function", "function": {"name": name}}, temperature=0,
                                       max_tokens=200)
        calls = r.choices[0].message.tool_calls
        assert r.choices[0].finish_reason == "tool_calls" and len(calls) == 1 and calls[0].function.name == name
        jsonschema.validate(json.loads(calls[0].function.arguments), PARAMS[name])


def test_tool_calls_stream_as_openai_streams_them(cl):
    kw = dict(model="tools", messages=[{"role": "user", "content": "time?"}], tools=TOOLS,
              tool_choice={"type": "function", "function": {"name": "get_time"}}, temperature=0, max_tokens=200)
    whole = cl.chat.completions.create(**kw).choices[0].message.tool_calls
    content, calls, finish = streamed(cl, **kw)
    assert content == "" and finish == "tool_calls"
    assert [(c["name"], c["arguments"]) for c in calls] == [(c.function.name, c.function.arguments) for c in whole]
    jsonschema.validate(json.loads(calls[0]["arguments"]), PARAMS["get_time"])


def test_tools_round_trip_goes_back_into_the_template(cl, srv):
    """The call the model made and the tool's result go back; the template renders both (its prompt
    grows by them) and the model answers with text (tool_choice none)."""
    ask = [{"role": "user", "content": "weather in Oslo?"}]
    r = cl.chat.completions.create(model="tools", messages=ask, tools=TOOLS,
                                   tool_choice={"type": "function", "function": {"name": "get_weather"}},
                                   temperature=0, max_tokens=100)
    call = r.choices[0].message.tool_calls[0]
    follow = ask + [r.choices[0].message.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": call.id, "content": '{"temp": 21}'}]
    for stream in (False, True):
        body = {"model": "tools", "messages": follow, "tools": TOOLS, "temperature": 0, "max_tokens": 8,
                "tool_choice": "none", "stream": stream}
        if not stream:
            a = requests.post(srv.base_url + "/chat/completions", json=body).json()
            assert a["choices"][0]["message"]["role"] == "assistant" and "tool_calls" not in a["choices"][0]["message"]
            # The rendered prompt holds the call and the result: more tokens than the question and tools alone.
            assert a["usage"]["prompt_tokens"] > r.usage.prompt_tokens + 20
        else:
            content, calls, finish = streamed(cl, **{k: v for k, v in body.items() if k != "stream"})
            assert calls == [] and finish in ("stop", "length")
    # Without tools in the request the messages still render (a template's tool turns alone).
    a = requests.post(srv.base_url + "/chat/completions",
                      json={"model": "tools", "messages": follow, "max_tokens": 4}).json()
    assert "choices" in a, a


def test_tool_request_errors(cl, srv):
    base = {"model": "tools", "messages": [{"role": "user", "content": "x"}]}
    cases = [
        (dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}), "tool_choice"),
        (dict(tool_choice="required"), "tool_choice"),
        (dict(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
                                                                                   "patternProperties": {}}}}],
              tool_choice="required"), "tools"),
        (dict(tools=[{"type": "retrieval"}]), "tools[0].type"),
        (dict(tools=TOOLS + TOOLS[:1]), "tools[2].function.name"),
        (dict(messages=[{"role": "assistant", "tool_calls": [{"id": "1", "type": "function",
                                                              "function": {"name": "f", "arguments": "{oops"}}]}]),
         "messages[0].tool_calls[0].function.arguments"),
    ]
    for extra, param in cases:
        r = requests.post(srv.base_url + "/chat/completions", json={**base, **extra})
        assert r.status_code == 400, (extra, r.text)
        assert r.json()["error"]["param"] == param, (extra, r.text)
    r = requests.post(srv.base_url + "/completions", json={"model": "chat", "prompt": "x", "tools": TOOLS})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tools"


def test_speculative_serving_keeps_greedy_text(start_server, chat_model):
    """kiln serve --draft (here the model drafting for itself: every draft is accepted) and a
    request's prompt lookup give at temperature 0 the text plain decoding gives, streamed too."""
    plain = start_server("--model", f"stories={STORIES}", "--threads", "2", "--parallel", "1")
    spec = start_server("--model", f"stories={STORIES}", "--model", f"chat={chat_model}", "--draft", str(STORIES),
                        "--threads", "2", "--parallel", "1")
    body = {"model": "stories", "prompt": "Once upon a time, there was a cat. The cat", "temperature": 0,
            "max_tokens": 80}

    def text(server, stream=False, **extra):
        if not stream:
            r = requests.post(server.base_url + "/completions", json={**body, **extra}).json()
            return r["choices"][0]["text"], r["timings"]
        c = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        return "".join(ch.choices[0].text for ch in c.completions.create(stream=True, **body, extra_body=extra)
                       if ch.choices), None

    want, t = text(plain)
    assert "draft_n" not in t
    got, t = text(spec)
    assert got == want and t["draft_n"] > 0 and t["draft_n_accepted"] == t["draft_n"]
    assert text(spec, stream=True)[0] == want
    got, t = text(plain, lookup=2)
    assert got == want and t.get("draft_n", 0) >= 0
    assert text(plain, stream=True, lookup=2, **{"speculative.n_max": 4})[0] == want
    # The draft serves only the models of its vocabulary; the other one runs as before.
    r = requests.post(spec.base_url + "/chat/completions",
                      json={"model": "chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    assert r.status_code == 200 and "draft_n" not in r.json()["timings"]


# ---- the real Qwen2.5-Coder-0.5B-Instruct: issue 35's "done when" ------------------------------

QWEN_SCHEMAS = SCHEMAS + [
    {"type": "object", "properties": {"title": {"type": "string", "maxLength": 40},
                                      "year": {"type": "integer", "minimum": 1900, "maximum": 2030}},
     "required": ["title", "year"], "additionalProperties": False},
    {"type": "object", "properties": {"user": {"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "email": {"type": "string", "pattern": "^[a-z]+@[a-z]+\\.com$"}}, "required": ["name", "age"]}},
     "required": ["user"]},
    {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "object", "properties": {
        "sku": {"type": "string", "maxLength": 10}, "qty": {"type": "integer", "minimum": 1, "maximum": 100}},
        "required": ["sku", "qty"], "additionalProperties": False}, "minItems": 1, "maxItems": 3}},
     "required": ["items"], "additionalProperties": False},
    {"type": "object", "properties": {"status": {"enum": ["open", "closed", "pending"]},
                                      "priority": {"type": "integer", "minimum": 1, "maximum": 5},
                                      "note": {"type": "string", "maxLength": 60}},
     "required": ["status", "priority"], "additionalProperties": False},
    {"type": "object", "properties": {"date": {"type": "string", "format": "date"},
                                      "time": {"type": "string", "format": "time"}},
     "required": ["date"], "additionalProperties": False},
    {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}}, "required": ["id"]},
    {"type": "object", "properties": {"answer": {"type": "boolean"}, "confidence": {
        "type": "integer", "minimum": 0, "maximum": 100}}, "required": ["answer", "confidence"]},
    {"type": "object", "properties": {"language": {"const": "python"}, "code": {"type": "string", "maxLength": 200}},
     "required": ["language", "code"], "additionalProperties": False},
    {"type": "object", "properties": {"matrix": {"type": "array", "items": {
        "type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 2, "maxItems": 2},
        "minItems": 2, "maxItems": 2}}, "required": ["matrix"]},
    {"type": "object", "properties": {"shape": {"oneOf": [
        {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "integer", "minimum": 1,
                                                                             "maximum": 10}},
         "required": ["kind", "r"], "additionalProperties": False},
        {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "integer", "minimum": 1,
                                                                                "maximum": 10}},
         "required": ["kind", "side"], "additionalProperties": False}]}}, "required": ["shape"]},
    {"$defs": {"person": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}},
                          "required": ["name"], "additionalProperties": False}},
     "type": "object", "properties": {"author": {"$ref": "#/$defs/person"},
                                      "reviewers": {"type": "array", "items": {"$ref": "#/$defs/person"},
                                                    "maxItems": 2}},
     "required": ["author", "reviewers"], "additionalProperties": False},
    {"type": "object", "properties": {"city": {"type": "string", "minLength": 2, "maxLength": 30},
                                      "population": {"type": "integer", "minimum": 0, "maximum": 40000000},
                                      "capital": {"type": "boolean"}},
     "required": ["city", "population"], "additionalProperties": False},
    {"type": "object", "properties": {"steps": {"type": "array", "items": {"type": "string", "maxLength": 50},
                                                "minItems": 2, "maxItems": 4}}, "required": ["steps"]},
    {"type": "object", "properties": {"hex": {"type": "string", "pattern": "^#[0-9a-f]{6}$"},
                                      "name": {"type": "string", "maxLength": 20}}, "required": ["hex", "name"]},
    {"type": "object", "properties": {"ok": {"type": "null"}, "code": {"enum": [200, 404, 500]}},
     "required": ["ok", "code"], "additionalProperties": False},
]
QWEN_PROMPTS = ["Describe a color.", "Pick a number and say if it is fine.", "Name a thing with tags.",
                "Give a point on a grid.", "List a few small numbers.", "A classic film.", "A user record.",
                "An order.", "A support ticket.", "When is the meeting?", "A new id.", "Is the sky blue?",
                "Hello world in Python.", "A 2x2 matrix.", "A shape.", "A paper's people.", "A big city.",
                "How to boil an egg.", "A web color.", "An HTTP result."]

needs_qwen = pytest.mark.skipif(not QWEN_GGUF.exists(), reason="the Qwen2.5-Coder-0.5B GGUF is not here "
                                                               "(scripts/fetch-qwen.sh)")


@pytest.fixture(scope="module")
def qwen(start_server):
    return start_server("--model", f"qwen={QWEN_GGUF}", "--threads", "2", "--parallel", "1", "--ctx", "4096")


@needs_qwen
@pytest.mark.parametrize("temperature", [0, 0.8])
def test_qwen_json_schemas_validate(qwen, temperature):
    cl = openai.OpenAI(base_url=qwen.base_url, api_key="x", max_retries=0, timeout=600)
    assert len(QWEN_SCHEMAS) >= 20
    bad = []
    for i, schema in enumerate(QWEN_SCHEMAS):
        r = cl.chat.completions.create(model="qwen", messages=[{"role": "user", "content": QWEN_PROMPTS[i]}],
                                       response_format=schema_format(schema), temperature=temperature, seed=i,
                                       max_tokens=400)
        try:
            jsonschema.validate(json.loads(r.choices[0].message.content), schema)
        except (ValueError, jsonschema.ValidationError) as e:
            bad.append((i, r.choices[0].finish_reason, r.choices[0].message.content, str(e)[:200]))
    assert not bad, bad


WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
ANSWER_SYSTEM = "You are a helpful assistant. Once a tool has answered, reply to the user in one plain sentence."


def round_trip(cl, model, stream, system=None):
    """The model calls get_weather (tool_choice auto), the client sends the result back, the model
    replies; returns the second reply's (content, calls, finish) and, not streamed, its prompt's tokens."""
    msgs = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": "What is the weather like in Paris right now?"}]
    kw = dict(model=model, tools=WEATHER, temperature=0, max_tokens=200)
    if stream:
        content, calls, finish = streamed(cl, messages=msgs, **kw)
        assert finish == "tool_calls" and len(calls) >= 1, (content, calls)
        name, args, call_id = calls[0]["name"], calls[0]["arguments"], calls[0]["id"]
        assistant = {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}]}
    else:
        r = cl.chat.completions.create(messages=msgs, **kw)
        assert r.choices[0].finish_reason == "tool_calls", r
        tc = r.choices[0].message.tool_calls[0]
        name, args, call_id = tc.function.name, tc.function.arguments, tc.id
        assistant = r.choices[0].message.model_dump(exclude_none=True)
    assert name == "get_weather" and "paris" in json.loads(args)["city"].lower()
    msgs += [assistant, {"role": "tool", "tool_call_id": call_id, "content": '{"temperature_c": 18, "sky": "cloudy"}'}]
    if stream:
        return streamed(cl, messages=msgs, **kw), None
    r = cl.chat.completions.create(messages=msgs, **kw)
    m = r.choices[0]
    return (m.message.content, m.message.tool_calls or [], m.finish_reason), r.usage.prompt_tokens


@needs_qwen
@pytest.mark.parametrize("stream", [False, True])
def test_qwen_tools_round_trip(qwen, stream):
    """0.5B: the call is made and parsed (the model writes it without the <tool_call> tags), the
    result goes back through the template, and the reply that follows is well formed. (This model
    calls get_weather again rather than answering; the 1.5B below answers.)"""
    cl = openai.OpenAI(base_url=qwen.base_url, api_key="x", max_retries=0, timeout=600)
    (content, calls, finish), prompt = round_trip(cl, "qwen", stream)
    assert stream or prompt > 150  # the question, the tools, the call and its result
    assert (finish == "stop" and content) or (finish == "tool_calls" and calls), (content, calls, finish)
    # tool_choice required: a call, whatever the question.
    r = cl.chat.completions.create(model="qwen", messages=[{"role": "user", "content": "Tell me a joke."}],
                                   tools=WEATHER, tool_choice="required", temperature=0, max_tokens=200)
    assert r.choices[0].finish_reason == "tool_calls"
    json.loads(r.choices[0].message.tool_calls[0].function.arguments)


QWEN15_GGUF = QWEN_GGUF.parent / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


@pytest.mark.skipif(not QWEN15_GGUF.exists(), reason="the Qwen2.5-Coder-1.5B GGUF is not here (scripts/fetch-qwen.sh)")
@pytest.mark.parametrize("stream", [False, True])
def test_qwen15_tools_round_trip_answers(start_server, stream):
    srv = start_server("--model", f"qwen15={QWEN15_GGUF}", "--threads", "2", "--parallel", "1", "--ctx", "2048")
    cl = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0, timeout=900)
    (content, calls, finish), _ = round_trip(cl, "qwen15", stream, system=ANSWER_SYSTEM)
    assert finish == "stop" and not calls and "18" in content, (content, calls)


@pytest.mark.skipif(not (QWEN_GGUF.exists() and QWEN15_GGUF.exists()),
                    reason="the Qwen2.5-Coder GGUFs are not here (scripts/fetch-qwen.sh)")
def test_qwen_pair_draft_streams_the_plain_text(start_server):
    """kiln serve --model 1.5B --draft 0.5B: the streamed reply at temperature 0 is the reply of the
    1.5B served alone, and the draft was used."""
    plain = start_server("--model", f"q={QWEN15_GGUF}", "--threads", "2", "--parallel", "1", "--ctx", "1024")
    spec = start_server("--model", f"q={QWEN15_GGUF}", "--draft", str(QWEN_GGUF), "--threads", "2", "--parallel", "1",
                        "--ctx", "1024")
    kw = dict(model="q", messages=[{"role": "user", "content": "Write a Python function that adds two numbers."}],
              temperature=0, max_tokens=48)
    want = openai.OpenAI(base_url=plain.base_url, api_key="x", max_retries=0, timeout=900) \
        .chat.completions.create(**kw).choices[0].message.content
    plain.stop()
    cl = openai.OpenAI(base_url=spec.base_url, api_key="x", max_retries=0, timeout=900)
    content, _, _ = streamed(cl, **kw)
    assert content == want
    r = requests.post(spec.base_url + "/chat/completions", json=kw, timeout=900).json()
    assert r["choices"][0]["message"]["content"] == want and r["timings"]["draft_n"] > 0, r["timings"]
