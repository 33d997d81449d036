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

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


def test_a_table_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    layout = StateLayout(tmp_path)
    OperationTable(layout).append(
        OperationRecord("x", Action.FAILBACK, "A->B", (), None, True, {}, {}, "u", "h", "v", T0, T0)
    )
    DeltaTable(layout.operations).alter.set_table_properties({"drkit.schema.version": "0"}, raise_if_not_exists=False)
    with pytest.raises(StoreError, match="has schema version 0, this drkit needs 1"):
        OperationTable(layout).list()
