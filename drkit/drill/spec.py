"""A drill spec: one TOML file naming the flow, the workload, the disaster and the budget.

TOML rather than blocks inside the runbooks: a spec is data a machine reads whole (validated, every
key named in errors), while a runbook is prose a person follows; the drift between the two is
checked by a test instead (every drkit command a runbook names exists with its flags, and the drill
runs the runbook's steps through the same facade methods).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from drkit.core.drill import Budget, DisasterKind
from drkit.errors import ConfigError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class DrillSection(_Strict):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    flow: str
    disaster: DisasterKind = DisasterKind.KILL_SOURCE
    #: After the group resumed on the target: the source comes back, failback moves the group home, and
    #: it reads there what it had not processed (the records the mirror never copied included).
    failback: bool = False


class Workload(_Strict):
    topic: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    partitions: int = Field(default=3, ge=1, le=1000)
    keys: int = Field(default=20, ge=1, le=100_000)
    rate_per_second: float = Field(default=100.0, gt=0, le=100_000)
    group: str = Field(min_length=1)
    #: Traffic before the disaster, once the mirror copies and the translator checkpoints.
    warmup_seconds: float = Field(default=10.0, ge=0, le=3600)
    #: The group's consumers stop this long before the disaster, so the translator confirms their last
    #: commit: the drill then measures translation alone. 0: they die with the source, and re-reads up to
    #: one translator interval are expected (allow them in [budget] redelivered).
    consumers_stop_before_disaster_seconds: float = Field(default=5.0, ge=0, le=600)
    #: Seconds without a new record after which the target consumer is done.
    idle_seconds: float = Field(default=8.0, gt=0, le=600)
    #: Seconds the mirror and the translator get to copy and checkpoint the first records.
    ready_timeout_seconds: float = Field(default=300.0, gt=0, le=3600)


class Jobs(_Strict):
    #: Broken setups on purpose: each fails the drill with the reason it would in life.
    mirror: bool = True
    #: Without the translator the checkpoints go stale: failover refuses.
    translator: bool = True
    #: The mirror is killed this long before the disaster, the producers going on: a mirror that fell
    #: behind. The records written meanwhile are the RPO, judged against [budget] rpo_records.
    mirror_lag_seconds: float = Field(default=0.0, ge=0, le=600)
    #: A member of the group is already consuming on the target (an instance started there too early):
    #: failover refuses to move a group with active members.
    group_active_on_target: bool = False


class BudgetSection(_Strict):
    rpo_records: int | None = Field(default=None, ge=0)
    redelivered: int = Field(default=0, ge=0)
    lost: int = Field(default=0, ge=0)


class LocalKafkaSection(_Strict):
    #: Where scripts/local-kafka keeps the brokers, relative to the spec file (kill_source and
    #: partition_source need it).
    state_dir: str = ".drkit-local"
    #: Bring a killed source back when the drill ends (a partitioned one is always thawed).
    restore: bool = True


class DrillSpec(_Strict):
    drill: DrillSection
    workload: Workload
    jobs: Jobs = Jobs()
    budget: BudgetSection = BudgetSection()
    local_kafka: LocalKafkaSection = LocalKafkaSection()
    path: str = ""

    def budget_rules(self) -> Budget:
        return Budget(self.budget.rpo_records, self.budget.redelivered, self.budget.lost)

    def local_state(self) -> Path:
        state = Path(self.local_kafka.state_dir).expanduser()
        return state if state.is_absolute() else Path(self.path).parent / state


def load_spec(path: Path) -> DrillSpec:
    """Read and validate a drill spec; every error is one line naming the file and the key."""
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"drill spec {path} not found") from None
    except IsADirectoryError:
        raise ConfigError(f"drill spec {path} is a directory, not a file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"drill spec {path} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"drill spec {path} is not valid TOML: {exc}") from None
    try:
        return DrillSpec.model_validate({**data, "path": str(path)})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"drill spec {path}: {where}: {first['msg']}") from None
