"""What Spark's own security must be for a master: authenticated, encrypted RPC and encrypted local I/O.

Invariant: with a cluster master (``spark://``, ``k8s://``, ``yarn``) and security on, the session's settings
turn on ``spark.authenticate``, ``spark.network.crypto.enabled`` and ``spark.io.encryption.enabled``, and a
standalone master (whose master and workers share one secret of their own) is refused without the user's
secret rather than started with a secret that cannot match; only there does the secret travel as
``spark.authenticate.secret`` (:attr:`SparkSecurity.passes_secret`). With YARN and Kubernetes, Spark's
SecurityManager generates a secret per application and ignores that property: YARN hands it to the executors
in the application's credentials; on Kubernetes, a secret file the user names becomes
``spark.authenticate.secret.file`` (driver and executor pods mount it there), else Spark's generated secret
goes into the executor pods' environment. A master on this machine (``local``, ``local-cluster``) gets
nothing: no RPC leaves the host's processes. With security off, one warning line says what is exposed.
Pure: the caller reads the secret and acts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The settings security turns on (the secret itself travels apart: never on a command line).
SECURE_SETTINGS: dict[str, str] = {
    "spark.authenticate": "true",
    "spark.network.crypto.enabled": "true",
    "spark.io.encryption.enabled": "true",
}
#: The Spark property that holds the shared secret.
SECRET_SETTING = "spark.authenticate.secret"  # noqa: S105 (a property name)
#: The Spark property naming a file that holds it (Kubernetes: the driver's and the executors' pods).
SECRET_FILE_SETTING = "spark.authenticate.secret.file"  # noqa: S105 (a property name)

_CLUSTER_PREFIXES = ("spark://", "k8s://")


def is_cluster_master(master: str) -> bool:
    """Whether ``master`` runs executors on other machines: standalone, Kubernetes or YARN."""
    return master.startswith(_CLUSTER_PREFIXES) or master == "yarn"


@dataclass(frozen=True)
class SparkSecurity:
    """The security settings of a session, or why it cannot start (``refusal``), or the one warning to give."""

    settings: dict[str, str] = field(default_factory=dict)
    refusal: str | None = None
    warning: str | None = None
    #: Whether the user's secret goes to Spark as :data:`SECRET_SETTING` (a standalone master only).
    passes_secret: bool = False


def spark_security(master: str, secure: bool, has_secret: bool, secret_file: str | None = None) -> SparkSecurity:
    """The security of a session with ``master``; ``secure``: ``[spark] secure``; ``has_secret``: the user gave one;
    ``secret_file``: the file named as ``[spark] auth_secret_file``."""
    if not is_cluster_master(master):
        return SparkSecurity()
    if not secure:
        return SparkSecurity(
            warning=(
                f"[spark] secure = false: Spark's RPC to {master} is neither authenticated nor encrypted; "
                "anyone who reaches the driver's or executors' ports can run code in them and read the clusters' "
                "credentials"
            )
        )
    if master.startswith("spark://") and not has_secret:
        return SparkSecurity(
            refusal=(
                f"[spark] master {master}: a standalone cluster authenticates with the secret its master and "
                "workers were started with; name the file holding it as [spark] auth_secret_file (or set "
                "DRKIT_SPARK_AUTH_SECRET), or set [spark] secure = false"
            )
        )
    if master.startswith("k8s://") and secret_file is not None:
        return SparkSecurity(settings={**SECURE_SETTINGS, SECRET_FILE_SETTING: secret_file})
    return SparkSecurity(settings=dict(SECURE_SETTINGS), passes_secret=master.startswith("spark://"))
