"""The one door to the Delta tables: the schema-version guard (no JVM: milliseconds).

That Spark reads the same rows is tests/integration/store/test_spark_shares_tables.py.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from drkit.core.audit import Action, OperationRecord
from drkit.errors import StoreError
from drkit.layout import StateLayout
from drkit.store.operations import OperationTable

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


def test_a_table_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    layout = StateLayout(tmp_path)
    OperationTable(layout).append(
        OperationRecord("x", Action.FAILBACK, "A->B", (), None, True, {}, {}, "u", "h", "v", T0, T0)
    )
    DeltaTable(str(layout.operations)).alter.set_table_properties(
        {"drkit.schema.version": "0"}, raise_if_not_exists=False
    )
    with pytest.raises(StoreError, match="has schema version 0, this drkit needs 1"):
        OperationTable(layout).list()


def test_a_table_between_the_two_commits_of_its_creation_reads_as_not_there_yet(tmp_path: Path) -> None:
    """delta-rs takes drkit's schema-version property only after the create commit: a reader in between
    (status while the mirror starts) sees no table, not a table of the wrong version."""
    from deltalake import DeltaTable

    from drkit.store import delta
    from drkit.store.operations import SPEC

    layout = StateLayout(tmp_path)
    DeltaTable.create(str(layout.operations), schema=SPEC.schema)
    assert delta.open_table(layout.operations, "operations") is None
    assert OperationTable(layout).list() == []
    delta.ensure(layout.operations, SPEC)  # the creator's second commit
    table = delta.open_table(layout.operations, "operations")
    assert table is not None and table.metadata().configuration["drkit.schema.version"] == delta.SCHEMA_VERSION
    delta.ensure(layout.operations, SPEC)  # a second creator: nothing more to do
    assert DeltaTable(str(layout.operations)).version() == 1


def test_a_creation_that_loses_to_another_writers_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes' first writes at once (two applies of one state root): both find no table, both create it,
    one commit of version 0 wins and the other's create fails. The loser waits for the winner's table and goes
    on; an apply must not fail for it (seen once as a concurrent failover exiting 6)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    from drkit.store import delta
    from drkit.store.operations import SPEC

    layout = StateLayout(tmp_path)
    real = DeltaTable.create

    def lost(*args: object, **kwargs: object) -> DeltaTable:
        real(str(layout.operations), schema=SPEC.schema)  # the other writer, both of its commits
        DeltaTable(str(layout.operations)).alter.set_table_properties(
            {"drkit.schema.version": delta.SCHEMA_VERSION}, raise_if_not_exists=False
        )
        raise DeltaError("Transaction failed: version 0 already exists")

    monkeypatch.setattr(DeltaTable, "create", lost)
    delta.ensure(layout.operations, SPEC)
    OperationTable(layout).append(
        OperationRecord("x", Action.FAILOVER, "A->B", (), None, True, {}, {}, "u", "h", "v", T0, T0)
    )
    assert [r.id for r in OperationTable(layout).list()] == ["x"]


def test_a_creation_that_fails_with_no_table_made_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    from drkit.store import delta
    from drkit.store.operations import SPEC

    def refused(*args: object, **kwargs: object) -> DeltaTable:
        raise DeltaError("Permission denied")

    monkeypatch.setattr(DeltaTable, "create", refused)
    monkeypatch.setattr(delta, "CREATED_MEANWHILE_SECONDS", 0.1)
    with pytest.raises(StoreError, match=r"cannot write Delta table operations at .*Permission denied"):
        delta.ensure(StateLayout(tmp_path).operations, SPEC)
