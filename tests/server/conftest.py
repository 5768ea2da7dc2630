"""Fixtures of the kiln serve suite: the kiln binary, a second model with a ChatML template, and
servers started on a free loopback port (`--port 0`; the port is read from stderr)."""
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
KILN = Path(os.environ.get("KILN_BIN", ROOT / "build" / "release" / "kiln"))
STORIES = ROOT / "models" / "stories260K" / "stories260K.bin"

CHATML = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def make_chat_model(folder: Path) -> Path:
    """`kiln synth --preset tiny-qwen2` (random weights, a 640-piece tokenizer), with its last two
    vocabulary entries turned into the special tokens <|im_start|> and <|im_end|> and a ChatML
    template, so that a user typing '<|im_start|>' can be told from the real turn marker."""
    subprocess.run([str(KILN), "synth", "--preset", "tiny-qwen2", "-o", str(folder), "--force"], check=True,
                   capture_output=True)
    tok_path = folder / "tokenizer.json"
    tok = json.loads(tok_path.read_text())
    vocab = tok["model"]["vocab"]
    n = len(vocab)
    by_id = {i: p for p, i in vocab.items()}
    # The last two pieces are the last two merges' results; no later merge uses them.
    for i in (n - 2, n - 1):
        del vocab[by_id[i]]
    tok["model"]["merges"] = tok["model"]["merges"][:-2]
    for i, text in ((n - 2, "<|im_start|>"), (n - 1, "<|im_end|>")):
        tok["added_tokens"].append({"id": i, "content": text, "single_word": False, "lstrip": False,
                                    "rstrip": False, "normalized": False, "special": True})
    tok_path.write_text(json.dumps(tok))
    cfg_path = folder / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["chat_template"] = CHATML
    cfg_path.write_text(json.dumps(cfg))
    return folder


class Server:
    def __init__(self, args, log_path):
        self.log = open(log_path, "w+")
        self.proc = subprocess.Popen([str(KILN), "serve", "--port", "0", *args], stdout=self.log,
                                     stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 60
        self.port = None
        while time.time() < deadline and self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError("kiln serve exited: " + Path(log_path).read_text())
            m = re.search(r"listening on http://[^:]+:(\d+)", Path(log_path).read_text())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.05)
        if self.port is None:
            raise RuntimeError("kiln serve did not start: " + Path(log_path).read_text())
        self.url = f"http://127.0.0.1:{self.port}"
        self.base_url = self.url + "/v1"

    def health(self):
        return requests.get(self.url + "/health", timeout=10).json()

    def metric(self, name, model=None):
        text = requests.get(self.url + "/metrics", timeout=10).text
        label = '{model="%s"}' % model if model else ""
        for line in text.splitlines():
            if line.startswith(name + label + " "):
                return float(line.split()[-1])
        raise KeyError(name + label)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        self.log.close()
        return rc


@pytest.fixture(scope="session")
def chat_model(tmp_path_factory):
    return make_chat_model(tmp_path_factory.mktemp("models") / "chat-tiny-qwen2")


@pytest.fixture(scope="session")
def start_server(tmp_path_factory):
    started = []

    def start(*args):
        s = Server(list(args), tmp_path_factory.mktemp("serve") / "serve.log")
        started.append(s)
        return s

    yield start
    # Every server leaves with status 0 on SIGTERM (a sanitizer's report at exit, e.g. a leak,
    # would change it); one that died earlier failed its test already and is named here too.
    bad = []
    for s in started:
        rc = s.stop() if s.proc.poll() is None else s.proc.returncode
        if rc != 0:
            bad.append((rc, Path(s.log.name).read_text()[-2000:]))
    assert not bad, "kiln serve exited with " + "; ".join("status %s: %s" % b for b in bad)


@pytest.fixture(scope="session")
def server(start_server, chat_model):
    """The shipped model and the chat model, two slots each, 2 threads."""
    return start_server("--model", f"stories260K={STORIES}", "--model", f"chat={chat_model}", "--parallel", "2",
                        "--threads", "2", "--ctx", "2048")


@pytest.fixture()
def client(server):
    import openai
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=60)


def kiln_cli(*args):
    # stdin from /dev/null: a pipe on stdin is kiln run's prompt when there is no -p.
    return subprocess.run([str(KILN), *args], check=True, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL).stdout
