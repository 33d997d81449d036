"""Client and Spark property tables: flattened to strings and checked against what will read them.

Invariant: a property table that validates is a flat ``{name: str}`` dict whose librdkafka properties
librdkafka accepts one by one (checked offline, with a client that never connects), and whose messages
never quote a value.
"""

from __future__ import annotations

import logging
import math
import re
from typing import Any

from drkit.config.paths import shell_syntax_problem

#: Cluster properties only the Java client (Spark's Kafka source) reads; drkit.kafka.clients leaves
#: these out of its librdkafka clients, so librdkafka is not asked about them.
JAVA_ONLY_PROPERTIES = ("ssl.truststore.", "ssl.keystore.", "sasl.jaas.config", "ssl.endpoint.identification.algorithm")
#: librdkafka properties whose mere setting loads code or files; never probed.
_NOT_PROBED = frozenset({"plugin.library.paths", "ssl.engine.location", "ssl.providers"})
_RANGE = re.compile(r"allowed range (-?\d+\.\.-?\d+)")
_SILENT = logging.getLogger("drkit.config.librdkafka")
_SILENT.disabled = True  # the probe clients warn that they have no bootstrap servers; of course


class PropertyError(ValueError):
    """A problem with one property of a property table; the key is the table's plus the property."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


def librdkafka_problem(name: str, value: str) -> str | None:
    """Why librdkafka refuses ``name = value`` on its own, or None.

    Creating a client without bootstrap servers is offline and takes well under a millisecond; it
    checks the name and the value. Only the kind of error is kept: librdkafka's text quotes the value.
    Errors that depend on other properties (a keystore without its password) are left to the client.
    """
    if name.endswith((".class", ".classes")):
        return (
            "names a Java class, which drkit's Python Kafka clients (librdkafka) cannot load; use a mechanism "
            "librdkafka supports (for AWS MSK: SASL/SCRAM, or OAUTHBEARER with sasl.oauthbearer.* properties)"
        )
    if name in _NOT_PROBED:
        return None
    from confluent_kafka import KafkaException, Producer

    try:
        Producer({name: value, "logger": _SILENT})
    except KafkaException as exc:
        text = exc.args[0].str() if exc.args else ""
        if "No such configuration property" in text:
            return "unknown Kafka client property (librdkafka, which drkit's Python clients use, does not know it)"
        allowed = _RANGE.search(text)
        if allowed:
            return f"value is outside the allowed range {allowed[1]}"
        if "Invalid value" in text:
            return "invalid value for this Kafka client property"
    return None


#: Properties that name a file: librdkafka and Java take their value literally (no ``~``, no ``$VAR``).
_PATH_SUFFIXES = (".location", ".keytab")


def _path_problem(value: str) -> str | None:
    if value.startswith("~"):
        return "starts with '~', which the Kafka clients do not expand; write the full path"
    return shell_syntax_problem(value)


def check_client_properties(props: dict[str, str], skip: tuple[str, ...] = ()) -> dict[str, str]:
    """``props`` unchanged, or PropertyError for the first property whose file path holds shell syntax or
    that librdkafka refuses; names starting with one of ``skip`` are left to the Java client (not probed)."""
    for name, value in props.items():
        problem = _path_problem(value) if name.endswith(_PATH_SUFFIXES) else None
        if problem:
            raise PropertyError(name, problem)
        if name.startswith(skip) and not name.endswith((".class", ".classes")):
            continue
        problem = librdkafka_problem(name, value)
        if problem:
            raise PropertyError(name, problem)
    return props


def flatten_properties(value: Any) -> Any:
    """Client or Spark properties as a flat ``{"a.b": "value"}`` dict of strings.

    TOML reads an unquoted dotted key (``sasl.password = "x"``) as a nested table; it is flattened
    back to the property the user meant, instead of becoming a property ``sasl`` whose value is the
    printed dict (wrong, and shown unmasked by ``config show``).
    """
    if not isinstance(value, dict):
        return value
    flat: dict[str, str] = {}

    def walk(prefix: str, table: dict[str, Any]) -> None:
        for k, item in table.items():
            name = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(item, dict):
                walk(name, item)
                continue
            if name in flat:
                raise ValueError(f"property {name!r} is defined twice")
            if isinstance(item, bool):
                flat[name] = str(item).lower()
            elif isinstance(item, float) and not math.isfinite(item):
                raise PropertyError(name, "must be a finite number")
            elif isinstance(item, int | float | str):
                flat[name] = str(item)
            else:
                raise ValueError(f"property {name!r} must be a string, number or boolean")

    walk("", value)
    return flat
