"""A local HTTP server that speaks the OpenAI Responses, Anthropic Messages and OpenAI chat
completions wire formats, for tests and benchmarks (the fake provider of the whole project, as
numpy and pandas keep their own testing helpers). No network beyond 127.0.0.1.

What it answers comes from an answer function ``answer(body, digest) -> text`` (the request
body, and a SHA-256 of its raw bytes to seed any randomness); the default is the mock trading
rule, deterministic from the request body, so a run against it is reproducible whatever the
arrival order. Bazaar's tests pass a function that plays a fixed Bazaar rule.

It checks the request fields the project relies on (400 naming what is missing), can answer
slowly (fixed latency plus seeded jitter), and can inject faults: a queue consumed one per
request (``429``, ``500``, ``timeout``, ``badjson``, ``malformed``, ``refusal``, ``ok``) and/or
a share of first attempts answered 429/500.

    python -m market_agents.testing.fakeserver --port 8123 --log requests.jsonl --latency 0.2

prints ``listening on http://127.0.0.1:PORT`` and serves until interrupted. Point the SDKs at
it with ``OPENAI_BASE_URL=http://127.0.0.1:PORT/v1`` and ``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT``
(any non-empty key). The log has one JSON line per request: path, body, and the answer given;
credentials are never logged.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

from market_agents.llm.prompting import extract_snapshot
from market_agents.llm.providers.mock import trade_rule

FAULTS = ("ok", "429", "500", "timeout", "badjson", "malformed", "refusal")
# How /chat/completions treats structured output, like the servers in docs/local_models.md:
# vllm (also Ollama, llama.cpp's llama-server) takes response_format json_schema;
# llama_cpp_python answers HTTP 500 to it and takes json_object with a schema, or a grammar;
# prompt_only takes no response_format at all (400).
SERVERS = ("vllm", "llama_cpp_python", "prompt_only")
# Schema keywords the hosted APIs reject in strict structured output (HTTP 400).
REJECTED_KEYWORDS = {
    "/responses": ("minLength", "maxLength"),
    "/messages": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
                  "maxLength"),
}


def _keywords(node: Any) -> set[str]:
    if isinstance(node, dict):
        return set(node) | {k for v in node.values() for k in _keywords(v)}
    if isinstance(node, list):
        return {k for v in node for k in _keywords(v)}
    return set()


Answer = Callable[[dict[str, Any], bytes], str]


def messages(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of every message of a request in any of the three wire formats, the
    system prompt (``instructions`` or ``system``) first when there is one."""
    out = []
    if body.get("instructions"):
        out.append(("system", body["instructions"]))
    if isinstance(body.get("system"), list):
        out.append(("system", "".join(b.get("text", "") for b in body["system"])))
    elif isinstance(body.get("system"), str):
        out.append(("system", body["system"]))
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for m in items or body.get("messages") or []:
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(c.get("text", "") for c in content if isinstance(c, dict))
        out.append((m.get("role") or "user", content or ""))
    return out


def _texts(body: dict[str, Any]) -> tuple[str, str]:
    """(system text, user text) of a request: every non-system message joined by newlines."""
    pairs = messages(body)
    return ("".join(t for r, t in pairs if r == "system"),
            "\n".join(t for r, t in pairs if r != "system"))


