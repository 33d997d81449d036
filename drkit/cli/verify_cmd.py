"""``drkit verify``: a topic's offset-syncs proven record by record over a range; exit 0 when every record of the
range is where the syncs say with the source's content, 31 when one is not (the exact ranges listed)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import RenderableType

from drkit.cli.console import Output, Progress, emit, table
from drkit.cli.options import ConfigOption, OutputOption, facade

if TYPE_CHECKING:
    from drkit.core.verify import VerifyReport


PartitionOption = typer.Option(None, "--partition", "-p", min=0, help="A partition (repeatable; default: all).")


def verify(
    ctx: typer.Context,
    flow: str = typer.Option(..., "--flow", help="The replication flow, e.g. A->B."),
    topic: str = typer.Option(..., "--topic", "-t", help="The source topic whose copy is verified."),
    partition: list[int] | None = PartitionOption,
    from_offset: int | None = typer.Option(
        None,
        "--from-offset",
        min=0,
        help="The first source offset of each partition's range (default: its last records).",
    ),
    max_records: int = typer.Option(10_000, "--max-records", min=1, help="Records per partition at most."),
    sample: int | None = typer.Option(
        None,
        "--sample",
        min=1,
        help="Verify about this many records per partition, in windows spread at random over its whole log.",
    ),
    window: int = typer.Option(100, "--window", min=1, help="A sample's consecutive records per window."),
    seed: int | None = typer.Option(None, "--seed", min=0, help="Repeat a sample's draw (its seed is reported)."),
    config: Path = ConfigOption,
    output: Output = OutputOption,
) -> None:
    """Read a range of the source topic and its copies where the offset-syncs place them; every record verified
    (origin header and content), missing, misplaced, different, unsynced or not mirrored yet. Reads only."""
    drkit = facade(ctx, config)
    with Progress(f"verifying {topic}: reading both clusters...", output):
        report = drkit.verify(flow, topic, tuple(partition or ()), from_offset, max_records, sample, window, seed)

    def render(r: VerifyReport) -> Iterable[RenderableType]:
        from drkit.core.verify import Finding

        names = [f.value.replace("_", " ") for f in Finding]
        rows = [
            [f"{p.source_topic}/{p.partition}", _offsets(p.start, p.end, len(p.windows)), p.records]
            + [p.counts[f] for f in Finding]
            + [p.duplicates]
            for p in r.partitions
        ]
        yield table(
            f"verify {r.flow}: {r.source_topic} -> {r.target_topic}",
            ["partition", "source offsets", "records", *names, "duplicates"],
            rows,
        )
        for p in r.partitions:
            for finding, ranges in p.ranges.items():
                if ranges:
                    shown = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in ranges[:20])
                    more = f" (and {len(ranges) - 20} more ranges)" if len(ranges) > 20 else ""
                    yield f"[red]{p.source_topic}/{p.partition} {finding.value}:[/] source offsets {shown}{more}"
        if r.sample_seed is not None:
            yield (
                f"a sample (seed {r.sample_seed}; --seed {r.sample_seed} repeats it): the records between its windows "
                "were not read"
            )
        which = "every record" if r.sample_seed is None else "every sampled record"
        yield f"[bold]pass[/]: {which} is where the syncs say" if r.ok else "[bold red]fail[/]"

    emit(report, output, render)
    raise typer.Exit(report.exit_code)


def _offsets(start: int, end: int, windows: int) -> str:
    if end <= start:
        return "-"
    return f"{start}-{end - 1}" + (f" ({windows} windows)" if windows else "")
