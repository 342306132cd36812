"""A tiny OpenAI-compatible chat-completions server on 127.0.0.1 for the verifiers adapter and
the openai_compatible evaluation tests.

It plays a fixed, stateless Bazaar rule (``reply``) so a test can compute the expected reward
by playing the same rule through the engine directly.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def reply(state_text: str) -> str:
    """Unreadable on the very first attempt of an episode (exercises the illegal path), then
    trade real edges one unit at a time with some prose around the command."""
    obs = json.loads(state_text[state_text.index("{"):])
    if obs["turn"] == 0 and obs["last"] == "episode start":
        return "Let me look at the book first."
    if obs["ask"] < obs["index"]:
        return f"The ask {obs['ask']} is below the index, so:\nbuy 1"
    if obs["bid"] > obs["index"] and obs["inventory"] > 0:
        return f"The bid {obs['bid']} is above the index.\nsell 1"
    return "Nothing mispriced; I could buy but I will wait.\npass"


class StubServer:
    def __init__(self):
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests += 1
                users = [m for m in body["messages"] if m["role"] == "user"]
                content = users[-1]["content"]
                if isinstance(content, list):
                    content = "".join(p.get("text", "") for p in content)
                text = reply(content)
                payload = json.dumps({
                    "id": f"chatcmpl-{server.requests}", "object": "chat.completion",
                    "created": 0, "model": body.get("model", "stub"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def act(state: dict) -> str:
    return reply(json.dumps(state))
