"""A TCP proxy on loopback that can turn into a network blackhole: connections stay open, nothing passes.

A broker that advertises the proxy's port (``advertised.listeners``) has every client connection through
it, the metadata included. ``blackhole()`` stops forwarding in both directions without closing anything,
and keeps accepting new connections without forwarding them either: clients see requests that never get
an answer (timeouts), as on a dead network, not a refused port. ``heal()`` resets the connections that
lived through the blackhole (a client whose requests timed out has given up on them anyway) and forwards
new ones again.

``listen_port=0`` lets the kernel choose the port while the proxy binds it (no window in which another
process could take a port chosen in advance); ``listen_port`` then holds the chosen one. A connection the
proxy could not serve (the upstream refused it, a socket error) is recorded in ``failures``: a client sees a
reset there, and the test can say why.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading


class BlackholeProxy:
    def __init__(self, listen_port: int, upstream_port: int, host: str = "127.0.0.1") -> None:
        self.host, self.listen_port, self.upstream_port = host, listen_port, upstream_port
        self._open = threading.Event()  # set: forwarding
        self._open.set()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind((host, listen_port))
        self.listen_port = int(self._server.getsockname()[1])
        self.failures: list[str] = []
        self._server.listen(128)
        self._server.settimeout(0.2)
        self._thread = threading.Thread(target=self._accept, name=f"blackhole-{self.listen_port}", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.listen_port}"

    def blackhole(self) -> None:
        self._open.clear()

    def heal(self) -> None:
        with self._lock:
            stale, self._sockets = self._sockets, set()
        for s in stale:
            with contextlib.suppress(OSError):
                s.close()
        self._open.set()

    def close(self) -> None:
        self._closed.set()
        self.heal()
        with contextlib.suppress(OSError):
            self._server.close()
        self._thread.join(5)

    def _track(self, *sockets: socket.socket) -> None:
        with self._lock:
            self._sockets.update(sockets)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except (TimeoutError, OSError):
                continue
            self._track(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        # A connection made during a blackhole is held, unanswered, until it heals (then reset by heal()).
        while not self._open.wait(0.2):
            if self._closed.is_set():
                return
        try:
            upstream = socket.create_connection((self.host, self.upstream_port), timeout=10)
        except OSError as e:
            self.failures.append(f"upstream {self.host}:{self.upstream_port} refused a connection: {e!r}")
            with contextlib.suppress(OSError):
                client.close()
            return
        self._track(upstream)
        pair = {client: upstream, upstream: client}
        # A selector (epoll), not select(): select() refuses descriptors of 1024 and above, which a process
        # that has run many tests holds (CI saw "filedescriptor out of range in select()").
        watch = selectors.DefaultSelector()
        try:
            for end in pair:  # a connection held through a blackhole may have been reset by heal() already
                watch.register(end, selectors.EVENT_READ, end)
            while not self._closed.is_set():
                if not self._open.is_set():  # blackholed: read nothing, send nothing, close nothing
                    if self._open.wait(0.2):
                        return  # healed: heal() has reset this connection
                    continue
                if any(end.fileno() == -1 for end in pair):  # closed by heal() or close()
                    return
                readable: list[socket.socket] = [key.data for key, _ in watch.select(0.2)]
                for s in readable:
                    if not self._open.is_set():
                        break
                    data = s.recv(65536)
                    if not data:
                        return
                    pair[s].sendall(data)
        except (OSError, ValueError) as e:  # reset by heal() or close() (a closed socket's descriptor is -1)
            if all(s.fileno() != -1 for s in pair):  # not closed by heal() or close(): a real failure
                self.failures.append(f"a forwarded connection failed: {e!r}")
            return
        finally:
            watch.close()
            for s in pair:
                with contextlib.suppress(OSError):
                    s.close()
