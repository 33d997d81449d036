"""Tests of file permissions run where permissions bind, also when the suite runs as root (as in CI).

Root reads and writes through any mode bit by its capabilities CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH,
so such a test run by root proves nothing. Instead of skipping, :func:`permissions_bind` runs the test
again in a child pytest under ``setpriv`` with every capability dropped (effective, permitted,
inheritable, bounding): the child is uid 0 without any privilege, so the mode bits of root's own files
bind it as they bind any user, and the repository and virtualenv stay readable wherever the checkout
is (a clone under a 0700 /root included, which another uid could not read). The child must pass the
test itself: a child that is still privileged, or that skips, fails the parent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

#: Set in the child: it must not start another child.
CHILD_ENV = "DRKIT_TEST_WITHOUT_CAPABILITIES"
#: Bits of CAP_DAC_OVERRIDE (1) and CAP_DAC_READ_SEARCH (2) in /proc/self/status's CapEff.
_OVERRIDES = (1 << 1) | (1 << 2)


def overrides_permissions() -> bool:
    """Whether this process reads and writes through mode bits (root with its capabilities)."""
    if os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/status") as status:
            effective = next(line for line in status if line.startswith("CapEff:"))
    except (OSError, StopIteration):
        return True  # root where capabilities cannot be read: assume the worst
    return bool(int(effective.split()[1], 16) & _OVERRIDES)


def permissions_bind(request: pytest.FixtureRequest) -> bool:
    """True when mode bits bind this process: the test body runs here. Otherwise the test runs again in a
    child without capabilities, which must pass it, and False: the caller returns (nothing left to do)."""
    if not overrides_permissions():
        return True
    if os.environ.get(CHILD_ENV):
        pytest.fail("the child was started without capabilities, yet it still reads and writes through mode bits")
    nodeid = request.node.nodeid
    function = nodeid.split("[", 1)[0]  # one child for all of a function's parameters
    if function not in _children:
        _children[function] = _run_child(function, request.config.rootpath)
    shown = _children[function]
    passed = any(line.startswith(f"{nodeid} PASSED") for line in shown.splitlines())
    assert passed, f"{nodeid} did not pass without root's capabilities:\n{shown}"
    return False


#: The children's output by test function: its parameters share one child.
_children: dict[str, str] = {}


def _run_child(function: str, rootpath: Path) -> str:
    setpriv = shutil.which("setpriv")
    assert setpriv, "running as root: setpriv (util-linux) is needed to run this permission test without privileges"
    command = [
        setpriv,
        "--inh-caps=-all",
        "--ambient-caps=-all",
        "--bounding-set=-all",
        "--",
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "-v",
        "-rs",
        function,
    ]
    child = subprocess.run(
        command, cwd=rootpath, env={**os.environ, CHILD_ENV: "1"}, capture_output=True, text=True, timeout=300
    )
    # -v names each test with its outcome: the parent checks its own line (a skip is not a pass).
    return f"$ {' '.join(command)}\n{child.stdout}\n{child.stderr}"
