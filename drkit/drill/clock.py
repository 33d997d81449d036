"""The drill's clock: epoch milliseconds, the one unit of every timeline field and acknowledgement stamp."""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)
