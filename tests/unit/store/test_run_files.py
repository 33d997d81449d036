"""The record of the source's end offsets: a damaged file is a StoreError naming it, and is replaced by the
next observation (failover with the source down once died on it with an unexpected IndexError)."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkit.core.status import EndsObservation
from drkit.errors import StoreError
from drkit.layout import JobKind, StateLayout
from drkit.store.runs import RunFiles

DAMAGED = [
    pytest.param('{"at_ms": 1, "ends": {"orders0": 5}}', id="key-without-partition"),
    pytest.param('{"at_ms": 1, "ends": {"orders/x": 5}}', id="partition-not-a-number"),
    pytest.param('{"at_ms": 1, "ends": ["orders/0"]}', id="ends-not-a-table"),
    pytest.param('{"ends": {"orders/0": 5}}', id="no-time"),
    pytest.param('{"at_ms": 2, "ends": {"orders/0": 5}, "previous": {"at_ms": "x"}}', id="previous-damaged"),
    pytest.param("{not json", id="not-json"),
    pytest.param("[1, 2]", id="not-an-object"),
    pytest.param("", id="empty"),
]


@pytest.mark.parametrize("text", DAMAGED)
def test_a_damaged_record_is_one_store_error_naming_the_file(tmp_path: Path, text: str) -> None:
    runs = RunFiles(StateLayout(tmp_path))
    path = Path(runs.layout.source_ends(JobKind.MIRROR, "A->B"))
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(StoreError) as error:
        runs.source_ends(JobKind.MIRROR, "A->B")
    assert str(error.value).startswith(f"{path}: the record of the source's end offsets is damaged")
    assert "\n" not in str(error.value)
    assert path.read_text() == text  # nothing changed


def test_the_next_observation_replaces_a_damaged_record(tmp_path: Path) -> None:
    runs = RunFiles(StateLayout(tmp_path))
    path = Path(runs.layout.source_ends(JobKind.TRANSLATOR, "A->B"))
    path.parent.mkdir(parents=True)
    path.write_text('{"at_ms": 1, "ends": {"orders0": 5}}')
    runs.observe_source_ends(JobKind.TRANSLATOR, "A->B", EndsObservation(10, {("orders", 0): 7}))
    assert runs.source_ends(JobKind.TRANSLATOR, "A->B") == (EndsObservation(10, {("orders", 0): 7}), None)


def test_no_record_is_no_observation(tmp_path: Path) -> None:
    assert RunFiles(StateLayout(tmp_path)).source_ends(JobKind.MIRROR, "A->B") == (None, None)
