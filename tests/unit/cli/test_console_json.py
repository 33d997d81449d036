"""``--output json`` prints JSON, even for figures that are not finite (Python would write NaN/Infinity)."""

from __future__ import annotations

import json
import math

import pytest

from drkit.cli.console import Output, emit


def test_non_finite_figures_are_null_so_stdout_stays_json(capsys: pytest.CaptureFixture[str]) -> None:
    emit({"hours": math.inf, "rate": [1.5, math.nan], "nested": {"x": -math.inf}, "n": 3}, Output.json)
    out = capsys.readouterr().out
    assert json.loads(out) == {"hours": None, "rate": [1.5, None], "nested": {"x": None}, "n": 3}
    assert "Infinity" not in out and "NaN" not in out
