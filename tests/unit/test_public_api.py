"""``drkit``'s public API: every name of ``__all__`` resolves, and ``import drkit`` stays cheap."""

from __future__ import annotations

import subprocess
import sys

import drkit


def test_every_public_name_resolves() -> None:
    for name in drkit.__all__:
        assert getattr(drkit, name) is not None, name
    assert drkit.Drkit.__module__ == "drkit.service" and drkit.load_config.__module__.startswith("drkit.config")
    assert sorted(drkit.__all__) == sorted(set(drkit.__all__))  # no name twice


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        drkit.nothing_here  # noqa: B018
    except AttributeError as exc:
        assert "nothing_here" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")


def test_importing_drkit_and_its_facade_loads_neither_spark_nor_delta() -> None:
    code = (
        "import sys, drkit\n"
        "drkit.Drkit, drkit.load_config, drkit.StatusReport\n"
        "print(sorted(m for m in ('pyspark', 'py4j', 'delta', 'deltalake') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
