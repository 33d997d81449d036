"""The memory of a process and all its descendants, sampled from /proc (psutil is not in the venv).

A benchmarked process is a tree: drkit's Python driver, the Spark JVM it launches, PySpark's daemon and workers;
a CLI process and whatever it starts. The peak is the largest sum over the tree seen at one sample, so a spike
shorter than the interval can be missed. RSS counts pages shared between forked processes once per process;
PSS (optional: reading smaps_rollup costs) counts them proportionally. Each process's own high-water mark
(VmHWM) and name are kept too, the name read at every sample: spark-submit (bash) execs java.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def process_tree(root: int) -> list[int]:
    """``root`` and every process below it, as /proc shows them now."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def proc_kb(text: str, key: str) -> int:
    """A ``key: N kB`` field of a /proc file's text, 0 if absent."""
    for line in text.splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    return 0


def proc_name(status: str) -> str:
    for line in status.splitlines():
        if line.startswith("Name:"):
            return line.split(None, 1)[1].strip() if len(line.split()) > 1 else "?"
    return "?"


@dataclass
class TreeMemory:
    """Samples the tree below ``root`` every ``interval`` seconds between ``start()`` and ``stop()``."""

    root: int
    interval: float = 0.5
    pss: bool = False
    peak_rss_kb: int = 0
    peak_pss_kb: int = 0
    hwm_kb: dict[int, int] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    samples: int = 0
    stopped: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def sample(self) -> None:
        rss = pss = 0
        for pid in process_tree(self.root):
            try:
                status = Path(f"/proc/{pid}/status").read_text()
                rollup = Path(f"/proc/{pid}/smaps_rollup").read_text() if self.pss else ""
            except OSError:
                continue  # exited meanwhile
            rss += proc_kb(status, "VmRSS:")
            pss += proc_kb(rollup, "Pss:")
            hwm = proc_kb(status, "VmHWM:")
            if hwm:
                self.hwm_kb[pid] = max(self.hwm_kb.get(pid, 0), hwm)
                self.names[pid] = proc_name(status)
        self.peak_rss_kb = max(self.peak_rss_kb, rss)
        self.peak_pss_kb = max(self.peak_pss_kb, pss)
        self.samples += 1

    def run(self) -> None:
        while not self.stopped.is_set():
            self.sample()
            self.stopped.wait(self.interval)

    def start(self) -> TreeMemory:
        self.thread = threading.Thread(target=self.run, name="tree-memory", daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        if self.thread is not None:
            self.thread.join()

    def peak_rss_mb(self) -> float:
        return round(self.peak_rss_kb / 1024, 1)

    def hwm_mb_of(self, name_prefix: str) -> float | None:
        """The summed high-water marks of the processes whose name starts so (e.g. ``java``); None if none."""
        kb = sum(kb for pid, kb in self.hwm_kb.items() if self.names.get(pid, "").startswith(name_prefix))
        return round(kb / 1024, 1) if kb else None

    def summary(self) -> dict[str, Any]:
        by_name: dict[str, int] = {}
        for pid, kb in self.hwm_kb.items():
            by_name[self.names[pid]] = by_name.get(self.names[pid], 0) + kb
        return {
            "peak_rss_mb": self.peak_rss_mb(),
            "peak_pss_mb": round(self.peak_pss_kb / 1024, 1),
            "sum_process_hwm_mb": round(sum(self.hwm_kb.values()) / 1024, 1),
            "hwm_mb_by_process_name": {k: round(v / 1024, 1) for k, v in sorted(by_name.items())},
            "processes_seen": len(self.hwm_kb),
            "samples": self.samples,
            "sample_interval_s": self.interval,
        }
