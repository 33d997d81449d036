"""Reading a MirrorMaker 2 file as Java does, and the drkit TOML it becomes: rendered, then validated.

Invariant: :func:`generated_toml` returns only text that :func:`drkit.config.load_config` accepts once its
``${env:...}`` references are set (it is checked with placeholders in their place), and that holds no
secret value; anything else is one :class:`ConfigError` naming the drkit key and the MM2 property behind it.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

import javaproperties
import tomli_w

from drkit.config.loading import parse_config, read_regular_file
from drkit.config.mm2.model import Mm2Mapping, Mm2Properties
from drkit.errors import ConfigError, RefusedError

_ENV_REF = re.compile(r"\$\{env:[A-Za-z_][A-Za-z0-9_]*\}")
#: What stands for an environment reference while the generated config is validated.
_PLACEHOLDER = "placeholder"
_FLOW_INDEX = re.compile(r"^flows\[(\d+)\]")


def parse_mm2_properties(raw: bytes) -> Mm2Properties:
    """A ``.properties`` file's bytes as MirrorMaker 2 reads them (``Properties.load`` of an InputStream:
    ISO-8859-1, ``\\uXXXX`` escapes, continuation lines, ``=``/``:``/whitespace separators, the last
    definition of a key wins)."""
    try:
        values: dict[str, str] = javaproperties.loads(raw)
    except javaproperties.InvalidUEscapeError:
        raise ConfigError(
            "not a valid .properties file: a \\u escape is not followed by four hexadecimal digits "
            "(Java refuses it too)"
        ) from None
    return Mm2Properties(values)


def read_mm2_properties(path: Path) -> Mm2Properties:
    """The MirrorMaker 2 file at ``path``; a missing or unreadable one is a one-line ConfigError."""
    raw = read_regular_file(
        path,
        "MirrorMaker 2 file",
        "MirrorMaker 2 properties file not found",
        "the path of a MirrorMaker 2 .properties file",
    )
    try:
        return parse_mm2_properties(raw)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _header(source: str, mapping: Mm2Mapping) -> str:
    name = re.sub(r"[\x00-\x1f\x7f]", "?", source)
    lines = [
        f"# drkit config made by `drkit config import-mm2` from the MirrorMaker 2 file {name}.",
        "# Check it with `drkit config validate -c <this file>` (with the variables below set).",
    ]
    if mapping.secrets:
        lines.append("# Secrets are read from these environment variables (set each before running drkit):")
        lines += [f"#   {s.name}  (MM2 property {s.key})" for s in mapping.secrets]
    return "\n".join(lines) + "\n\n"


def render_toml(source: str, mapping: Mm2Mapping) -> str:
    """The drkit config file: a header naming the source and the variables to set, then the TOML."""
    return _header(source, mapping) + tomli_w.dumps(dict(mapping.config))


def _placeholders(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _placeholders(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_placeholders(v) for v in node]
    if isinstance(node, str):
        return _ENV_REF.sub(_PLACEHOLDER, node)
    return node


def check_generated(text: str, mapping: Mm2Mapping) -> None:
    """Validate the generated TOML as ``drkit config validate`` would, with placeholders for the variables."""
    data = _placeholders(tomllib.loads(text))
    try:
        parse_config(data)
    except ConfigError as exc:
        message = str(exc).removeprefix("<config>: ")
        key = message.split(": ", 1)[0]
        flows = mapping.config.get("flows", [])
        named = _FLOW_INDEX.sub(lambda m: f"flows[{flows[int(m[1])]['source']}->{flows[int(m[1])]['target']}]", key)
        origins = [c for c in mapping.carried if named.startswith(c.to) or c.to.startswith(named)]
        origin = max(origins, key=lambda c: len(c.to), default=None)
        where = f" (from MM2 property {origin.key})" if origin else ""
        raise ConfigError(f"the drkit config it maps to is invalid: {named}{message[len(key) :]}{where}") from None


def generated_toml(source: str, mapping: Mm2Mapping) -> str:
    text = render_toml(source, mapping)
    check_generated(text, mapping)
    return text


def write_new_config(path: Path, text: str, force: bool, source: Path) -> None:
    """Write ``text`` to ``path`` whole or not at all; an existing file is replaced only with ``force``, and
    never when it is the MirrorMaker 2 file itself."""
    if path.exists() and source.exists() and path.resolve() == source.resolve():
        raise RefusedError(f"{path}: is the MirrorMaker 2 file being imported; write the drkit config elsewhere")
    if path.exists() and not force:
        raise RefusedError(f"{path}: already exists; nothing was written (use --force to replace it)")
    if not path.parent.is_dir():
        raise ConfigError(f"{path}: its folder does not exist; nothing was written")
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory; give the path of the TOML file to write")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        if force:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails if the file appeared meanwhile: never replaced without --force
    except FileExistsError:
        raise RefusedError(f"{path}: already exists; nothing was written (use --force to replace it)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write the drkit config: {exc.strerror}") from None
    finally:
        tmp.unlink(missing_ok=True)
