"""The batch Spark replays when a mirror starts, and when drkit may settle it before Spark does.

Spark writes a batch's planned offsets to its offset log before the batch runs and its commit after it; a
process that died in between leaves the newest logged batch without a commit, and the next query runs it
again (a replay). drkit writes a batch's syncs before Spark commits it, so a replay whose syncs are durable
has nothing to copy: the batch callback skips it (drkit.mirror.job). Skipping costs a whole batch cycle at
the start, on a takeover's path, so the mirror settles such a replay before its query starts: it writes the
batch's commit itself, as Spark would after the skipped batch.

Invariant: only the newest logged batch, only when it is exactly one past the newest commit (Spark's own
replay rule), and only when its syncs are durable (the caller checks); a commit is never written for a batch
whose records may not be on the target.
"""

from __future__ import annotations

from collections.abc import Iterable


def replayed_batch(logged: Iterable[int], committed: Iterable[int]) -> int | None:
    """The batch Spark would run again at the start: the newest logged, one past the newest commit (None: none,
    or a log drkit does not recognise, left to Spark)."""
    logs, commits = set(logged), set(committed)
    if not logs:
        return None
    newest = max(logs)
    if newest in commits:
        return None
    previous = max(commits) if commits else -1
    return newest if newest == previous + 1 else None
