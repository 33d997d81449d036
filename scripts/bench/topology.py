"""What following the topology costs the copy: drkit's 1 KB backlog rate with the periodic reconciliation
on (``refresh_interval_seconds = 10``, the default) and off (0), alternated in one run on one pair of
clusters, as JSON on stdout (a Markdown line on stderr).

    .venv/bin/python -m scripts.bench.topology [--repetitions 3] [--records 100000] [--refresh 10]

Each repetition copies the same backlog once per setting, the order swapped every repetition; the load
average is recorded at each copy, and the ratio (on / off) is given per repetition and as the median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer

from scripts.bench import against_mm2
from scripts.bench.lib.clusters import local_kafka, start_pair
from scripts.bench.lib.machine import load1
from scripts.bench.lib.output import logger, print_json

log = logger("bench")


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.bench.topology", description=__doc__.split("\n\n")[0])
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--size", type=int, default=1000)
    p.add_argument("--refresh", type=float, default=10.0, help="refresh_interval_seconds of the 'on' setting")
    p.add_argument("--base-port", type=int, default=49392)
    p.add_argument("--timeout", type=float, default=300.0)
    args = p.parse_args()
    settings = {"on": [f"refresh_interval_seconds={args.refresh}"], "off": ["refresh_interval_seconds=0"]}
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "records": args.records,
        "size": args.size,
        "refresh_on_seconds": args.refresh,
        "load_start": load1(),
        "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix="drkit-bench-topology-") as tmp:
        kafka = local_kafka(Path(tmp) / "kafka", args.base_port, "512m")
        try:
            a, b = start_pair(kafka)
            watcher = Consumer({"bootstrap.servers": b, "group.id": "bench-watch", "enable.auto.commit": False})
            for rep in range(args.repetitions):
                order = ["on", "off"] if rep % 2 == 0 else ["off", "on"]
                for name in order:
                    ns = argparse.Namespace(
                        drkit_mirror=[], drkit_topology=settings[name], timeout=args.timeout, compression="lz4"
                    )
                    log(f"rep {rep}: refresh {name} (load {load1()})")
                    r = against_mm2.backlog("drkit", args.size, args.records, a, b, Path(tmp) / "runs", ns, watcher)
                    r.update({"rep": rep, "refresh": name})
                    r.pop("phases", None)
                    log(f"  -> {r.get('records_per_s')} records/s")
                    results["runs"].append(r)
            watcher.close()
        finally:
            kafka.down()
    results["load_end"] = load1()
    ratios = []
    for rep in range(args.repetitions):
        by = {r["refresh"]: r for r in results["runs"] if r["rep"] == rep and "error" not in r}
        if "on" in by and "off" in by:
            ratios.append(round(by["on"]["records_per_s"] / by["off"]["records_per_s"], 3))
    rates = {
        name: [r["records_per_s"] for r in results["runs"] if r["refresh"] == name and "error" not in r]
        for name in settings
    }
    results["summary"] = {
        "records_per_s_median": {k: statistics.median(v) if v else None for k, v in rates.items()},
        "ratio_on_off_per_rep": ratios,
        "ratio_on_off_median": statistics.median(ratios) if ratios else None,
    }
    print_json(results)
    s = results["summary"]
    print(
        f"1 KB backlog, refresh {args.refresh:g} s vs off: {s['records_per_s_median']['on']} vs "
        f"{s['records_per_s_median']['off']} records/s (median ratio {s['ratio_on_off_median']}, per repetition "
        f"{ratios}); load {results['load_start']} -> {results['load_end']}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
