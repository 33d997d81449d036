"""``python -m drkit.localdev up|down|status|stop|start``: see scripts/local-kafka."""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from pathlib import Path

from drkit.errors import DrkitError
from drkit.localdev.clusters import DEFAULT_BASE_PORT, DEFAULT_STATE, LocalKafka, as_dicts
from drkit.localdev.security import Protocol, Security, load, principal_name


def _users(home: Path, principals: list[str]) -> dict[str, str]:
    """SASL users with a new password each, except those the cluster was made with (its SCRAM credentials
    are written once, when its storage is formatted)."""
    recorded = home / "security.json"
    known = dict(load(recorded.read_text()).users) if recorded.exists() else {}
    return {p: known.get(p) or secrets.token_urlsafe(18) for p in principals}


def _principal(name: str) -> str:
    try:
        return principal_name(name)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="local-kafka", description="Local single-node KRaft Kafka clusters.")
    parser.add_argument("command", choices=["up", "down", "status", "stop", "start", "kill", "client"])
    parser.add_argument("aliases", nargs="*", help="cluster aliases (up: default A B)")
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE)
    parser.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT)
    parser.add_argument("--heap", default="512m")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--sasl", action="append", default=[], metavar="ALIAS", help="up: SASL_SSL (SCRAM-SHA-512, PLAIN)"
    )
    parser.add_argument("--mtls", action="append", default=[], metavar="ALIAS", help="up: mutual TLS")
    parser.add_argument(
        "--principal",
        action="append",
        default=[],
        metavar="NAME",
        type=_principal,
        help="up: a SASL user / certificate on secure clusters",
    )
    args = parser.parse_args(argv)
    security = {a: Security(Protocol.SASL_SSL, _users(args.state_dir / a, args.principal)) for a in args.sasl}
    security.update({a: Security(Protocol.MTLS, certificates=tuple(args.principal)) for a in args.mtls})
    kafka = LocalKafka(args.state_dir, args.base_port, args.heap, security=security)
    try:
        if args.command == "client":
            # A secure cluster's client properties for one principal (local development: with its password).
            if not args.aliases:
                parser.error("client needs a cluster alias (and a principal; default admin)")
            alias, principal = [*args.aliases, "admin"][:2]
            properties = kafka.client_properties(alias, principal)
            print(
                json.dumps(properties, indent=2)
                if args.json
                else "\n".join(f'"{k}" = "{v}"' for k, v in properties.items())
            )
            return 0
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
