"""Where the state lives: a local folder or an object-store URI, and what each engine needs to reach it.

Invariants:

- a state root is either a local folder (a path, or ``file:///path``) or a :class:`RootUri` of a scheme in
  :class:`Scheme`; anything that looks like a URI and is not one of them is refused, never taken as a local
  folder (an ``s3a:`` folder in the working directory was the bug this module exists for);
- the three engines that touch a remote state (delta-rs for the tables, pyarrow for the run files and Spark's
  offset log, Spark's Hadoop file systems for the streaming checkpoint) get their settings from one
  :class:`StorageSettings` through the mappings here, so they cannot disagree about endpoint or credentials.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class Scheme(StrEnum):
    """The object stores a state root may live in (what both delta-rs and Spark can reach)."""

    S3A = "s3a"
    S3 = "s3"
    ABFSS = "abfss"
    GS = "gs"
    HDFS = "hdfs"


#: The schemes S3's settings (endpoint, keys, region, path style) apply to.
S3_SCHEMES = frozenset({Scheme.S3A, Scheme.S3})
_SUPPORTED = "a local folder, file:///PATH, s3a://, s3://, abfss://, gs:// or hdfs://"
_URI = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<authority>[^/?#]*)(?P<path>[^?#]*)")
#: ``s3a:bucket/x``: a known scheme without ``//``, which a file system would take as a folder named ``s3a:bucket``.
_SCHEME_NO_SLASHES = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):(?!//)")
#: The cache folder of drkit on this host (also the JVM artifacts' home): ``$DRKIT_CACHE`` or this default.
CACHE_ENV = "DRKIT_CACHE"
DEFAULT_CACHE = "~/.cache/drkit"


@dataclass(frozen=True)
class RootUri:
    """A state root in an object store: ``scheme://authority/key``.

    ``authority`` is the bucket (s3a, s3, gs), ``container@account.dfs.core.windows.net`` (abfss) or the
    name node's ``host:port`` (hdfs; empty for the cluster's default file system). ``key`` has no leading
    or trailing ``/`` and may be empty (the bucket's top)."""

    scheme: Scheme
    authority: str
    key: str = ""

    def __str__(self) -> str:
        return f"{self.scheme}://{self.authority}" + (f"/{self.key}" if self.key else "")

    @property
    def digest(self) -> str:
        """A short name for this root that is safe as a local folder name (the host's own folder for it)."""
        return hashlib.sha256(str(self).encode()).hexdigest()[:16]


def parse_root(text: str) -> RootUri | str:
    """``text`` as a state root: a :class:`RootUri`, or a local path (``file:///x`` read as ``/x``).

    Raises ValueError with the reason (one line, quoting only the scheme) for a URI drkit cannot use.
    """
    match = _URI.fullmatch(text.strip())
    if match is None:
        if "://" in text:
            raise ValueError(f"is not a URI drkit can read (no '?' or '#'); write {_SUPPORTED}")
        bare = _SCHEME_NO_SLASHES.match(text.strip())
        if bare is not None and (bare["scheme"].lower() in {*Scheme, "file"}):
            scheme = bare["scheme"].lower()
            raise ValueError(
                f"starts with '{scheme}:' but not '{scheme}://': it would be a local folder named '{scheme}:...'; "
                f"write {scheme}://..."
            )
        return text
    scheme, authority, path = match["scheme"].lower(), match["authority"], match["path"]
    if scheme == "file":
        if authority not in ("", "localhost"):
            raise ValueError("a file:// root is a local path: write file:///PATH (three slashes)")
        if not path.startswith("/"):
            raise ValueError("a file:// root is a local path: write file:///PATH (three slashes)")
        return path
    if scheme not in {*Scheme}:
        raise ValueError(f"scheme '{scheme}' is not one a state root can use: write {_SUPPORTED}")
    kind = Scheme(scheme)
    if not authority and kind is not Scheme.HDFS:
        what = "container@account" if kind is Scheme.ABFSS else "bucket"
        raise ValueError(f"names no {what}: write {scheme}://{what.upper()}/PATH")
    if kind is Scheme.ABFSS and "@" not in authority:
        raise ValueError("an abfss:// root names CONTAINER@ACCOUNT.dfs.core.windows.net")
    if "@" in authority and kind is not Scheme.ABFSS:
        raise ValueError(f"a {scheme}:// root holds no user or password: put credentials in [state.storage]")
    inner = path.removeprefix("/").removesuffix("/")  # one trailing '/' is the same folder
    parts = inner.split("/") if inner else []
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError("has an empty, '.' or '..' path segment: write each folder of the path once")
    return RootUri(kind, authority, "/".join(parts))


@dataclass(frozen=True)
class StorageSettings:
    """How to reach an object-store root (``[state.storage]``); secrets never in ``repr``.

    ``endpoint`` (``http(s)://host[:port]``), ``region``, the keys and ``path_style`` are S3's; ``options``
    are passed to delta-rs as they are (its ``storage_options`` for Azure, GCS, HDFS or S3 settings drkit
    does not name) and win over the ones drkit derives."""

    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    path_style: bool = False
    options: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @property
    def plain_http(self) -> bool:
        return (self.endpoint or "").lower().startswith("http://")


#: The region S3 clients are given when none is set: S3-compatible servers accept any, AWS redirects.
DEFAULT_REGION = "us-east-1"


def storage_problem(root: RootUri | None, s: StorageSettings) -> tuple[str, str] | None:
    """(key under ``state.storage``, why) for settings that cannot apply to ``root``, or None."""
    s3_keys = {
        "endpoint": s.endpoint,
        "region": s.region,
        "access_key_id": s.access_key_id,
        "secret_access_key": s.secret_access_key,
        "session_token": s.session_token,
    }
    named = [k for k, v in s3_keys.items() if v is not None] + (["path_style"] if s.path_style else [])
    if root is None:
        if named or s.options:
            return (named or ["options"])[0], "applies to an object-store root only, and [state] root is a local folder"
        return None
    if named and root.scheme not in S3_SCHEMES:
        return named[0], f"is an S3 setting; a {root.scheme}:// root takes its settings in state.storage.options"
    if (s.access_key_id is None) != (s.secret_access_key is None):
        missing = "secret_access_key" if s.secret_access_key is None else "access_key_id"
        return missing, "must be set with the other key (access_key_id and secret_access_key go together)"
    if s.session_token is not None and s.access_key_id is None:
        return "session_token", "needs access_key_id and secret_access_key"
    if s.endpoint is not None and re.fullmatch(r"https?://[^/\s?#@]+/?", s.endpoint, re.I) is None:
        return "endpoint", "must be http://HOST[:PORT] or https://HOST[:PORT] (no path)"
    return None


def delta_options(root: RootUri, s: StorageSettings) -> dict[str, str]:
    """delta-rs's ``storage_options`` for ``root`` (object_store's keys)."""
    out: dict[str, str] = {}
    if root.scheme in S3_SCHEMES:
        pairs = {
            "AWS_ENDPOINT_URL": s.endpoint,
            "AWS_REGION": s.region or DEFAULT_REGION,
            "AWS_ACCESS_KEY_ID": s.access_key_id,
            "AWS_SECRET_ACCESS_KEY": s.secret_access_key,
            "AWS_SESSION_TOKEN": s.session_token,
            "AWS_ALLOW_HTTP": "true" if s.plain_http else None,
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false" if s.path_style else None,
            # S3 commits a Delta version with a conditional put (If-None-Match, S3 since 2024): two writers
            # never both win one version, without a DynamoDB lock.
            "AWS_CONDITIONAL_PUT": "etag",
        }
        out.update({k: v for k, v in pairs.items() if v is not None})
    out.update(dict(s.options))
    return out


def s3_client_settings(s: StorageSettings) -> dict[str, object]:
    """The arguments of an S3 client (pyarrow's ``S3FileSystem``) for these settings."""
    args: dict[str, object] = {"region": s.region or DEFAULT_REGION}
    if s.endpoint is not None:
        scheme, _, host = s.endpoint.partition("://")
        args["endpoint_override"] = host.rstrip("/")
        args["scheme"] = scheme.lower()
    if s.access_key_id is not None:
        args["access_key"] = s.access_key_id
        args["secret_key"] = s.secret_access_key
        if s.session_token is not None:
            args["session_token"] = s.session_token
    args["force_virtual_addressing"] = not s.path_style and s.endpoint is None
    return args


_S3A = "org.apache.hadoop.fs.s3a"


def hadoop_settings(root: RootUri, s: StorageSettings) -> dict[str, str]:
    """The Spark settings (``spark.hadoop.fs.s3a.*``) that let Spark's S3A file system reach ``root``: the
    streaming checkpoint and ``drkit maintain``'s Delta reads and writes. None for other schemes (their
    Hadoop connectors take their settings in ``[spark.conf]``)."""
    if root.scheme not in S3_SCHEMES:
        return {}
    conf: dict[str, str] = {"fs.s3a.endpoint.region": s.region or DEFAULT_REGION}
    if root.scheme is Scheme.S3:
        conf["fs.s3.impl"] = f"{_S3A}.S3AFileSystem"  # Hadoop has no s3:// file system of its own
    if s.endpoint is not None:
        conf["fs.s3a.endpoint"] = s.endpoint
        conf["fs.s3a.connection.ssl.enabled"] = "false" if s.plain_http else "true"
    if s.path_style:
        conf["fs.s3a.path.style.access"] = "true"
    if s.access_key_id is not None and s.secret_access_key is not None:
        conf["fs.s3a.access.key"] = s.access_key_id
        conf["fs.s3a.secret.key"] = s.secret_access_key
        provider = "TemporaryAWSCredentialsProvider" if s.session_token else "SimpleAWSCredentialsProvider"
        conf["fs.s3a.aws.credentials.provider"] = f"{_S3A}.{provider}"
        if s.session_token is not None:
            conf["fs.s3a.session.token"] = s.session_token
    return {f"spark.hadoop.{k}": v for k, v in conf.items()}


def options_of(pairs: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Free-form storage options in a stable order (a frozen settings object holds a tuple)."""
    return tuple(sorted(pairs.items()))
