"""Fetch and cache the JVM artifacts drkit needs, from Maven Central, with Maven.

Nothing binary is committed: the first run resolves each artifact set's runtime closure with
`mvn dependency:copy-dependencies` into a cache folder (``$DRKIT_CACHE`` or ``~/.cache/drkit``),
and later runs reuse it. Maven is pointed at Maven Central only, because some upstream POMs
declare other repositories that are not reachable from every network.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from xml.sax.saxutils import escape

from drkit import versions
from drkit.core.storage import CACHE_ENV, DEFAULT_CACHE
from drkit.errors import ArtifactError

MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
_DONE_MARKER = ".complete"

_SETTINGS = f"""<settings>
  <mirrors>
    <mirror><id>central-only</id><mirrorOf>*</mirrorOf><url>{MAVEN_CENTRAL}</url></mirror>
  </mirrors>
</settings>
"""


def cache_root() -> Path:
    # Absolute: the jar paths under it are handed to a JVM that runs in another directory
    # (jvm_working_dir), where a relative $DRKIT_CACHE would name nothing.
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE).expanduser().resolve()


def jvm_working_dir() -> Path:
    """The directory Spark's JVM runs in: a folder of drkit's cache, not the user's current directory.

    Spark 4.0.0 makes its session artifact folder as ``artifacts/spark-<uuid>`` relative to the JVM's
    working directory (``ArtifactManager.artifactRootDirectory`` passes ``"artifacts"`` as the *root* of
    ``Utils.createTempDir``); it deletes ``spark-<uuid>`` at exit but leaves ``artifacts/`` behind, and
    a killed JVM leaves both. ``spark-warehouse/`` and ``derby.log`` are made there too. drkit gives the
    JVM only absolute paths (jars, state root), so where it runs changes nothing else.
    """
    path = cache_root() / "spark-work"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def in_jvm_working_dir() -> Iterator[Path]:
    """Run the block (the one that launches Spark's JVM) in :func:`jvm_working_dir`, then come back.

    The JVM inherits the working directory when it is started and keeps it, so only its launch needs
    to happen there; the Python process returns to where it was right after.
    """
    path = jvm_working_dir()
    with contextlib.chdir(path):
        yield path


def _pom(coordinates: tuple[str, ...], exclusions: tuple[str, ...] = ()) -> str:
    excluded = "".join(
        f"<exclusion><groupId>{escape(g)}</groupId><artifactId>{escape(a)}</artifactId></exclusion>"
        for g, a in (e.split(":") for e in exclusions)
    )
    deps = []
    for coordinate in coordinates:
        group, artifact, version = coordinate.split(":")
        deps.append(
            f"<dependency><groupId>{escape(group)}</groupId><artifactId>{escape(artifact)}</artifactId>"
            f"<version>{escape(version)}</version><exclusions>{excluded}</exclusions></dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>dev.drkit</groupId><artifactId>artifacts</artifactId><version>1</version>"
        f"<packaging>pom</packaging><dependencies>{''.join(deps)}</dependencies></project>"
    )


#: Beside the marker: ``<sha256>  <file name>`` per jar, as fetched. A file of its own, so an earlier drkit
#: sharing the cache reads the marker as it always did (and never takes the folder for another fetch).
_MANIFEST = ".sha256"
#: Folders whose jars were checked against their manifest in this process (a check reads every jar once).
_verified: set[Path] = set()


def _manifest(target: Path) -> str:
    """``<sha256>  <file name>`` per file of the folder (drkit's own dot-files aside), sorted by name."""
    lines = []
    for path in sorted(p for p in target.iterdir() if p.is_file() and not p.name.startswith(".")):
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        lines.append(f"{digest.hexdigest()}  {path.name}")
    return "\n".join(lines)


def _digests(manifest: str) -> dict[str, str]:
    """File name -> digest, from a manifest."""
    pairs = (line.split("  ", 1) for line in manifest.splitlines())
    return {name: digest for digest, name in pairs}


def _check_manifest(target: Path, recorded: str) -> None:
    """Refuse a cached folder whose jars are not the ones fetched (changed, added or removed since)."""
    if target in _verified:
        return
    now, then = _digests(_manifest(target)), _digests(recorded)
    changed = sorted(n for n in now.keys() | then.keys() if now.get(n) != then.get(n))
    if changed:
        raise ArtifactError(
            f"the JVM artifact cache {target} is not what was fetched ({', '.join(changed[:3])}"
            f"{' ...' if len(changed) > 3 else ''} changed, added or removed since): delete {target} and run again "
            "to fetch it anew"
        )
    _verified.add(target)


def resolve(name: str, coordinates: tuple[str, ...], exclusions: tuple[str, ...] = ()) -> Path:
    """Return a folder holding the runtime closure of ``coordinates``, fetching it once; ``exclusions``
    (``group:artifact``) are left out of every coordinate's closure.

    A fetch records the jars' SHA-256 digests beside its marker; a later use checks the folder against them
    (once per process), so a jar changed on disk is never put on a JVM's classpath."""
    key = "-".join(c.split(":")[-1] for c in coordinates[:1])
    target = cache_root() / "jars" / f"{name}-{key}"
    marker, manifest = target / _DONE_MARKER, target / _MANIFEST
    done = "\n".join(coordinates + tuple(f"-{e}" for e in exclusions))
    if marker.exists() and marker.read_text() == done:
        if manifest.exists():
            _check_manifest(target, manifest.read_text())
        else:
            # Fetched by a version that recorded no digests: recorded now, as of this first use (fetching again
            # would pull the jars from under JVMs that run from this folder).
            _write_atomically(manifest, _manifest(target))
            _verified.add(target)
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ArtifactError("Maven (mvn) is not on PATH: install it (e.g. apt-get install maven) and retry")
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="drkit-mvn-") as tmp:
        pom = Path(tmp, "pom.xml")
        settings = Path(tmp, "settings.xml")
        pom.write_text(_pom(coordinates, exclusions))
        settings.write_text(_SETTINGS)
        result = subprocess.run(
            [
                mvn,
                "-q",
                "-B",
                "-s",
                str(settings),
                "-f",
                str(pom),
                "dependency:copy-dependencies",
                "-DincludeScope=runtime",
                f"-DoutputDirectory={target}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    if result.returncode != 0:
        lines = [ln for ln in (result.stdout + result.stderr).splitlines() if "ERROR" in ln]
        detail = lines[0] if lines else f"mvn exited with {result.returncode}"
        raise ArtifactError(f"could not fetch {', '.join(coordinates)} from Maven Central: {detail}")
    _write_atomically(manifest, _manifest(target))
    marker.write_text(done)
    _verified.add(target)
    return target


def _write_atomically(path: Path, text: str) -> None:
    """Replace the file in one step: another process checking the folder never reads half a manifest."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def kafka_broker_libs() -> Path:
    """The classpath folder of an Apache Kafka broker (KRaft) and its log4j2 binding."""
    return resolve("kafka", versions.KAFKA_BROKER_ARTIFACTS)


def mirror_maker_libs() -> Path:
    """The classpath folder of Apache Kafka's MirrorMaker 2 (connect-mirror at the broker's version)."""
    return resolve("mirrormaker", versions.MIRROR_MAKER_ARTIFACTS)


def spark_extra_jars() -> list[Path]:
    """Jars to add to Spark: Delta and the Kafka connector, minus what pyspark already ships.

    A jar whose artifact is already in pyspark's own ``jars/`` (at any version) is left out, so
    the session never holds two versions of Scala, Hadoop or SLF4J.
    """
    folder = resolve("spark", versions.SPARK_EXTRA_ARTIFACTS)
    import pyspark  # local import: only this function needs pyspark

    shipped = {_artifact_name(p.name) for p in Path(pyspark.__file__).parent.joinpath("jars").glob("*.jar")}
    return sorted(p for p in folder.glob("*.jar") if _artifact_name(p.name) not in shipped)


_JAR_NAME = re.compile(r"^(?P<name>.+?)-(?P<version>\d+\.\d+[^-]*(?:-[A-Za-z0-9.]+)?)\.jar$")


def _artifact_name(jar: str) -> str:
    """``kafka-clients-3.9.0.jar`` -> ``kafka-clients``: the file name up to the version."""
    match = _JAR_NAME.match(jar)
    return match.group("name") if match else jar.removesuffix(".jar")


def object_store_jars() -> list[Path]:
    """Jars Spark needs to keep its streaming checkpoint in S3 (``s3a://``, ``s3://``): hadoop-aws at
    pyspark's Hadoop version with the AWS SDK v2 modules it uses, not the SDK's full ``bundle`` (558 MB).
    What pyspark already ships is left out, as for :func:`spark_extra_jars`."""
    folder = resolve("s3a", versions.S3A_ARTIFACTS, versions.S3A_EXCLUSIONS)
    import pyspark

    shipped = {_artifact_name(p.name) for p in Path(pyspark.__file__).parent.joinpath("jars").glob("*.jar")}
    return sorted(p for p in folder.glob("*.jar") if _artifact_name(p.name) not in shipped)


def fetch_all() -> dict[str, str]:
    """Fetch every artifact set (the S3A jars too: an object-store root must not wait on Maven); used by
    scripts/setup and CI."""
    return {
        "kafka": str(kafka_broker_libs()),
        "spark": ",".join(str(p) for p in spark_extra_jars()),
        "object_store": ",".join(str(p) for p in object_store_jars()),
    }
