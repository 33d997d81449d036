"""Does a cluster answer? One metadata request, bounded, that tells a refusal at once.

librdkafka waits out its timeout on a cluster whose brokers all refuse connections: the request stays
queued while it reconnects. Its error callback says sooner: ``_ALL_BROKERS_DOWN`` once every bootstrap
server failed to connect (milliseconds on a refusal). The probe asks for metadata in a daemon thread
and serves the callback meanwhile, so it ends on the first of: an answer, every broker down, the
timeout. A cluster that accepts connections and does not answer (a frozen broker, a partition) costs
the timeout once; the verdict (drkit.core.reach) says so. The client that answered is handed back, so
the command asks its questions on the connection the probe opened.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from functools import partial
from typing import Any, TypeVar

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

from drkit.config import ClusterConfig, mask_text, secret_values
from drkit.core.reach import Reach, Unreachable
from drkit.kafka import clients

T = TypeVar("T")

#: How often the probe serves the client's error callback while the metadata request is pending.
_POLL_SECONDS = 0.02
#: Connection errors that mean "nothing listens there" (the rest are the client's own failure).
_REFUSED = ("Connection refused", "connection refused")
#: Errors that are the client's own failure before any answer (what to fix is in their text).
_FAILURES = (KafkaError._RESOLVE, KafkaError._SSL, KafkaError._AUTHENTICATION)


def probe(cluster: ClusterConfig, alias: str, request_timeout: float) -> tuple[Reach, AdminClient | None]:
    """Whether ``cluster`` answers a metadata request within its ``probe_timeout_seconds``, and the admin
    client that asked it (None when it did not answer). ``request_timeout`` is the per-request timeout
    the returned client keeps for the command's later requests."""
    timeout = cluster.probe_timeout_seconds
    down = threading.Event()
    refusals: list[str] = []  # connections refused (nothing listens)
    failures: list[str] = []  # the client's own failures (what to fix is in their text)
    others: list[str] = []  # lost connections, timeouts: no answer yet

    def on_error(error: KafkaError) -> None:
        code, text = error.code(), str(error.str())
        if code == KafkaError._ALL_BROKERS_DOWN:
            down.set()
        elif code in _FAILURES:
            failures.append(text)
        elif any(r in text for r in _REFUSED):
            refusals.append(text)
        else:
            others.append(text)

    conf: dict[str, Any] = clients.client_config(
        cluster, alias, **{"socket.timeout.ms": int(max(request_timeout, timeout) * 1000), "error_cb": on_error}
    )
    client = AdminClient(conf)
    started = time.monotonic()
    answer = _started(lambda: client.list_topics(timeout=timeout))
    deadline = started + timeout
    while not answer.done() and not down.is_set() and time.monotonic() < deadline:
        client.poll(_POLL_SECONDS)
    seconds = time.monotonic() - started
    if answer.done() and answer.exception() is None:
        return Reach(alias, None, "", timeout, seconds), client
    if down.is_set():
        client.poll(0)  # the errors queued with the last one
    if failures:  # name resolution, TLS, authentication: the client's own error says what to fix
        detail = mask_text(failures[-1], secret_values(dict(cluster.properties)))
        return Reach(alias, Unreachable.FAILED, detail, timeout, seconds), None
    if down.is_set() and not others:
        return Reach(alias, Unreachable.REFUSED, cluster.bootstrap_servers, timeout, seconds), None
    # No answer in time (librdkafka reports the metadata request's timeout as a transport failure), or
    # connections that opened and were lost: a broker that is there and does not serve.
    return Reach(alias, Unreachable.NO_ANSWER, cluster.bootstrap_servers, timeout, seconds), None


def probe_all(
    clusters: Mapping[str, ClusterConfig], request_timeout: float
) -> dict[str, tuple[Reach, AdminClient | None]]:
    """:func:`probe` of every cluster at the same time: the slowest probe's time, never their sum."""
    futures = {alias: _started(partial(probe, c, alias, request_timeout)) for alias, c in clusters.items()}
    return {alias: future.result() for alias, future in futures.items()}


def _started(fn: Callable[[], T]) -> Future[T]:
    """``fn()`` in a daemon thread: a command that ends first never waits for a probe of a cluster that is
    gone (the request's own timeout ends the thread)."""
    future: Future[T] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to the caller, which re-raises it from result()
            future.set_exception(exc)

    threading.Thread(target=run, name="drkit-probe", daemon=True).start()
    return future
