"""A webhook receiver on 127.0.0.1 (an ephemeral port) that records every request and answers a set status."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    path: str  # with the query string
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    port: int
    status: int = 200
    answer: bytes = b"switched"
    requests: list[Received] = field(default_factory=list)

    def url(self, path: str = "/switch") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@contextmanager
def webhook_receiver(status: int = 200, answer: bytes = b"switched") -> Iterator[Receiver]:
    receiver: Receiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            receiver.requests.append(Received(self.path, dict(self.headers.items()), body))
            self.send_response(receiver.status)
            self.send_header("Content-Length", str(len(receiver.answer)))
            self.end_headers()
            self.wfile.write(receiver.answer)

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver = Receiver(server.server_address[1], status, answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