def check_request(path: str, body: dict[str, Any], server: str = "vllm"
                  ) -> tuple[int, list[str]]:
    """The fields this project must send, and what ``server`` accepts: (HTTP status, problems);
    an empty list means the request is well formed."""
    problems = []
    schema = ((body.get("text") or {}).get("format") or (body.get("output_config") or {}).get(
        "format") or {}).get("schema")
    for suffix, banned in REJECTED_KEYWORDS.items():
        found = sorted(_keywords(schema) & set(banned)) if path.endswith(suffix) else []
        if found:
            problems.append(f"schema keyword(s) not supported: {', '.join(found)}")
    if not body.get("model"):
        problems.append("model is missing")
    if path.endswith("/responses"):
        if body.get("store") is not False:
            problems.append("store must be false")
        fmt = (body.get("text") or {}).get("format") or {}
        if fmt and (fmt.get("type") != "json_schema" or fmt.get("strict") is not True
                    or not fmt.get("schema") or not fmt.get("name")):
            problems.append("text.format must be a named json_schema with strict: true")
        if not body.get("prompt_cache_key"):
            problems.append("prompt_cache_key is missing")
    elif path.endswith("/messages"):
        if not body.get("max_tokens"):
            problems.append("max_tokens is missing")
        fmt = (body.get("output_config") or {}).get("format")
        if fmt is not None and (fmt.get("type") != "json_schema" or not fmt.get("schema")):
            problems.append("output_config.format must be a json_schema")
        system = body.get("system")
        if isinstance(system, list) and not any("cache_control" in b for b in system):
            problems.append("system prompt is not marked with cache_control")
    elif path.endswith("/chat/completions"):
        fmt = body.get("response_format")
        kind = None if fmt is None else fmt.get("type")
        if server == "llama_cpp_python" and kind == "json_schema":
            # what llama-cpp-python's server answers (a validation error as HTTP 500)
            return 500, ["response_format.type: Input should be 'text' or 'json_object'"]
        if server == "prompt_only" and (fmt is not None or "grammar" in body):
            problems.append("this server takes no response_format or grammar")
        elif server == "vllm" and fmt is not None and (
                kind != "json_schema" or not (fmt.get("json_schema") or {}).get("schema")):
            problems.append("response_format must be a json_schema")
        elif server == "llama_cpp_python" and fmt is not None and (
                kind != "json_object" or not fmt.get("schema")):
            problems.append("response_format must be a json_object with a schema")
    return (400 if problems else 200), problems


def answer_text(body: dict[str, Any], digest: bytes) -> str:
    """The default answer: the mock trading rule on the snapshot in the prompt (``hold`` when
    there is none), drawn from a generator seeded by ``digest``."""
    _, user = _texts(body)
    snapshot = extract_snapshot(user)
    if snapshot is None:
        return "hold"
    rng = np.random.Generator(np.random.PCG64(int.from_bytes(digest[:16], "little")))
    return json.dumps(trade_rule(snapshot, rng))


