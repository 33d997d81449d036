"""Where drkit keeps its state (``[state]``, ``[state.storage]``): a local folder or an object store.

Invariant: a :class:`StateConfig` that exists has a root drkit can parse (a path without shell syntax,
``~`` and ``~user`` expanded as a shell would, or an object-store URI) whose storage settings fit it
(:func:`drkit.core.storage.storage_problem`), and a host folder only beside an object-store root.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from drkit.config.base import ConfigModel, KeyedError
from drkit.config.paths import home_problem, shell_syntax_problem
from drkit.config.properties import flatten_properties
from drkit.core.storage import RootUri, StorageSettings, options_of, parse_root, storage_problem


class StorageConfig(ConfigModel):
    """How to reach an object-store state root (``[state.storage]``): S3's settings by name, anything else
    delta-rs takes as ``options``. Secrets (keys, token) are masked by ``config show`` like client properties."""

    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    #: Path-style requests (``http://host/bucket/key``): what S3-compatible servers such as MinIO need.
    path_style: bool = False
    options: dict[str, str] = Field(default_factory=dict)

    @field_validator("options", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        return flatten_properties(value)

    def settings(self) -> StorageSettings:
        return StorageSettings(
            self.endpoint,
            self.region,
            self.access_key_id,
            self.secret_access_key,
            self.session_token,
            self.path_style,
            options_of(self.options),
        )


class StateConfig(ConfigModel):
    """Where drkit keeps its Delta tables, Spark checkpoints and run files: a local folder or an object store."""

    root: str = ".drkit/state"
    #: This host's own folder for a remote root: job locks, PID files, logs, drill reports (default: a folder
    #: per root under ``$DRKIT_CACHE``, ``~/.cache/drkit``). With a local root they live under the root.
    local_dir: str | None = None
    storage: StorageConfig = Field(default_factory=StorageConfig)

    @field_validator("root")
    @classmethod
    def _root(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        problem = shell_syntax_problem(value) or home_problem(value)
        if problem:
            raise ValueError(problem)
        parse_root(value)  # ValueError: the reason, under state.root
        return value

    @field_validator("local_dir")
    @classmethod
    def _local_dir(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.strip():
            raise ValueError("must not be empty")
        problem = shell_syntax_problem(value) or home_problem(value)
        if problem:
            raise ValueError(problem)
        if "://" in value:
            raise ValueError("is this host's own folder: a local path, not a URI")
        return value

    @model_validator(mode="after")
    def _storage(self) -> StateConfig:
        found = parse_root(self.root)
        problem = storage_problem(found if isinstance(found, RootUri) else None, self.storage.settings())
        if problem is not None:
            raise KeyedError(f"state.storage.{problem[0]}", problem[1])
        if self.local_dir is not None and not isinstance(found, RootUri):
            raise KeyedError("state.local_dir", "applies to an object-store root only: a local root holds it all")
        return self
