"""How a ``drkit`` process ends: its exit code, without the interpreter's teardown.

Native threads may still run when a command is done: a probe of a cluster that refused connections
waits out its metadata request in a daemon thread (drkit.kafka.probe), librdkafka's broker threads
reconnect under every client the command opened, delta-rs keeps its runtime. Python's teardown (module
clearing, the clients' destructors run by the garbage collector, the C library's exit handlers) races
them: a ``drkit offsets -o json`` that had printed its whole answer died of SIGSEGV (exit -11) on a loaded
CI machine with cluster B stopped. What the teardown does that a command relies on is done here, in the
order Python does it, and then the process ends at once with the command's code.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import NoReturn


def end_process(code: int) -> NoReturn:
    """End this process with ``code``: wait for its non-daemon threads (as ``sys.exit`` would), run the
    ``atexit`` functions (logging's flush, pyspark's, temporary folders' finalizers), flush stdout and
    stderr, then ``os._exit``. Only for a process of its own (``drkit`` from a shell): a caller's
    interpreter (tests, notebooks) ends its own way, and so does a process under a profiler (``python -m
    cProfile``), which writes its results after the command returns."""
    if sys.getprofile() is not None:
        sys.exit(code)
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
