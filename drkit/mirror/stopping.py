"""Whether the batch running now should be given up: the one answer the job, its copy path and its outage
waits share.

Invariant: asked, never waited on; once the runner set ``abandon`` or the query stopped, it says yes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class Stopping:
    """Whether a batch being copied should be given up: the runner stopped waiting for it (``abandon``), or
    its query was stopped (which marks the query inactive at once but cannot interrupt the batch's thread)."""

    abandon: threading.Event = field(default_factory=threading.Event)
    #: the running query (a ``StreamingQuery``), once started
    query: object | None = None

    def __call__(self) -> bool:
        if self.abandon.is_set():
            return True
        query = self.query
        try:
            return query is not None and not query.isActive  # type: ignore[attr-defined]
        except Exception:  # the JVM side is gone: so is the query
            return True
