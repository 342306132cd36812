"""A local HTTP server that speaks the OpenAI Responses, Anthropic Messages and OpenAI chat
completions wire formats, for tests and benchmarks (the fake provider of the whole project, as
numpy and pandas keep their own testing helpers). No network beyond 127.0.0.1.

What it answers comes from an answer function ``answer(body, digest) -> text`` (the request
body, and a SHA-256 of its raw bytes to seed any randomness); the default is the mock trading
rule, deterministic from the request body, so a run against it is reproducible whatever the
arrival order. Bazaar's tests pass a function that plays a fixed Bazaar rule. For the
record-integrity tests it can also vary its answers between identical requests (``vary``, as
real models do), bill ``max_output_tokens`` on every call (``bill_max_output``), answer every
request with one fault (``fault_all``), and tell a test how many requests have arrived
(``wait_for``) and when a killed client's connections are gone (``wait_idle``). It can
answer without usage or with zeros (``usage``), add headers to its error answers
(``fault_headers``: ``x-should-retry``, ``retry-after-ms``) and send a body that trickles in
(the ``trickle`` fault).

It checks the request fields the project relies on (400 naming what is missing), can answer
slowly (fixed latency plus seeded jitter), and can inject faults: a queue consumed one per
request (see ``FAULTS``) and/or a share of first attempts answered 429/500.

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
import sys
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

FAULTS = ("ok", "429", "500", "529", "timeout", "reset", "badjson", "malformed", "refusal",
          "failed", "quota", "400", "401", "403", "404", "trickle", "output_null", "error200",
          "rate200", "raw")
# Faults answered with HTTP 200 carrying an error object in the route's wire format, as
# gateways and proxies do (tailcallhq/forgecode #2595): the status they stand for.
ERROR_200 = {"error200": 500, "rate200": 429}
# What an answer says of its tokens: the counts (``reported``), no usage object at all
# (``missing``, as some gateways and proxies answer) or every count zero (``zeros``).
USAGE_MODES = ("reported", "missing", "zeros")
TRICKLE_CHUNK = 12  # bytes per write of a trickling body
# Faults answered with an HTTP error status (the error body follows each wire format).
STATUS = {"429": 429, "500": 500, "529": 529, "quota": 429, "credit": 400, "400": 400,
          "401": 401, "403": 403, "404": 404}
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
    schema = ((body.get("text") or {}).get("format") or (body.get("output_config") or {}).get(
        "format") or {}).get("schema")
    problems = [f"schema keyword(s) not supported: {', '.join(found)}"
                for suffix, banned in REJECTED_KEYWORDS.items() if path.endswith(suffix)
                for found in [sorted(_keywords(schema) & set(banned))] if found]
    if not body.get("model"):
        problems.append("model is missing")
    if path.endswith("/responses"):
        problems += _responses_problems(body)
    elif path.endswith("/messages"):
        problems += _messages_problems(body)
    elif path.endswith("/chat/completions"):
        refused = _chat_refusal(body, server)
        if refused:
            return 500, refused
        problems += _chat_problems(body, server)
    return (400 if problems else 200), problems


def _responses_problems(body: dict[str, Any]) -> list[str]:
    """What OpenAI's Responses API (as this project calls it) would reject."""
    problems = []
    if body.get("store") is not False:
        problems.append("store must be false")
    fmt = (body.get("text") or {}).get("format") or {}
    if fmt and (fmt.get("type") != "json_schema" or fmt.get("strict") is not True
                or not fmt.get("schema") or not fmt.get("name")):
        problems.append("text.format must be a named json_schema with strict: true")
    if not body.get("prompt_cache_key"):
        problems.append("prompt_cache_key is missing")
    return problems


def _messages_problems(body: dict[str, Any]) -> list[str]:
    """What Anthropic's Messages API (as this project calls it) would reject."""
    problems = []
    if not body.get("max_tokens"):
        problems.append("max_tokens is missing")
    fmt = (body.get("output_config") or {}).get("format")
    if fmt is not None and (fmt.get("type") != "json_schema" or not fmt.get("schema")):
        problems.append("output_config.format must be a json_schema")
    system = body.get("system")
    if isinstance(system, list) and not any("cache_control" in b for b in system):
        problems.append("system prompt is not marked with cache_control")
    return problems


