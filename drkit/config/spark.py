"""The Spark master and the driver's network (``[spark]``; drkit.runtime.spark, docs/deploy.md).

Invariant: a :class:`SparkConfig` that exists names a master Spark can parse, driver addresses Spark can
use (a host name or an IP address, no URL, no port) and extra properties Spark reads (``spark.*``), none
of them one of the settings ``[spark]`` has a checked key for. Spark's security (``secure``, on by
default: drkit.core.spark_security) is one key, not three properties to keep in step.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from drkit.config.base import ConfigModel
from drkit.config.properties import PropertyError, flatten_properties
from drkit.core.spark_security import SECURE_SETTINGS

#: What SparkContext accepts as a master (Spark 4): local, local[N|*], local[N|*,F], local-cluster,
#: standalone (HA: several host:port), YARN, Kubernetes.
_SPARK_MASTER = re.compile(
    r"local(?:\[(?:\*|[1-9]\d*)(?:,[1-9]\d*)?\])?"
    r"|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]"
    r"|spark://[^\s,/:]+:\d+(?:,[^\s,/:]+:\d+)*"
    r"|yarn"
    r"|k8s://\S+"
)
#: A DNS host name (RFC 1123 labels; a trailing dot allowed).
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*\.?")

#: Spark properties of the driver's network that have a key of their own in ``[spark]`` (checked there).
_DRIVER_NETWORK = {
    "spark.driver.host": "driver_host",
    "spark.driver.bindAddress": "driver_bind_address",
    "spark.driver.port": "driver_port",
    "spark.driver.blockManager.port": "block_manager_port",
}


class SparkConfig(ConfigModel):
    """The Spark master and how its executors reach the driver (drkit.runtime.spark, docs/deploy.md)."""

    master: str = "local[2]"
    #: The address executors connect to the driver at (``spark.driver.host``). Unset: 127.0.0.1 with a
    #: local master; with a cluster master, Spark's own choice (the address of this machine's host name).
    driver_host: str | None = None
    #: The address the driver listens on (``spark.driver.bindAddress``); unset as for ``driver_host``.
    driver_bind_address: str | None = None
    #: The driver's RPC port (``spark.driver.port``); unset: a free port. Fixed behind a firewall or for a
    #: Kubernetes headless Service.
    driver_port: int | None = Field(default=None, ge=1, le=65535)
    #: The driver's block manager port (``spark.driver.blockManager.port``); unset: a free port.
    block_manager_port: int | None = Field(default=None, ge=1, le=65535)
    #: The port the mirror's long-lived copy tasks connect to the driver at, with a cluster master
    #: (drkit.mirror.copier_tasks); unset: a free port. Fixed behind a firewall or a NetworkPolicy.
    copier_port: int | None = Field(default=None, ge=1, le=65535)
    #: With a cluster master, ship the driver's drkit to the executors (a zip through addPyFile).
    #: Off only when the executors' image holds the very same drkit version.
    ship_drkit: bool = True
    #: With a cluster master: authenticated, encrypted RPC and encrypted local I/O (drkit.core.spark_security).
    #: Off only on a network nobody else reaches; drkit then says so in one warning line.
    secure: bool = True
    #: The file holding Spark's shared secret: a standalone cluster's, which its master and workers were started
    #: with (else the environment variable ``DRKIT_SPARK_AUTH_SECRET``); on Kubernetes, Spark's
    #: ``spark.authenticate.secret.file`` (mounted at this path in the executor pods too). Otherwise, and always on
    #: YARN, Spark generates one per application.
    auth_secret_file: Path | None = None
    #: Extra Spark properties, applied last.
    conf: dict[str, str] = Field(default_factory=dict)

    @field_validator("driver_host", "driver_bind_address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        problem = None if value is None else address_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("master")
    @classmethod
    def _master(cls, value: str) -> str:
        if not _SPARK_MASTER.fullmatch(value):
            raise ValueError(
                "expected local, local[N], local[*], local[N,F], spark://HOST:PORT, yarn or k8s://HOST:PORT"
            )
        return value

    @field_validator("conf", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        return flatten_properties(value)

    @field_validator("conf")
    @classmethod
    def _spark_keys(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if name == "spark.master":
                raise PropertyError(name, "set the master as [spark] master, where it is checked")
            if name in SECURE_SETTINGS:
                raise PropertyError(name, "set [spark] secure, which turns Spark's security on or off as a whole")
            if name in _DRIVER_NETWORK:
                raise PropertyError(name, f"set it as [spark] {_DRIVER_NETWORK[name]}, where it is checked")
            if not name.startswith("spark."):
                # spark-submit drops these with a warning nobody sees; Hadoop settings are spark.hadoop.*.
                raise PropertyError(name, "Spark ignores properties that do not start with 'spark.'")
        return value


def address_problem(value: str) -> str | None:
    """Why ``value`` is not a host name or an IP address the Spark driver could use, or None.

    The driver's addresses (``[spark] driver_host``, ``driver_bind_address``) are handed to Spark, which
    would fail at session start with a Java trace for a URL, a host:port or a blank.
    """
    if "://" in value:
        return "expected a host name or an IP address, not a URL"
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(value)
        return None
    if ":" in value:
        return "expected a host name or an IP address without a port (the port is [spark] driver_port)"
    if not _HOST_NAME.fullmatch(value):
        return "expected a host name (letters, digits, '-' and '.') or an IP address"
    return None
