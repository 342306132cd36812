"""A minimal SOCKS5 proxy on 127.0.0.1 for tests (RFC 1928: no authentication, CONNECT to an
IPv4 address or a host name), counting the connections it carried."""

from __future__ import annotations

import socket
import socketserver
import struct
import threading


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        s = self.request
        _, n = s.recv(2)
        s.recv(n)  # the offered methods: "no authentication" is always taken
        s.sendall(b"\x05\x00")
        _, cmd, _, atyp = s.recv(4)
        if atyp == 1:
            host = socket.inet_ntoa(s.recv(4))
        else:  # a domain name (socks5h)
            host = s.recv(s.recv(1)[0]).decode()
        (port,) = struct.unpack("!H", s.recv(2))
        try:
            upstream = socket.create_connection((host, port), timeout=30)
        except OSError:
            s.sendall(b"\x05\x05\x00\x01" + bytes(6))  # connection refused
            return
        with upstream:
            s.sendall(b"\x05\x00\x00\x01" + bytes(6))
            self.server.carried += 1  # type: ignore[attr-defined]
            pipe = threading.Thread(target=_copy, args=(upstream, s), daemon=True)
            pipe.start()
            _copy(s, upstream)
            pipe.join(timeout=30)


def _copy(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class SocksProxy(socketserver.ThreadingTCPServer):
    """``with SocksProxy() as p:`` serves on ``p.url`` (``socks5://127.0.0.1:PORT``);
    ``p.carried`` counts the connections it relayed."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.carried = 0
        self.url = f"socks5://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> SocksProxy:
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