def _chat_refusal(body: dict[str, Any], server: str) -> list[str]:
    """What llama-cpp-python's server answers with HTTP 500 (its request validation errors);
    empty for every other server and request."""
    if server != "llama_cpp_python":
        return []
    if (body.get("response_format") or {}).get("type") == "json_schema":
        return ["response_format.type: Input should be 'text' or 'json_object'"]
    # its request model types tool_calls as a list (omitted when there are none): a null
    # fails validation
    nulls = [i for i, m in enumerate(body.get("messages") or [])
             if isinstance(m, dict) and "tool_calls" in m and m["tool_calls"] is None]
    return [f"messages.{nulls[0]}.tool_calls: Input should be a valid list"] if nulls else []


def _chat_problems(body: dict[str, Any], server: str) -> list[str]:
    """What ``server``'s chat completions endpoint rejects (HTTP 400) in how the answer
    schema is sent (``SERVERS``)."""
    fmt = body.get("response_format")
    kind = None if fmt is None else fmt.get("type")
    if server == "prompt_only" and (fmt is not None or "grammar" in body):
        return ["this server takes no response_format or grammar"]
    if server == "vllm" and fmt is not None and (
            kind != "json_schema" or not (fmt.get("json_schema") or {}).get("schema")):
        return ["response_format must be a json_schema"]
    if server == "llama_cpp_python" and fmt is not None and (
            kind != "json_object" or not fmt.get("schema")):
        return ["response_format must be a json_object with a schema"]
    return []


