"""No secret of the config reaches what the operator commands print, log or write.

Secrets in the clusters' client properties; failover (dry run and apply), failback, status, offsets and
history run through the CLI on fake clusters, with the real delta-rs audit table and run files under
the state root. Every line printed, every log record, every cell of the ``operations`` table and every
text file under the state root is searched for each secret value.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from support.fakes import NOW_MS, world

from drkit.cli.app import main
from drkit.config import parse_config
from drkit.core.offsets import SyncRange
from drkit.service import Drkit
from drkit.store.operations import OperationTable
from drkit.store.runs import RunFiles, TranslatorRun

JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule"
SECRETS = ("op-sasl-password-8181", "op-jaas-password-8282", "op-oauth-secret-8383")


def _config(tmp_path: Path) -> Any:
    properties = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "drkit",
        "sasl.password": SECRETS[0],
        "sasl.jaas.config": f'{JAAS} required password="{SECRETS[1]}";',
        "sasl.oauthbearer.client.secret": SECRETS[2],
    }
    data = {
        "clusters": {
            "A": {"bootstrap_servers": "127.0.0.1:1", "properties": properties},
            "B": {"bootstrap_servers": "127.0.0.1:2", "properties": properties},
        },
        "flows": [{"source": "A", "target": "B"}, {"source": "B", "target": "A"}],
        "state": {"root": str(tmp_path / "state")},
    }
    return parse_config(data, str(tmp_path / "drkit.toml"))


def test_no_secret_in_operator_output_logs_or_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    w = world(tmp_path, _config(tmp_path))
    w.syncs.add("A->B", "orders", "A.orders", 0, SyncRange(0, 99, 0, 99))
    w.a.ends[("orders", 0)] = 120
    w.checkpoints.add("A->B", "billing", "orders", "A.orders", 0, 40)
    w.b.offsets["billing"] = {("A.orders", 0): 90}
    context = w.context
    layout = context.layout
    RunFiles(layout).write_last_run("A->B", TranslatorRun(NOW_MS, 0.1, 1, 1, 0, ("billing",)))
    real = dataclasses.replace(context, operations=OperationTable(layout))
    printed: list[str] = []
    caplog.set_level(logging.DEBUG)
    commands = [
        ["failover", "--flow", "A->B", "--group", "billing"],
        ["failover", "--flow", "A->B", "--group", "billing", "--apply", "--yes"],
        ["failback", "--flow", "A->B", "--group", "billing"],
        ["status"],
        ["offsets", "--group", "billing"],
        ["history"],
        ["config", "show", "-c", str(tmp_path / "drkit.toml")],
    ]
    _write_toml(tmp_path / "drkit.toml", w.config)
    for args in commands:
        for output in ([], ["-o", "json"]):
            with pytest.raises(SystemExit):
                main([*args, *output], facade_factory=lambda path: Drkit(w.config, context=real))
            out, err = capsys.readouterr()
            printed += [out, err]
    assert any("billing" in text for text in printed)  # the commands did run and print
    assert any("sasl.password" in text for text in printed)  # config show printed the properties, masked
    logged = [r.getMessage() for r in caplog.records]
    rows = DeltaTable(str(layout.operations)).to_pyarrow_table().to_pylist()
    assert len(rows) >= 4  # the audit trail was written: dry runs, the apply, the failback plan
    cells = [str(v) for row in rows for v in row.values()]
    files = [
        p.read_text(errors="replace")
        for p in Path(layout.root).rglob("*")
        if p.is_file() and p.suffix in (".json", ".crc", "")
    ]
    for secret in SECRETS:
        for where, texts in (
            ("output", printed),
            ("logs", logged),
            ("operations table", cells),
            ("state files", files),
        ):
            leaks = [t for t in texts if secret in t]
            assert not leaks, f"{secret} appears in the {where}: {leaks[0][:300]}"


def _write_toml(path: Path, config: Any) -> None:
    """The same config as a file (for `config show`, which reads one)."""
    lines = [f'[state]\nroot = "{config.state.root}"\n']
    for alias, cluster in config.clusters.items():
        lines.append(f'[clusters.{alias}]\nbootstrap_servers = "{cluster.bootstrap_servers}"\n')
        lines.append(f"[clusters.{alias}.properties]")
        lines += [
            f"{k!r} = {v!r}".replace("'", '"', 2) if '"' not in v else f"'{k}' = '{v}'"
            for k, v in cluster.properties.items()
        ]
        lines.append("")
    lines.append('[[flows]]\nsource = "A"\ntarget = "B"\n\n[[flows]]\nsource = "B"\ntarget = "A"\n')
    path.write_text("\n".join(lines))
