"""The demo behind scripts/demo: validate the local config and show the clusters it names."""

from __future__ import annotations

import subprocess
import sys

CONFIG = "examples/drkit.local.toml"


def run(*args: str) -> None:
    print(f"\n$ drkit {' '.join(args)}", flush=True)
    subprocess.run([sys.executable, "-m", "drkit.cli.app", *args], check=True)


def main() -> None:
    run("config", "validate", "-c", CONFIG)


if __name__ == "__main__":
    main()
