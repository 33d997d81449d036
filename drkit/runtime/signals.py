"""SIGINT and SIGTERM as a stop request for a long-running job (the mirror, the translator's loop).

Invariant: inside ``stop_on_signals(event)`` either signal only sets ``event``; on leaving, the handlers
that were there before (the CLI's own SIGTERM handler, say) are put back, whatever happened inside.
Signal handlers can only be installed from the main thread: elsewhere it installs nothing.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_on_signals(event: threading.Event, received: list[int] | None = None) -> Iterator[threading.Event]:
    """Set ``event`` on SIGINT or SIGTERM while inside (and append the signal's number to ``received``);
    restore the previous handlers on leaving."""
    if threading.current_thread() is not threading.main_thread():
        yield event
        return

    def stop(signum: int, frame: object) -> None:
        if received is not None:
            received.append(signum)
        event.set()

    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s in STOP_SIGNALS:
        signal.signal(s, stop)
    try:
        yield event
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
