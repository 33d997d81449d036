"""Secrets in config data: which keys hold them, where they hide inside values, and how they are masked.

Invariant: one notion of secret (:func:`is_secret_key`, :func:`secret_values`) serves both masking
(``config show``, error messages) and nothing here ever returns a secret it was asked to hide.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "********"

#: ``sasl.oauthbearer.config`` holds librdkafka's OAUTHBEARER settings, client secrets among them: all masked.
#: A hook's ``webhook`` URL may carry a token (in its user information or query string): masked whole.
_SECRET_WORD = re.compile(r"password|passwd|secret|jaas|token|credential|user\.?info|oauthbearer\.config|webhook", re.I)
#: Last name parts that describe *where* or *what kind* a secret is, not the secret itself
#: (ssl.key.location, sasl.oauthbearer.token.endpoint.url, fs.s3a.aws.credentials.provider).
_DESCRIPTOR = frozenset({"location", "type", "file", "path", "url", "uri", "provider", "algorithm", "class", "method"})
#: ``name=value`` pairs inside a longer value: JAAS (``password="x"``), librdkafka's
#: sasl.oauthbearer.config (``clientSecret=x scope=y``), JVM options (``-Dtrust.password=x``).
_ASSIGNMENT = re.compile(r"""(?P<name>[A-Za-z0-9_.-]+)(?P<eq>\s*=\s*)(?P<value>"(?:[^"\\]|\\.)*"|'[^']*'|[^\s;,"']+)""")
#: ``scheme://user:password@host``
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/:@\s]+:)(?P<value>[^@/\s]+)(?=@)")
#: Shorter secret values are masked only where a whole value equals them: as substrings they would
#: mask unrelated text (and a secret this short protects nothing).
_MIN_SECRET_LEN = 4


def is_secret_key(key: str) -> bool:
    """True for property names whose values must never be printed or logged.

    Secret words anywhere (``sasl.password``, ``sasl.jaas.config``, ``fs.s3a.session.token``) or a part
    that is a key (``fs.s3a.access.key``, ``fs.azure.account.key.<account>...``, ``ssl.key.pem``),
    unless the last part says it is a location, type or similar (``ssl.key.location``).
    """
    parts = re.split(r"[._-]", key.lower())
    if parts[-1] in _DESCRIPTOR:
        return False
    return bool(_SECRET_WORD.search(key)) or any(p.endswith("key") for p in parts)


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'" else value


def _embedded_secrets(text: str) -> list[str]:
    found = [_unquote(m["value"]) for m in _ASSIGNMENT.finditer(text) if is_secret_key(m["name"])]
    found += [m["value"] for m in _URL_PASSWORD.finditer(text)]
    return [s for s in found if s]


def secret_values(data: Any) -> set[str]:
    """Every secret value in a tree of config data: values of secret keys and secrets inside values."""
    found: set[str] = set()

    def walk(key: str, node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(str(k), v)
        elif isinstance(node, list):
            for v in node:
                walk(key, v)
        elif isinstance(node, str):
            if node and is_secret_key(key):
                found.add(node)
            found.update(_embedded_secrets(node))

    walk("", data)
    return found


def mask_text(text: str, secrets: set[str]) -> str:
    """``text`` with each of ``secrets`` in it, and each secret assignment in it, replaced by the mask."""
    if text in secrets:
        return MASK

    def assignment(m: re.Match[str]) -> str:
        if not is_secret_key(m["name"]):
            return m[0]
        quote = m["value"][0] if m["value"][:1] in ("'", '"') else ""
        return f"{m['name']}{m['eq']}{quote}{MASK}{quote}"

    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", _ASSIGNMENT.sub(assignment, text))
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= _MIN_SECRET_LEN:
            text = text.replace(secret, MASK)
    return text


def mask_tree(node: Any, secrets: set[str], key: str = "") -> Any:
    """``node`` (config data) with the values of secret keys masked, and ``secrets`` masked in every other string."""
    if isinstance(node, dict):
        return {k: mask_tree(v, secrets, str(k)) for k, v in node.items()}
    if isinstance(node, list):
        return [mask_tree(v, secrets, key) for v in node]
    if isinstance(node, str):
        return MASK if node and is_secret_key(key) else mask_text(node, secrets)
    return node
