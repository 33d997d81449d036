"""docs/reliability.md names, for every failure, the test that proves its guarantee: each named test
file (and test function) exists, so the document cannot point at a test that was renamed or removed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reliability.md"


def test_every_test_the_reliability_document_names_exists() -> None:
    cited = set(re.findall(r"`(tests/[^`]+)`", DOC.read_text()))
    assert len(cited) > 20
    for ref in sorted(cited):
        path, _, function = ref.partition("::")
        assert (ROOT / path).exists(), f"docs/reliability.md names {path}, which does not exist"
        if function:
            assert f"def {function}(" in (ROOT / path).read_text(), f"docs/reliability.md names {ref}"
