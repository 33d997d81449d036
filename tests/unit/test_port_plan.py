"""The integration tests' port plan (tests/support/ports.py): no two blocks share a port, every block
lies within the plan's span, and every integration module that starts a server takes its ports from
its own block, never by arithmetic of its own."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from support import ports

from drkit.localdev.clusters import LocalKafka

ROOT = Path(__file__).resolve().parents[2]
INTEGRATION = ROOT / "tests" / "integration"
#: Calls that bind a port: a LocalKafka, a LocalSpark, the S3 server, a TCP proxy.
STARTS_SERVER = re.compile(r"\b(LocalKafka|LocalSpark|S3Server\.start|BlackholeProxy)\(")
#: A port picked outside the plan: arithmetic on a base port, or a literal port given to a server.
OFF_PLAN = re.compile(
    r"BASE_PORT\s*[-+]|[-+]\s*\w*BASE_PORT\b|\.base\s*[-+]|base_port\s*=\s*\d|"
    r"(S3Server\.start|BlackholeProxy)\(\s*\d"
)


def test_no_two_blocks_share_a_port() -> None:
    for a, b in itertools.combinations(ports.PLAN, 2):
        shared = set(a.ports) & set(b.ports)
        assert not shared, f"port blocks {a.name} and {b.name} share {sorted(shared)}"


def test_every_block_lies_within_the_plan() -> None:
    for block in ports.PLAN:
        assert block.span > 0, block
        last = block.offset + block.span - 1
        assert block.offset >= 0, block
        assert last < ports.PLAN_SPAN, f"port block {block.name} ends at +{last}, past the plan's {ports.PLAN_SPAN}"


def test_names_and_owners_are_unique_and_exist() -> None:
    names = [b.name for b in ports.PLAN]
    owners = [b.owner for b in ports.PLAN]
    assert len(set(names)) == len(names), names
    assert len(set(owners)) == len(owners), owners
    for block in ports.PLAN:
        assert getattr(ports, block.name) is block, f"{block.name} is not support.ports.{block.name}"
        assert (ROOT / block.owner).is_file(), f"port block {block.name}: no module {block.owner}"


def test_a_kafka_pair_fits_its_span(tmp_path: Path) -> None:
    """A two-cluster LocalKafka's broker and controller ports (drkit.localdev.clusters) fit KAFKA_PAIR_SPAN."""
    for index, alias in enumerate(("A", "B")):  # the clusters' positions, as LocalKafka.up records them
        (tmp_path / alias).mkdir()
        (tmp_path / alias / "cluster.index").write_text(f"{index}\n")
    shown = LocalKafka(tmp_path, base_port=ports.SESSION.base).status()
    used = {p for cluster in shown for p in (cluster.port, cluster.controller_port)}
    assert len(used) == 4, shown
    assert used <= set(ports.SESSION.ports), (sorted(used), ports.SESSION.ports)


def test_at_refuses_an_index_outside_the_block() -> None:
    assert ports.LONG_OUTAGE.at(40) == ports.LONG_OUTAGE.base + 40
    with pytest.raises(ValueError, match="LONG_OUTAGE spans 41 ports"):
        ports.LONG_OUTAGE.at(41)


def _starters() -> dict[str, str]:
    found = {}
    for path in sorted(INTEGRATION.rglob("*.py")):
        text = path.read_text()
        if STARTS_SERVER.search(text):
            found[path.relative_to(ROOT).as_posix()] = text
    return found


def test_every_module_that_starts_a_server_owns_a_block() -> None:
    starters = _starters()
    assert "tests/integration/conftest.py" in starters  # the scan sees the session's clusters
    owners = {b.owner: b for b in ports.PLAN}
    for module, text in starters.items():
        assert module in owners, f"{module} starts a server but has no block in tests/support/ports.py"
        block = owners[module]
        assert re.search(rf"\b{block.name}\.(base|at)\b", text), f"{module} does not take its ports from {block.name}"
        wrong = [b.name for b in ports.PLAN if b is not block and re.search(rf"\b{b.name}\.(base|at)\b", text)]
        assert not wrong, f"{module} uses the blocks of other modules: {wrong}"


def test_no_integration_module_picks_a_port_off_the_plan() -> None:
    for path in sorted(INTEGRATION.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            assert not OFF_PLAN.search(line), (
                f"{path.relative_to(ROOT)}:{number} picks a port outside tests/support/ports.py: {line.strip()}"
            )
