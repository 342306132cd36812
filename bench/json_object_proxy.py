"""A shim in front of llama-cpp-python's server for code older than the ``structured_output``
setting (before issue 14), which always sent ``response_format: json_schema``: it rewrites that
to ``{type: json_object, schema}`` (the form the server accepts) and passes everything else
through. Used once, to measure the old prompt and schema on the same model (bench/README.md).

    python bench/json_object_proxy.py --upstream http://127.0.0.1:PORT --port 0

prints ``listening on http://127.0.0.1:PORT`` (serve until interrupted; 127.0.0.1 only).
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def rewrite(body: dict) -> dict:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        body = body | {"response_format": {"type": "json_object",
                                           "schema": fmt["json_schema"]["schema"]}}
    return body


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--upstream", required=True, help="the server, e.g. http://127.0.0.1:8000")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args(argv)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            return

        def do_POST(self):  # noqa: N802 - http.server's naming
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            data = json.dumps(rewrite(json.loads(raw))).encode()
            req = urllib.request.Request(args.upstream + self.path, data=data, method="POST",
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=900) as resp:
                    status, payload = resp.status, resp.read()
            except urllib.error.HTTPError as exc:
                status, payload = exc.code, exc.read()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"listening on http://127.0.0.1:{httpd.server_address[1]}", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