def answer_text(body: dict[str, Any], digest: bytes) -> str:
    """The default answer: the mock trading rule on the snapshot in the prompt (``hold`` when
    there is none), drawn from a generator seeded by ``digest``."""
    _, user = _texts(body)
    snapshot = extract_snapshot(user)
    if snapshot is None:
        return "hold"
    rng = np.random.Generator(np.random.PCG64(int.from_bytes(digest[:16], "little")))
    return json.dumps(trade_rule(snapshot, rng))


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client killed mid-request (the kill tests do it on purpose) is not an error here
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeAPI:
    """The server state; ``FakeAPI(...).start()`` serves on 127.0.0.1 in a daemon thread.

    Args:
        port: 0 for any free port (``url`` says which).
        latency_s, jitter_s: seconds added to every answer, fixed and uniform random.
        faults: consumed one per request: ``ok``, ``429`` (with Retry-After ``retry_after_s``),
            ``500``, ``529``, ``timeout`` (waits ``hang_s``), ``reset`` (connection dropped),
            ``badjson``, ``malformed``, ``refusal``, ``failed`` (a Responses object with
            ``status: failed`` under HTTP 200), ``output_null`` (a completed answer, billed,
            whose output is null: openai-python #2486; Messages: ``content: null``; chat
            completions: ``choices: null``), ``error200`` / ``rate200`` (HTTP 200 carrying the
            route's error body of a 500 / a 429), ``raw`` (HTTP 200 with ``raw_body`` as its
            body, for property tests over shapes), ``quota`` (429 insufficient_quota; Anthropic's
            400 "credit balance is too low"), ``400``, ``401``, ``403``, ``404``, ``trickle``
            (a good answer whose body, padded with spaces, comes 12 bytes every ``trickle_s``
            seconds over at least ``hang_s`` seconds; ``dropped`` counts the clients that hung
            up before its end).
        first_attempt_fail_rate: share of first attempts answered 429 or 500.
        log_path: one JSON line per request (never the key).
        valid_keys: accepted API keys; None accepts any non-empty key.
        answer: ``answer(body, digest) -> text``; default :func:`answer_text`.
        tokens: (input, output) tokens to report for every answer, with no cache reads and no
            reasoning; default: synthetic counts from the prompt's length.
        fault_all: the fault for every request the queue does not cover.
        vary: answers differ between identical requests (the arrival count joins the seed).
            ``vary="repeat"``: the k-th arrival of the same body gets the k-th answer, so a
            client that sends each request once gets the same answers from any server, whatever
            the arrival order (compare two runs: one that paid a request twice differs).
        bill_max_output: report the request's ``max_output_tokens``/``max_tokens`` as output.
        usage: ``reported`` (default), ``missing`` (no usage object) or ``zeros``.
        fault_headers: headers added to every answer with an HTTP error status (e.g.
            ``{"x-should-retry": "false"}``, ``{"retry-after-ms": "1500"}``).
        trickle_s: seconds between two writes of a ``trickle`` body.
    """

    def __init__(self, port: int = 0, latency_s: float = 0.0, jitter_s: float = 0.0,
                 faults: list[str] | None = None, first_attempt_fail_rate: float = 0.0,
                 retry_after_s: float = 0.01, hang_s: float = 3.0, seed: int = 0,
                 log_path: str | Path | None = None, valid_keys: set[str] | None = None,
                 answer: Answer | None = None, tokens: tuple[int, int] | None = None,
                 fault_all: str | None = None, vary: bool | str = False,
                 bill_max_output: bool = False, server: str = "vllm", usage: str = "reported",
                 fault_headers: dict[str, str] | None = None, trickle_s: float = 0.05):
        for f in [*(faults or []), *([fault_all] if fault_all else [])]:
            if f not in FAULTS:
                raise ValueError(f"unknown fault {f!r}; known: {FAULTS}")
        if server not in SERVERS:
            raise ValueError(f"unknown server {server!r}; known: {SERVERS}")
        if usage not in USAGE_MODES:
            raise ValueError(f"unknown usage mode {usage!r}; known: {USAGE_MODES}")
        self.usage_mode = usage
        self.fault_headers = dict(fault_headers or {})
        self.trickle_s = trickle_s
        self.dropped = 0  # trickling answers the client hung up on before their end
        self.server = server
        self.fault_all = fault_all
        if vary not in (False, True, "repeat"):
            raise ValueError(f"vary must be a bool or 'repeat', not {vary!r}")
        self.vary = vary  # answers differ between identical requests (a counter joins the seed)
        self.bill_max_output = bill_max_output  # usage.output = the request's output limit
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
        # 200 answers written in full (bodies billed, whatever their shape); counted just before
        # the last bytes go out, so a client never sees a body before its count (_count)
        self.answered = 0
        self.raw_body = b"{}"  # the body of the ``raw`` fault
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        self.n_arrived = 0
        self.open_connections = 0
        self.httpd = _Server(("127.0.0.1", port), _handler(self))
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The server's base URL on 127.0.0.1."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeAPI:
        """Serve in a daemon thread; return the server."""
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- one request ----------------------------------------------------------------------

    def wait_for(self, n: int, timeout: float = 600.0) -> bool:
        """Block until ``n`` requests have arrived in all (False on timeout)."""
        with self.arrived:
            return self.arrived.wait_for(lambda: self.n_arrived >= n, timeout)

    def wait_idle(self, timeout: float = 600.0) -> bool:
        """Block until no client holds a connection (after a kill: until the server has read
        whatever the dead client had sent, so ``n_arrived`` is final)."""
        with self.arrived:
            return self.arrived.wait_for(lambda: self.open_connections == 0, timeout)

    def plan(self, path: str, raw: bytes) -> tuple[str, float, bytes]:
        """Decide how to answer a request: its fault (``ok``, an injected fault, or a seeded
        429/500 on a first attempt), its delay in seconds, and the digest its answer is drawn from.
        """
        digest = hashlib.sha256(raw).digest()
        with self.lock:
            fault = self.faults.popleft() if self.faults else (self.fault_all or "ok")
            attempt = self.seen[digest.hex()]
            self.seen[digest.hex()] += 1
            delay = self.latency_s + (self.rng.uniform(0, self.jitter_s) if self.jitter_s else 0)
            self.n_arrived += 1
            self.arrived.notify_all()
            if self.vary == "repeat" and attempt:  # the body's k-th arrival, k > 0
                digest = hashlib.sha256(digest + attempt.to_bytes(8, "little")).digest()
            elif self.vary is True:  # the n-th request, not only its body, picks the answer
                digest = hashlib.sha256(digest + self.n_arrived.to_bytes(8, "little")).digest()
        if fault == "ok" and attempt == 0 and self.fail_rate > 0:
            u = int.from_bytes(digest[16:20], "little") / 2**32
            if u < self.fail_rate:
                fault = "429" if u < self.fail_rate / 2 else "500"
        return fault, delay, digest

    def record(self, entry: dict[str, Any]) -> None:
        """Keep a request's log entry (and append it to the log file, when one is set)."""
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
        limit = body.get("max_output_tokens") or body.get("max_tokens") or 0
        output = int(limit) if self.bill_max_output and limit else 60
        return {"system": n_system, "user": n_user, "cached": n_system if cached else 0,
                "written": 0 if cached or not key else n_system, "output": output,
                "reasoning": min(20, output)}


