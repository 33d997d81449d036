"""``[flows.fencing]``: principals only, never a wildcard; off without producers."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fakes import two_cluster_config

from drkit.errors import ConfigError


def flow(fencing: dict[str, object]) -> list[dict[str, object]]:
    return [{"source": "A", "target": "B", "fencing": fencing}]


def test_producers_are_principals_and_fencing_is_off_without_them(tmp_path: Path) -> None:
    config = two_cluster_config(tmp_path, flows=flow({"producers": ["User:b", "User:a", "User:a"]}))
    assert config.flows[0].fencing.producers == ["User:a", "User:b"] and config.flows[0].fencing.on
    assert not two_cluster_config(tmp_path, flows=[{"source": "A", "target": "B"}]).flows[0].fencing.on


@pytest.mark.parametrize("principal", ["User:*", "orders-app", "User:", "*"])
def test_a_wildcard_or_a_bare_name_is_refused_with_what_to_give(tmp_path: Path, principal: str) -> None:
    with pytest.raises(ConfigError, match="no Kafka principal: give <type>:<name>"):
        two_cluster_config(tmp_path, flows=flow({"producers": [principal]}))
