"""Reading a TOML file into a :class:`DrkitConfig`: environment references, file checks, error messages.

Invariant: every failure is one :class:`ConfigError` line naming the file and the dotted key, with
secrets (from the file or the environment) masked; a success is a validated, frozen config.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from drkit.config.base import KeyedError
from drkit.config.model import DrkitConfig
from drkit.config.properties import PropertyError
from drkit.config.secrets import mask_text, mask_tree, secret_values
from drkit.errors import ConfigError

_ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
#: What starts an environment reference; one left after the well-formed ones are taken out is malformed.
_REF_START = "${"


def _substitute_env(value: Any, key: str, path: str, used: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _substitute_env(v, f"{key}.{k}" if key else k, path, used) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute_env(v, f"{key}[{i}]", path, used) for i, v in enumerate(value)]
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in os.environ:
                raise ConfigError(f"{path}: {key}: environment variable {name} is not set")
            if not os.environ[name]:
                raise ConfigError(f"{path}: {key}: environment variable {name} is empty")
            used.add(os.environ[name])
            return os.environ[name]

        if _REF_START in _ENV_REF.sub("", value):
            # ${env:}, ${env:X (unclosed), ${X} (a shell's syntax): taken literally it would be a password or
            # a path that cannot work.
            raise ConfigError(
                f"{path}: {key}: malformed environment reference; write ${{env:NAME}} (NAME: letters, digits, '_')"
            )
        return _ENV_REF.sub(replace, value)
    return value


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _format_error(path: str, exc: ValidationError) -> str:
    err = exc.errors(include_url=False, include_input=False)[0]
    ctx_error = (err.get("ctx") or {}).get("error")
    if isinstance(ctx_error, KeyedError):
        return f"{path}: {ctx_error.key}: {ctx_error.message}"
    key = _format_loc(tuple(err["loc"])) or "(top level)"
    kind = err["type"]
    if isinstance(ctx_error, PropertyError):
        key, message = f"{key}.{ctx_error.name}", ctx_error.message
    elif kind == "extra_forbidden":
        message = "unknown key"
    elif kind == "missing":
        message = "required key is missing"
    elif kind == "string_too_short" and err["ctx"]["min_length"] == 1:
        message = "must not be empty"
    elif kind == "literal_error":
        message = f"must be one of {err['ctx']['expected']}"
    elif isinstance(ctx_error, ValueError):
        message = str(ctx_error)
    else:
        message = err["msg"][0].lower() + err["msg"][1:]
    more = len(exc.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{path}: {key}: {message}{suffix}"


def parse_config(data: dict[str, Any], path: str = "<config>") -> DrkitConfig:
    """Validate an already-parsed TOML document."""
    from_env: set[str] = set()
    data = _substitute_env(data, "", path, from_env)
    try:
        return DrkitConfig.model_validate({**data, "source_path": path if path != "<config>" else None})
    except ValidationError as exc:
        # Messages are written not to quote values; this is the net under that rule, for values that
        # came from the environment (where secrets are meant to come from) and secrets in the file.
        raise ConfigError(mask_text(_format_error(path, exc), secret_values(data) | from_env)) from None


def read_regular_file(file: Path, what: str, missing: str, give: str) -> bytes:
    """The bytes of the regular file ``file`` (a config, or a file to import); a missing or unopenable
    file, a directory, a FIFO, a socket or a device is a one-line ConfigError: ``what`` names the kind of
    file, ``missing`` is the line when there is none, ``give`` says what to give instead."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; the type is checked on what was opened.
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        raise ConfigError(f"{file}: {missing}") from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot open the {what}: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise ConfigError(f"{file}: is a directory, not a {what}; give {give}")
        raise ConfigError(f"{file}: is not a regular file (a FIFO, socket or device); give {give}")
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _read_config_text(file: Path) -> str:
    """The file's text; a directory, FIFO, device or non-UTF-8 file is a one-line ConfigError."""
    raw = read_regular_file(
        file,
        "config file",
        "config file not found (create one from examples/drkit.local.toml)",
        "the path of a TOML file",
    )
    try:
        return raw.decode("utf-8-sig")  # a byte order mark is UTF-8 still; TOML would reject it
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: config file is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


def load_config(path: str | Path) -> DrkitConfig:
    """Load and validate ``path``; every problem is a :class:`ConfigError` naming file and key."""
    file = Path(path)
    text = _read_config_text(file)
    try:
        data = tomllib.loads(text)
        if "source_path" in data:
            raise ConfigError(f"{file}: source_path: unknown key")
        return parse_config(data, str(file))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    except RecursionError:
        # The TOML parser and the validation both recurse per level of nesting; no drkit key nests deeper
        # than a few levels, so such a file is not a drkit config (and Python's own message names nothing).
        raise ConfigError(
            f"{file}: arrays or tables nested too deeply to be a drkit config (no key nests more than a few "
            "levels); fix the file"
        ) from None


def masked_dump(config: DrkitConfig) -> dict[str, Any]:
    """The config as plain data with every secret replaced by ``********``: values of secret keys, secrets
    inside values (JAAS, OAuth configs, URLs), and any other occurrence of those values."""
    data = config.model_dump(mode="json", exclude={"source_path"})
    masked: dict[str, Any] = mask_tree(data, secret_values(data))
    return masked
