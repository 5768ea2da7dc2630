"""Sampling penalties through kiln serve: OpenAI's frequency_penalty and presence_penalty, llama.cpp
server's repeat_penalty and repeat_last_n; each reaches the sampler (greedy text changes, and equals
kiln run's with the same flag) and each value out of range is a 400 naming the field."""
import openai
import pytest
import requests

from conftest import STORIES, kiln_cli

# The issue's prompt; at temperature 0 stories260K continues it with a story in which "He liked to
# play with his toys" comes back, so a penalty on what was generated changes the text.
ONES = "1, 1, 1, 1, 1,"


def run_text(*flags):
    return kiln_cli("run", str(STORIES), "-p", ONES, "-n", "40", "--temp", "0", *flags)


def complete(client, **kw):
    return client.completions.create(model="stories260K", prompt=ONES, max_tokens=40, temperature=0,
                                     **kw).choices[0].text


def test_frequency_and_presence_penalties_change_the_greedy_text(client):
    plain = complete(client)
    assert plain == run_text()
    assert complete(client, frequency_penalty=0, presence_penalty=0) == plain
    freq = complete(client, frequency_penalty=2)
    assert freq != plain
    assert freq == run_text("--frequency-penalty", "2")
    pres = complete(client, presence_penalty=2)
    assert pres != plain
    assert pres == run_text("--presence-penalty", "2")
    # A negative penalty favours what was generated, as kiln run does.
    assert complete(client, frequency_penalty=-2) == run_text("--frequency-penalty", "-2")


def test_repeat_penalty_is_llama_cpp_servers(client):
    plain = complete(client)
    rep = complete(client, extra_body={"repeat_penalty": 1.5})
    assert rep != plain
    assert rep == run_text("--repeat-penalty", "1.5")
    short = complete(client, extra_body={"repeat_penalty": 1.5, "repeat_last_n": 4})
    assert short == run_text("--repeat-penalty", "1.5", "--repeat-last-n", "4")
    # repeat_last_n 0 looks at nothing: the penalty is off.
    assert complete(client, extra_body={"repeat_penalty": 1.5, "repeat_last_n": 0}) == plain


def test_chat_takes_the_penalties_too(client):
    msgs = [{"role": "user", "content": "Say something."}]
    plain = client.chat.completions.create(model="chat", messages=msgs, max_tokens=30, temperature=0)
    freq = client.chat.completions.create(model="chat", messages=msgs, max_tokens=30, temperature=0,
                                          frequency_penalty=2)
    assert freq.choices[0].message.content != plain.choices[0].message.content


@pytest.mark.parametrize("field,value", [
    ("frequency_penalty", 2.5), ("frequency_penalty", -2.01), ("frequency_penalty", "1"),
    ("presence_penalty", 3), ("presence_penalty", -100),
    ("repeat_penalty", 0), ("repeat_penalty", -1), ("repeat_penalty", "x"), ("repeat_penalty", 1e300),
    ("repeat_last_n", -2), ("repeat_last_n", 1.5), ("repeat_last_n", 2 ** 40),
])
def test_out_of_range_is_a_400_naming_the_field(server, field, value):
    for path, body in (("/completions", {"model": "stories260K", "prompt": "a"}),
                       ("/chat/completions", {"model": "chat", "messages": [{"role": "user", "content": "x"}]})):
        r = requests.post(server.base_url + path, json={**body, "max_tokens": 2, field: value})
        assert r.status_code == 400, (path, field, value, r.text)
        err = r.json()["error"]
        assert err["param"] == field and f"'{field}'" in err["message"], err


def test_openai_client_sees_the_range(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="stories260K", prompt="a", max_tokens=2, presence_penalty=2.5)
    assert e.value.body["param"] == "presence_penalty"
    assert e.value.body["message"] == "'presence_penalty' must be from -2 to 2"
    # The edges themselves are allowed.
    for v in (-2, 2):
        assert client.completions.create(model="stories260K", prompt="a", max_tokens=2, frequency_penalty=v,
                                         presence_penalty=v).usage.completion_tokens == 2
