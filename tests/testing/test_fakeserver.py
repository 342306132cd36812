"""The one fake provider server (market_agents.testing.fakeserver): it runs as a module, reads
every wire format's messages, and serves any answer function with the token counts asked for."""

import json
import os
import subprocess
import sys
import urllib.request

from market_agents.llm import schema
from market_agents.llm.client import LLMClient
from market_agents.llm.config import LLMConfig
from market_agents.testing.fakeserver import FakeAPI, messages
from tests.support.llm import decision_request


def test_fakeserver_runs_as_a_module(tmp_path):
    log = tmp_path / "log.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "market_agents.testing.fakeserver", "--port", "0",
         "--log", str(log)],
        stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on http://127.0.0.1:")
        url = line.split()[-1]
        env = {"OPENAI_API_KEY": "x", "OPENAI_BASE_URL": f"{url}/v1"}
        c = LLMClient.from_settings(
            LLMConfig(provider_mix={"openai": 1.0}, models={"openai": "gpt-5.4-nano"},
                      usd_cap=1.0), env=env)
        [r] = c.complete_many([decision_request("openai", "openai", "gpt-5.4-nano")],
                              schema.parse_decision)
        c.close()
        assert r.valid and log.read_text().count("\n") == 1
    finally:
        proc.terminate()
        proc.wait(10)
    assert os.environ.get("OPENAI_API_KEY") != "x"


def _post(url: str, body: dict, key: str = "k") -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def test_messages_of_every_wire_format():
    assert messages({"instructions": "S", "input": [{"role": "user", "content": "U"}]}) == [
        ("system", "S"), ("user", "U")]
    assert messages({"system": [{"type": "text", "text": "S"}],
                     "messages": [{"role": "user", "content": [{"type": "text", "text": "U"}]}]}
                    ) == [("system", "S"), ("user", "U")]
    assert messages({"messages": [{"role": "system", "content": "S"},
                                  {"role": "user", "content": "A"},
                                  {"role": "assistant", "content": "B"},
                                  {"role": "user", "content": "C"}]}) == [
        ("system", "S"), ("user", "A"), ("assistant", "B"), ("user", "C")]


def test_an_answer_function_and_fixed_token_counts():
    seen = []

    def answer(body, digest):
        seen.append(len(digest))
        return "last: " + [t for r, t in messages(body) if r == "user"][-1]

    with FakeAPI(answer=answer, tokens=(10, 5)) as api:
        out = _post(f"{api.url}/v1/chat/completions", {
            "model": "m", "messages": [{"role": "user", "content": "a"},
                                       {"role": "user", "content": "b"}]})
    assert out["choices"][0]["message"]["content"] == "last: b"
    assert out["usage"]["prompt_tokens"] == 10 and out["usage"]["completion_tokens"] == 5
    assert out["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert seen == [32] and len(api.requests) == 1


def test_vary_repeat_answers_the_kth_arrival_of_a_body_alike_on_every_server():
    def answer(body, digest):
        return digest.hex()

    def texts(vary, bodies):
        with FakeAPI(answer=answer, vary=vary) as api:
            return [_post(f"{api.url}/v1/chat/completions", {
                "model": "m", "messages": [{"role": "user", "content": b}]}
                )["choices"][0]["message"]["content"] for b in bodies]

    first = texts("repeat", ["a", "a", "b"])
    assert first[0] != first[1]  # a request paid twice gets another answer
    assert texts("repeat", ["b", "a", "a"]) == [first[2], first[0], first[1]]  # any order
    assert texts(False, ["a", "a"]) == [first[0], first[0]]


def test_a_billed_answer_is_counted_before_any_byte_of_it_goes_out(monkeypatch):
    """An empty 200 is all headers: a client that has them has the whole answer and may read
    ``answered`` at once (test_wire_shapes failed so on a loaded machine)."""
    import http.server

    seen = []
    flush = http.server.BaseHTTPRequestHandler.flush_headers

    def recording(self):
        seen.append(api.answered)
        flush(self)

    monkeypatch.setattr(http.server.BaseHTTPRequestHandler, "flush_headers", recording)
    with FakeAPI() as api:
        for body in (b"", b'{"id": 1}'):
            api.fault_all, api.raw_body = "raw", body
            req = urllib.request.Request(f"{api.url}/v1/chat/completions",
                                         json.dumps({"model": "m", "messages": [
                                             {"role": "user", "content": "a"}]}).encode(),
                                         headers={"Content-Type": "application/json",
                                                  "Authorization": "Bearer k"})
            with urllib.request.urlopen(req, timeout=30) as resp:
                assert resp.read() == body
    assert seen == [1, 2] and api.answered == 2
