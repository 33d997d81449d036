"""The Kafka clients' secrets for Spark tasks: they travel as a file Spark serves, never inside a task.

A copy task's closure is pickled by the driver, broadcast to the executors (where the block manager may
write it to disk) and handed to a Python worker; a Spark option is shown in the UI and written to the event
log. Neither may hold a password, a JAAS config or a private key. So the driver splits each client's
settings (:func:`split`: the keys drkit.config.secrets calls secret, and any value that holds a secret or a
PEM private key), keeps the public part in the task, and writes the secret part to a file of its own
(mode 0600, in a 0700 folder, removed when the driver exits) that it adds to the session with
``SparkContext.addFile``. The task carries only the file's name (:class:`SecretRef`); an executor fetches
the file from the driver over Spark's RPC (authenticated and encrypted with ``[spark] secure``:
drkit.core.spark_security), narrows its copy to 0600 and reads it once per process (:func:`settings`).

Why a file through Spark and not the executors' environment or an image: the executors of every master
get it the same way, from the only process that holds the config, over the one channel Spark already
authenticates; nothing is configured per executor. What it does not do: Spark writes its copy on an
executor with the worker's umask before it is narrowed, and an executor's copy stays in the application's
work folder until the worker cleans it (docs/deploy.md).

Invariant: a :class:`SecretRef` and the public settings hold no secret value; ``settings(public, ref, s)``
equals the settings that were sealed; a content sealed twice is one file.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drkit.config import is_secret_key, mask_text, secret_values

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: A value holding a PEM private key (``ssl.key.pem``, or a key pasted under another name).
_PRIVATE_KEY = "PRIVATE KEY-----"


@dataclass(frozen=True)
class SecretRef:
    """The name (in SparkFiles) of the file holding the secret settings of a task's clients, by section."""

    name: str

    def section(self, section: str) -> dict[str, str]:
        return dict(_loaded(self.name).get(section, {}))


def split(conf: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(public, secret) settings of one client: secret keys, values that hold a secret, PEM private keys."""
    hidden = secret_values({k: v for k, v in conf.items() if isinstance(v, str)})
    public: dict[str, Any] = {}
    secret: dict[str, str] = {}
    for key, value in conf.items():
        text = value if isinstance(value, str) else None
        if text is not None and (is_secret_key(key) or _PRIVATE_KEY in text or mask_text(text, hidden) != text):
            secret[key] = text
        else:
            public[key] = value
    return public, secret


def settings(public: dict[str, Any], ref: SecretRef | None, section: str) -> dict[str, Any]:
    """A client's whole settings where it runs: the task's public part and its section of the secret file."""
    return dict(public) if ref is None else {**public, **ref.section(section)}


class TaskSecrets:
    """The driver's side: seals sections of client settings, adding one file per distinct secret content."""

    def __init__(self, add_file: Callable[[Path], None]) -> None:
        self._add_file = add_file
        self._folder: Path | None = None
        self._sealed: dict[str, SecretRef] = {}

    def seal(self, sections: dict[str, dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], SecretRef | None]:
        """The public part of each section, and the reference to a file holding the secret parts (None: none)."""
        public: dict[str, dict[str, Any]] = {}
        secret: dict[str, dict[str, str]] = {}
        for name, conf in sections.items():
            public[name], hidden = split(conf)
            if hidden:
                secret[name] = hidden
        if not secret:
            return public, None
        content = json.dumps(secret, sort_keys=True)
        ref = self._sealed.get(content)
        if ref is None:
            ref = self._sealed[content] = self._write(content)
        return public, ref

    def _write(self, content: str) -> SecretRef:
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="drkit-task-secrets-"))  # 0700
            atexit.register(shutil.rmtree, self._folder, True)
        # A random name: a digest of the content would let anyone who sees the name test guessed passwords.
        name = f"drkit-secrets-{uuid.uuid4().hex}.json"
        path = self._folder / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(content)
        _LOADED[name] = json.loads(content)  # the driver resolves its own from memory
        self._add_file(path)
        return SecretRef(name)


def spark_files(spark: SparkSession) -> Callable[[Path], None]:
    """Adds a file to the session (served to every executor); the driver's own copy narrowed to 0600."""

    def add(path: Path) -> None:
        from pyspark import SparkFiles

        spark.sparkContext.addFile(str(path))
        with contextlib.suppress(OSError):
            os.chmod(SparkFiles.get(path.name), 0o600)

    return add


#: The secret files this process has read (by name): a Python worker reads each once.
_LOADED: dict[str, dict[str, dict[str, str]]] = {}


def _loaded(name: str) -> dict[str, dict[str, str]]:
    found = _LOADED.get(name)
    if found is None:
        from pyspark import SparkFiles

        path = SparkFiles.get(name)
        with contextlib.suppress(OSError):
            os.chmod(path, 0o600)
        with open(path, encoding="utf-8") as f:
            found = _LOADED[name] = json.load(f)
    return found
