"""``python -m drkit.localdev up|down|status|stop|start``: see scripts/local-kafka."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from drkit.errors import DrkitError
from drkit.localdev.clusters import DEFAULT_BASE_PORT, DEFAULT_STATE, LocalKafka, as_dicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="local-kafka", description="Local single-node KRaft Kafka clusters.")
    parser.add_argument("command", choices=["up", "down", "status", "stop", "start", "kill"])
    parser.add_argument("aliases", nargs="*", help="cluster aliases (up: default A B)")
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE)
    parser.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT)
    parser.add_argument("--heap", default="512m")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    kafka = LocalKafka(args.state_dir, args.base_port, args.heap)
    try:
        if args.command == "up":
            clusters = kafka.up(args.aliases or ["A", "B"])
        elif args.command == "down":
            stopped = kafka.down()
            print(json.dumps({"stopped": stopped}) if args.json else f"stopped: {', '.join(stopped) or 'none'}")
            return 0
        elif args.command in ("stop", "kill"):
            for alias in args.aliases:
                kafka.stop(alias, kill=args.command == "kill")
            clusters = kafka.status()
        elif args.command == "start":
            clusters = [kafka.start(a) for a in args.aliases]
        else:
            clusters = kafka.status()
    except DrkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        print(json.dumps(as_dicts(clusters), indent=2))
    else:
        for c in clusters:
            state = f"running (pid {c.pid})" if c.running else "stopped"
            print(f"{c.alias}\t{c.bootstrap_servers}\t{state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