ERROR_TYPES = {  # status -> (Anthropic error type, OpenAI error type)
    400: ("invalid_request_error", "invalid_request_error"),
    401: ("authentication_error", "invalid_request_error"),
    403: ("permission_error", "invalid_request_error"),
    404: ("not_found_error", "invalid_request_error"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    529: ("overloaded_error", "server_error"),
}


def _error_body(path: str, status: int, message: str, code: str | None = None
                ) -> dict[str, Any]:
    anthropic, openai = ERROR_TYPES.get(status, ("api_error", "server_error"))
    if path.endswith("/messages"):
        return {"type": "error", "error": {"type": anthropic, "message": message}}
    return {"error": {"message": message, "type": code or openai, "code": code, "param": None}}


FAULT_MESSAGES = {
    "429": "slow down", "500": "boom", "529": "overloaded",
    "quota": "You exceeded your current quota, please check your plan and billing details.",
    "credit": "Your credit balance is too low to access the Anthropic API.",
    "400": "invalid request", "401": "invalid api key", "403": "not allowed",
    "404": "the model does not exist",
}


def _ok_body(api: FakeAPI, path: str, body: dict[str, Any], text: str, refusal: bool,
             digest: bytes) -> dict:
    u = api.usage(path, body, digest)
    answer = _ok_shape(path, text, refusal, u, body.get("model", ""))
    if api.usage_mode == "missing":
        answer.pop("usage")
    elif api.usage_mode == "zeros":
        answer["usage"] = _zeros(answer["usage"])
    return answer


def _zeros(node: Any) -> Any:
    """The same usage object with every count set to 0."""
    if isinstance(node, dict):
        return {k: _zeros(v) for k, v in node.items()}
    return 0 if isinstance(node, int) else node


def _ok_shape(path: str, text: str, refusal: bool, u: dict[str, int], model: str) -> dict:
    if path.endswith("/responses"):
        part = ({"type": "refusal", "refusal": text} if refusal
                else {"type": "output_text", "text": text, "annotations": []})
        return {
            "id": "resp_fake", "object": "response", "created_at": 0, "status": "completed",
            "error": None,
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
            with api.arrived:
                api.open_connections += 1
            super().setup()
            # headers and body go out in two writes; without NODELAY, Nagle + delayed ACK
            # add ~40 ms to every answer
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def finish(self) -> None:
            try:
                super().finish()
            finally:
                with api.arrived:
                    api.open_connections -= 1
                    api.arrived.notify_all()

        def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None,
                  billed: bool = False) -> bool:
            """Write one response; False when the client hung up first. ``billed``: count it
            in ``answered``."""
            counted = False
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                # counted before the headers go out: with an empty body they are the whole
                # answer, and its client can look at ``answered`` as soon as it has them
                counted = billed and self._count(+1)
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()
            except BaseException as exc:  # not written in full: not billed
                if counted:
                    self._count(-1)
                if isinstance(exc, (BrokenPipeError, ConnectionResetError)):
                    return False
                raise
            return True

        @staticmethod
        def _count(step: int) -> bool:
            """Count an answer before its last bytes go out (undone when they cannot): counted
            after, a client that had read the whole body could look at ``answered`` first and
            miss it (seen on a loaded machine)."""
            with api.lock:
                api.answered += step
            return True

        def _reset(self) -> None:
            """Drop the connection without an answer (a reset, as a proxy or a crash does)."""
            self.close_connection = True
            try:
                self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                        b"\x01\x00\x00\x00\x00\x00\x00\x00")
                self.request.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            """One request: refused (bad JSON, key, route or schema), or answered after its
            planned delay with its planned fault (:meth:`FakeAPI.plan`), or a model answer."""
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            path = self.path.split("?")[0]
            try:
                body = json.loads(raw)
            except ValueError:
                self._error(path, 400, "body is not JSON")
                return
            key = self._key()
            fault, delay, digest = api.plan(path, raw)
            # the key itself is never logged: only whether one came, and whether it was accepted
            entry = {"path": path, "body": body, "fault": fault, "t": time.time(),
                     "auth": "present" if key else "missing"}
            if self._refused(path, body, key, entry):
                return
            time.sleep(api.hang_s if fault == "timeout" else delay)
            if fault == "quota" and path.endswith("/messages"):  # Anthropic's out-of-credit
                fault = "credit"
            api.record(entry | {"status": STATUS.get(fault, 0 if fault == "reset" else 200)})
            if fault == "reset":
                self._reset()
            elif fault in STATUS:
                self._fault(path, fault)
            elif fault in ("badjson", "raw"):  # a body cut short, or the test's own body
                # billed: the provider answered, whatever the shape
                self._send(200, api.raw_body if fault == "raw"
                           else b'{"id": "resp_fake", "output": [', billed=True)
            elif fault in ERROR_200:  # a gateway's error under HTTP 200
                status = ERROR_200[fault]
                self._send(200, json.dumps(_error_body(path, status, FAULT_MESSAGES[str(status)]
                                                       )).encode())
            else:
                self._answer(path, body, digest, fault)

        def _key(self) -> str:
            """The API key the request carries (Anthropic's header or a bearer token)."""
            key = self.headers.get("x-api-key") or self.headers.get("Authorization", "")
            return key.removeprefix("Bearer ").strip()

        def _error(self, path: str, status: int, message: str, code: str | None = None,
                   headers: dict[str, str] | None = None) -> bool:
            """Send the provider's error body for ``status``."""
            return self._send(status, json.dumps(_error_body(path, status, message,
                                                             code)).encode(), headers)

        def _refused(self, path: str, body: dict[str, Any], key: str,
                     entry: dict[str, Any]) -> bool:
            """Log and answer a request refused before any fault: a missing or unknown key
            (401), an unknown route (404), a body the emulated server rejects (its status).
            True when the request was refused."""
            extra: dict[str, Any] = {}
            if not key or (api.valid_keys is not None and key not in api.valid_keys):
                status, message = 401, "invalid api key"
            elif not path.endswith(("/responses", "/messages", "/chat/completions")):
                status, message = 404, "no such route"
            else:
                status, problems = check_request(path, body, api.server)
                if not problems:
                    return False
                extra, message = {"problems": problems}, "; ".join(problems)
            api.record(entry | {"status": status} | extra)
            self._error(path, status, message)
            return True

        def _fault(self, path: str, fault: str) -> None:
            """An HTTP error fault (429, 500, quota, credit, ...), with Retry-After on a 429
            and the configured fault headers."""
            code = "insufficient_quota" if fault == "quota" else None
            headers = {"Retry-After": f"{api.retry_after_s:g}"} if fault == "429" else {}
            self._error(path, STATUS[fault], FAULT_MESSAGES[fault], code,
                        headers | api.fault_headers)

        def _answer(self, path: str, body: dict[str, Any], digest: bytes, fault: str) -> None:
            """A 200 with the model's answer, spoiled as ``fault`` says (malformed: cut in
            half; refusal; failed: a Responses answer with status failed; trickle: sent
            slowly); counts it answered as its last bytes go out."""
            text = api.answer(body, digest)
            if fault == "malformed":
                text = text[: len(text) // 2]
            refusal = fault == "refusal"
            if refusal:
                text = "I can't help with trading decisions."
            answer = _ok_body(api, path, body, text, refusal, digest)
            if fault == "failed" and path.endswith("/responses"):  # HTTP 200, status failed
                answer |= {"status": "failed", "output": [],
                           "error": {"code": "server_error", "message": "model failed"}}
            if fault == "output_null":  # billed (usage kept), nothing readable where the text is
                answer[{"/responses": "output", "/messages": "content"}.get(
                    path[path.rfind("/"):], "choices")] = None
            payload = json.dumps(answer).encode()
            if fault == "trickle":
                self._trickle(payload)
            else:
                self._send(200, payload, billed=True)

        def _trickle(self, payload: bytes) -> bool:
            """A 200 whose body comes TRICKLE_CHUNK bytes every ``trickle_s`` seconds, padded
            with spaces (still JSON) to take at least ``hang_s`` seconds: no single read waits
            long, the whole body does. False when the client hung up first."""
            chunks = max(1, round(api.hang_s / api.trickle_s))
            payload = payload.ljust(chunks * TRICKLE_CHUNK)
            counted = False
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.flush()
                for i in range(0, len(payload), TRICKLE_CHUNK):
                    if i + TRICKLE_CHUNK >= len(payload):  # the last chunk: billed (_count)
                        counted = self._count(+1)
                    self.wfile.write(payload[i:i + TRICKLE_CHUNK])
                    self.wfile.flush()
                    time.sleep(api.trickle_s)
            except BaseException as exc:  # not written in full: not billed
                if counted:
                    self._count(-1)
                if not isinstance(exc, (BrokenPipeError, ConnectionResetError)):
                    raise
                self.close_connection = True
                with api.lock:
                    api.dropped += 1
                return False
            return True

    return Handler


def main(argv: list[str] | None = None) -> int:
    """Run the fake API from the command line until interrupted.

    Args:
        argv: ``[--port N] [--log FILE] [--latency S] ...`` (``--help`` lists them).

    Returns:
        The exit code: 0.
    """
    p = argparse.ArgumentParser(prog="python -m market_agents.testing.fakeserver",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    p.add_argument("--log", help="append one JSON line per request to this file")
    p.add_argument("--latency", type=float, default=0.0, help="seconds per answer")
    p.add_argument("--jitter", type=float, default=0.0, help="extra uniform random seconds")
    p.add_argument("--fail-rate", type=float, default=0.0,
                   help="share of first attempts answered 429 or 500 (retries succeed)")
    p.add_argument("--faults", default="", help=f"comma list consumed in order: {FAULTS}")
    p.add_argument("--fault-all", default=None, help="answer every request with this fault")
    p.add_argument("--vary", action="store_true",
                   help="answers differ between identical requests (as real models do)")
    p.add_argument("--bill-max-output", action="store_true",
                   help="bill the request's max output tokens on every call")
    p.add_argument("--usage", choices=USAGE_MODES, default="reported",
                   help="what answers say of their tokens (missing: no usage object)")
    p.add_argument("--seed", type=int, default=0, help="seed of the latency jitter")
    p.add_argument("--server", choices=SERVERS, default="vllm",
                   help="which server's structured output /chat/completions behaves like")
    args = p.parse_args(argv)
    api = FakeAPI(args.port, args.latency, args.jitter,
                  [f for f in args.faults.split(",") if f], args.fail_rate, seed=args.seed,
                  log_path=args.log, fault_all=args.fault_all, vary=args.vary,
                  bill_max_output=args.bill_max_output, server=args.server,
                  usage=args.usage)
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