class FakeAPI:
    """The server state; ``FakeAPI(...).start()`` serves on 127.0.0.1 in a daemon thread.

    Args:
        port: 0 for any free port (``url`` says which).
        latency_s, jitter_s: seconds added to every answer, fixed and uniform random.
        faults: consumed one per request: ``ok``, ``429``, ``500``, ``timeout`` (waits
            ``hang_s``), ``badjson``, ``malformed``, ``refusal``.
        first_attempt_fail_rate: share of first attempts answered 429 or 500.
        log_path: one JSON line per request (never the key).
        valid_keys: accepted API keys; None accepts any non-empty key.
        answer: ``answer(body, digest) -> text``; default :func:`answer_text`.
        tokens: (input, output) tokens to report for every answer, with no cache reads and no
            reasoning; default: synthetic counts from the prompt's length.
    """

    def __init__(self, port: int = 0, latency_s: float = 0.0, jitter_s: float = 0.0,
                 faults: list[str] | None = None, first_attempt_fail_rate: float = 0.0,
                 retry_after_s: float = 0.01, hang_s: float = 3.0, seed: int = 0,
                 log_path: str | Path | None = None, valid_keys: set[str] | None = None,
                 answer: Answer | None = None, tokens: tuple[int, int] | None = None,
                 server: str = "vllm"):
        for f in faults or []:
            if f not in FAULTS:
                raise ValueError(f"unknown fault {f!r}; known: {FAULTS}")
        if server not in SERVERS:
            raise ValueError(f"unknown server {server!r}; known: {SERVERS}")
        self.server = server
        self.latency_s, self.jitter_s = latency_s, jitter_s
        self.faults: deque[str] = deque(faults or [])
        self.fail_rate = first_attempt_fail_rate
        self.retry_after_s, self.hang_s = retry_after_s, hang_s
        self.rng = random.Random(seed)
        self.log_path = Path(log_path) if log_path else None
        self.valid_keys = valid_keys  # None: any non-empty key is accepted
        self.answer: Answer = answer or answer_text
        self.tokens = tokens
        self.requests: list[dict[str, Any]] = []
        self.seen: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeAPI:
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- one request ----------------------------------------------------------------------

    def plan(self, path: str, raw: bytes) -> tuple[str, float, bytes]:
        digest = hashlib.sha256(raw).digest()
        with self.lock:
            fault = self.faults.popleft() if self.faults else "ok"
            attempt = self.seen[digest.hex()]
            self.seen[digest.hex()] += 1
            delay = self.latency_s + (self.rng.uniform(0, self.jitter_s) if self.jitter_s else 0)
        if fault == "ok" and attempt == 0 and self.fail_rate > 0:
            u = int.from_bytes(digest[16:20], "little") / 2**32
            if u < self.fail_rate:
                fault = "429" if u < self.fail_rate / 2 else "500"
        return fault, delay, digest

    def record(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append(entry)
            if self.log_path is not None:
                with self.log_path.open("a") as fh:
                    fh.write(json.dumps(entry, sort_keys=True) + "\n")

    def usage(self, path: str, body: dict[str, Any], digest: bytes) -> dict[str, int]:
        """Synthetic usage. A provider's prompt cache depends on arrival order; here a cacheable
        request (prompt_cache_key, or a cache_control system prompt) reads the cache with a
        probability drawn from its own body, so usage too is independent of arrival order."""
        if self.tokens is not None:
            return {"system": 0, "user": self.tokens[0], "cached": 0, "written": 0,
                    "output": self.tokens[1], "reasoning": 0}
        system, user = _texts(body)
        n_system, n_user = max(1, len(system) // 4), max(1, len(user) // 4)
        key = body.get("prompt_cache_key") or (system if path.endswith("/messages") else "")
        cached = bool(key) and digest[20] % 5 != 0
        return {"system": n_system, "user": n_user, "cached": n_system if cached else 0,
                "written": 0 if cached or not key else n_system, "output": 60, "reasoning": 20}


def _error_body(path: str, status: int, message: str) -> dict[str, Any]:
    kind = {400: "invalid_request_error", 429: "rate_limit_error"}.get(status, "api_error")
    if path.endswith("/messages"):
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "code": None, "param": None}}


def _ok_body(api: FakeAPI, path: str, body: dict[str, Any], text: str, refusal: bool,
             digest: bytes) -> dict:
    u = api.usage(path, body, digest)
    model = body.get("model", "")
    if path.endswith("/responses"):
        part = ({"type": "refusal", "refusal": text} if refusal
                else {"type": "output_text", "text": text, "annotations": []})
        return {
            "id": "resp_fake", "object": "response", "created_at": 0, "status": "completed",
            "model": model, "output": [{"type": "message", "id": "msg_fake", "role": "assistant",
                                        "status": "completed", "content": [part]}],
            "usage": {"input_tokens": u["system"] + u["user"],
                      "input_tokens_details": {"cached_tokens": u["cached"],
                                               "cache_write_tokens": 0},
                      "output_tokens": u["output"],
                      "output_tokens_details": {"reasoning_tokens": u["reasoning"]},
                      "total_tokens": u["system"] + u["user"] + u["output"]},
        }
    if path.endswith("/messages"):
        return {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "refusal" if refusal else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": u["user"] + u["system"] - u["cached"] - u["written"],
                      "cache_read_input_tokens": u["cached"],
                      "cache_creation_input_tokens": u["written"], "output_tokens": u["output"]},
        }
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": None if refusal else text,
                                 "refusal": text if refusal else None}}],
        "usage": {"prompt_tokens": u["system"] + u["user"], "completion_tokens": u["output"],
                  "total_tokens": u["system"] + u["user"] + u["output"],
                  "prompt_tokens_details": {"cached_tokens": u["cached"]},
                  "completion_tokens_details": {"reasoning_tokens": u["reasoning"]}},
    }


