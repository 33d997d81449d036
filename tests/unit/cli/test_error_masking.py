"""Runtime error lines are masked as config errors are: a secret quoted by a client library (a password, a
JAAS config, a URL with credentials) never reaches the terminal or the JSON error, whatever the error's kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drkit.cli.app import main
from drkit.config.loading import load_config
from drkit.config.model import DrkitConfig
from drkit.errors import ClusterError

SECRET = "pw-Zq81-never-shown"
JAAS = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="{SECRET}";'

CONFIG = f"""\
[state]
root = "state"

[clusters.A]
bootstrap_servers = "127.0.0.1:1"

[clusters.A.properties]
"security.protocol" = "SASL_SSL"
"sasl.mechanism" = "SCRAM-SHA-512"
"sasl.username" = "u"
"sasl.password" = "{SECRET}"

[clusters.B]
bootstrap_servers = "127.0.0.1:2"

[[flows]]
source = "A"
target = "B"
"""


class Failing:
    """A facade whose status fails with ``exc`` (what a broker or a library said, secret and all)."""

    def __init__(self, config: DrkitConfig, exc: Exception) -> None:
        self.config, self._exc = config, exc

    def status(self, flow: str | None = None) -> None:
        raise self._exc


@pytest.mark.parametrize(
    "exc",
    [
        ClusterError(f"cluster A refused: authentication failed for password {SECRET}"),
        RuntimeError(f"KafkaError{{code=_INVALID_ARG,str=sasl.jaas.config={JAAS}}}"),
        ValueError(f"could not open s3://key:{SECRET}@bucket/state"),
        RuntimeError(f"sasl.password={SECRET} rejected"),
    ],
    ids=["cluster-error", "unexpected-jaas", "url-credentials", "assignment"],
)
@pytest.mark.parametrize("output", [[], ["-o", "json"]], ids=["text", "json"])
def test_a_secret_in_a_runtime_error_is_masked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, exc: Exception, output: list[str]
) -> None:
    path = tmp_path / "drkit.toml"
    path.write_text(CONFIG)
    config = load_config(path)
    with pytest.raises(SystemExit) as info:
        main(["status", "-c", str(path), *output], facade_factory=lambda _: Failing(config, exc))  # type: ignore[arg-type,return-value]
    out, err = capsys.readouterr()
    assert info.value.code != 0
    assert SECRET not in out + err
    assert "********" in err
    if output:
        assert "********" in json.loads(out)["error"]
