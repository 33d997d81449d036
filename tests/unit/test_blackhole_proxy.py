"""The fault suite's TCP proxy (tests/support/blackhole.py) on loopback: it forwards; blackholed, nothing
passes and nothing is closed (a dead network, not a refused port); healed, new connections pass again."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest
from support.blackhole import BlackholeProxy


@pytest.fixture
def proxy() -> Iterator[BlackholeProxy]:
    echo = socket.socket()
    echo.bind(("127.0.0.1", 0))
    echo.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = echo.accept()
            except OSError:
                return
            threading.Thread(
                target=lambda c=conn: [c.sendall(d) for d in iter(lambda: c.recv(1024), b"")], daemon=True
            ).start()

    threading.Thread(target=serve, daemon=True).start()
    made = BlackholeProxy(0, echo.getsockname()[1])  # the proxy binds a port the kernel chooses
    yield made
    made.close()
    echo.close()


def _ask(port: int, timeout: float = 2.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return s


def _answer(s: socket.socket, size: int, proxy: BlackholeProxy) -> bytes:
    try:
        return s.recv(size)
    except OSError as e:  # a reset: the proxy recorded why it dropped the connection
        raise AssertionError(f"{e!r}; the proxy's failures: {proxy.failures}") from e


def test_forwards_then_blackholes_without_closing_then_heals(proxy: BlackholeProxy) -> None:
    live = _ask(proxy.listen_port)
    live.sendall(b"ping")
    assert _answer(live, 4, proxy) == b"ping"

    proxy.blackhole()
    live.sendall(b"lost")
    new = _ask(proxy.listen_port, timeout=0.5)  # accepted: the port is not refused
    new.sendall(b"lost too")
    for s in (live, new):
        s.settimeout(0.5)
        with pytest.raises(TimeoutError):  # no answer, and no close (a close would read b"")
            s.recv(16)

    proxy.heal()
    again = _ask(proxy.listen_port)
    again.sendall(b"back")
    assert _answer(again, 4, proxy) == b"back"
    for s in (live, new, again):
        s.close()
    assert proxy.failures == []


def test_forwards_when_the_process_holds_descriptors_past_1024() -> None:
    """A pytest process that has run the integration suite holds over 1,024 descriptors; the proxy's sockets
    then get numbers select() refuses (CI: "filedescriptor out of range in select()")."""
    held = [os.dup(0) for _ in range(1100)]
    try:
        echo = socket.socket()
        echo.bind(("127.0.0.1", 0))
        echo.listen(1)
        assert echo.fileno() > 1024
        proxy = BlackholeProxy(0, echo.getsockname()[1])
        try:
            client = _ask(proxy.listen_port)
            server, _ = echo.accept()
            client.sendall(b"ping")
            assert server.recv(4) == b"ping"
            server.sendall(b"pong")
            assert _answer(client, 4, proxy) == b"pong"
            for s in (client, server):
                s.close()
            assert proxy.failures == []
        finally:
            proxy.close()
            echo.close()
    finally:
        for fd in held:
            os.close(fd)
