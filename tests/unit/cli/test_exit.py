"""drkit.cli.exit: a drkit process ends with its code, its non-daemon threads and atexit functions done, its
output flushed, and without the interpreter's teardown (where native client threads crashed it)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import atexit, os, sys, threading, time
    from drkit.cli.exit import end_process

    class Torn:
        def __del__(self):  # runs when the interpreter's teardown clears this module
            os.write(1, b"teardown\\n")

    kept = Torn()
    atexit.register(lambda: os.write(1, b"atexit\\n"))
    threading.Thread(target=lambda: (time.sleep(0.3), os.write(1, b"thread\\n")), daemon=False).start()
    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()  # never waited for
    sys.stdout.write("buffered\\n")  # still in the buffer when the process ends
    {end}(3)
    """
)


def run(end: str) -> tuple[int, list[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(end=end)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"},  # stdout buffered, as in a pipe
    )
    return proc.returncode, proc.stdout.split()


def test_the_process_ends_with_its_code_after_its_threads_and_atexit_without_teardown() -> None:
    code, lines = run("end_process")
    assert code == 3
    assert sorted(lines) == ["atexit", "buffered", "thread"]
    assert lines.index("thread") < lines.index("atexit")  # threads first, as sys.exit does


def test_sys_exit_would_have_run_the_teardown() -> None:
    # The contrast the first test relies on: the marker is printed by the teardown end_process skips.
    code, lines = run("sys.exit")
    assert code == 3 and "teardown" in lines