def _handler(api: FakeAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet: the JSON log is the record
            return

        def setup(self) -> None:
            super().setup()
            # headers and body go out in two writes; without NODELAY, Nagle + delayed ACK
            # add ~40 ms to every answer
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            try:
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            path = self.path.split("?")[0]
            try:
                body = json.loads(raw)
            except ValueError:
                self._send(400, json.dumps(_error_body(path, 400, "body is not JSON")).encode())
                return
            key = self.headers.get("x-api-key") or self.headers.get("Authorization", "")
            key = key.removeprefix("Bearer ").strip()
            fault, delay, digest = api.plan(path, raw)
            # the key itself is never logged: only whether one came, and whether it was accepted
            entry = {"path": path, "body": body, "fault": fault, "t": time.time(),
                     "auth": "present" if key else "missing"}
            if not key or (api.valid_keys is not None and key not in api.valid_keys):
                api.record(entry | {"status": 401})
                self._send(401, json.dumps(_error_body(path, 401, "invalid api key")).encode())
                return
            if not path.endswith(("/responses", "/messages", "/chat/completions")):
                api.record(entry | {"status": 404})
                self._send(404, json.dumps(_error_body(path, 404, "no such route")).encode())
                return
            status, problems = check_request(path, body, api.server)
            if problems:
                api.record(entry | {"status": status, "problems": problems})
                self._send(status, json.dumps(_error_body(path, status,
                                                          "; ".join(problems))).encode())
                return
            time.sleep(api.hang_s if fault == "timeout" else delay)
            api.record(entry | {"status": {"429": 429, "500": 500}.get(fault, 200)})
            if fault == "429":
                self._send(429, json.dumps(_error_body(path, 429, "slow down")).encode(),
                           {"Retry-After": f"{api.retry_after_s:g}"})
                return
            if fault == "500":
                self._send(500, json.dumps(_error_body(path, 500, "boom")).encode())
                return
            if fault == "badjson":
                self._send(200, b'{"id": "resp_fake", "output": [')
                return
            text = api.answer(body, digest)
            if fault == "malformed":
                text = text[: len(text) // 2]
            refusal = fault == "refusal"
            if refusal:
                text = "I can't help with trading decisions."
            self._send(200, json.dumps(_ok_body(api, path, body, text, refusal, digest)).encode())

    return Handler


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m market_agents.testing.fakeserver",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    p.add_argument("--log", help="append one JSON line per request to this file")
    p.add_argument("--latency", type=float, default=0.0, help="seconds per answer")
    p.add_argument("--jitter", type=float, default=0.0, help="extra uniform random seconds")
    p.add_argument("--fail-rate", type=float, default=0.0,
                   help="share of first attempts answered 429 or 500 (retries succeed)")
    p.add_argument("--faults", default="", help=f"comma list consumed in order: {FAULTS}")
    p.add_argument("--seed", type=int, default=0, help="seed of the latency jitter")
    p.add_argument("--server", choices=SERVERS, default="vllm",
                   help="which server's structured output /chat/completions behaves like")
    args = p.parse_args(argv)
    api = FakeAPI(args.port, args.latency, args.jitter,
                  [f for f in args.faults.split(",") if f], args.fail_rate, seed=args.seed,
                  log_path=args.log, server=args.server)
    print(f"listening on {api.url}", flush=True)
    try:
        api.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        api.httpd.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
