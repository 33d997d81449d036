"""The JVM artifact cache is checked before use: a fetch records each jar's SHA-256 beside its marker, and a
folder whose jars changed, appeared or vanished since is refused in one line (never put on a classpath); a
folder an earlier version fetched (no digests) gets them at first use."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkit.errors import ArtifactError
from drkit.runtime import artifacts

COORDINATES = ("org.example:lib:1.0",)


@pytest.fixture
def cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder as a fetch leaves it: two jars and the marker with their digests; Maven unavailable, so any
    attempt to fetch again shows as the 'mvn is not on PATH' error."""
    monkeypatch.setenv("DRKIT_CACHE", str(tmp_path))
    monkeypatch.setattr(artifacts.shutil, "which", lambda name: None)
    monkeypatch.setattr(artifacts, "_verified", set())
    target = tmp_path / "jars" / "lib-1.0"
    target.mkdir(parents=True)
    (target / "a.jar").write_bytes(b"jar a")
    (target / "b.jar").write_bytes(b"jar b")
    (target / ".sha256").write_text(artifacts._manifest(target))
    (target / ".complete").write_text("\n".join(COORDINATES))
    return target


def test_an_unchanged_cache_is_used_without_fetching(cached: Path) -> None:
    assert artifacts.resolve("lib", COORDINATES) == cached


@pytest.mark.parametrize(
    "change, named",
    [
        (lambda t: (t / "a.jar").write_bytes(b"jar A"), "a.jar"),
        (lambda t: (t / "c.jar").write_bytes(b"extra"), "c.jar"),
        (lambda t: (t / "b.jar").unlink(), "b.jar"),
    ],
    ids=["changed", "added", "removed"],
)
def test_a_changed_cache_is_refused_in_one_line(cached: Path, change: object, named: str) -> None:
    change(cached)  # type: ignore[operator]
    with pytest.raises(ArtifactError, match=f"is not what was fetched \\({named} changed, added or removed since\\)"):
        artifacts.resolve("lib", COORDINATES)


def test_a_marker_without_digests_gets_them_at_first_use_and_is_checked_from_then_on(
    cached: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (cached / ".sha256").unlink()  # as an earlier version left the folder
    assert artifacts.resolve("lib", COORDINATES) == cached
    assert (cached / ".sha256").read_text().splitlines()[0].endswith("  a.jar")
    monkeypatch.setattr(artifacts, "_verified", set())  # another process
    (cached / "a.jar").write_bytes(b"jar A")
    with pytest.raises(ArtifactError, match=r"a\.jar changed"):
        artifacts.resolve("lib", COORDINATES)


def test_other_coordinates_fetch_again(cached: Path) -> None:
    with pytest.raises(ArtifactError, match="Maven \\(mvn\\) is not on PATH"):
        artifacts.resolve("lib", ("org.example:lib:1.0", "org.example:other:2.0"))
