"""An S3-compatible server on loopback for the tests: moto's standalone server, in its own process.

Its own process, not moto's ThreadedMotoServer: delta-rs holds the GIL in some calls while it waits for
the store's answer (``alter.set_table_properties``), so a server thread in the same interpreter never
answers and the call hangs.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

#: The bucket the session's server holds (tests/integration/conftest.py's ``s3``): each test its own prefix.
BUCKET = "drkit-state"

#: Credentials the server accepts (moto accepts any); given to drkit through environment references.
ACCESS_KEY_ID, SECRET_ACCESS_KEY = "drkit-test-key", "drkit-test-secret-not-real"


@dataclass
class S3Server:
    """moto's server: the endpoint, a client for the test's own checks, and the process to stop."""

    endpoint: str
    proc: subprocess.Popen[bytes]

    @staticmethod
    def start(port: int, log: Path) -> S3Server:
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"moto_server exited ({proc.returncode}): {log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    proc.kill()
                    raise RuntimeError(f"moto_server did not listen on {port} within 60 s") from None
                time.sleep(0.2)
        return S3Server(f"http://127.0.0.1:{port}", proc)

    def client(self) -> object:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY_ID,
            aws_secret_access_key=SECRET_ACCESS_KEY,
            region_name="us-east-1",
        )

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key in ``bucket`` under ``prefix``."""
        client = self.client()
        out: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):  # type: ignore[attr-defined]
            out += [o["Key"] for o in page.get("Contents", [])]
        return out

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
