"""Benchmarks of drkit: one entry per benchmark, each run from the repository root as a module. Not tests.

    .venv/bin/python -m scripts.bench.against_mm2 --help      drkit, MirrorMaker 2 and a plain client loop
    .venv/bin/python -m scripts.bench.exactly_once --help     exactly-once against at-least-once
    .venv/bin/python -m scripts.bench.topology --help         the copy with and without topology refresh
    .venv/bin/python -m scripts.bench.mirror --help           `drkit mirror --once` on a backlog; copy paths
    .venv/bin/python -m scripts.bench.copy_processes --help   the copy alone, one process against two
    .venv/bin/python -m scripts.bench.cluster --help          the mirror on a Spark standalone cluster
    .venv/bin/python -m scripts.bench.translate --help        offset translation over a day of offset-syncs
    .venv/bin/python -m scripts.bench.checkpoint_age --help   how soon a group commit is known on the DR side (vs MM2)
    .venv/bin/python -m scripts.bench.operator --help         the operator commands as CLI processes
    .venv/bin/python -m scripts.bench.ab --help               two checkouts alternating: operator and mirror

What several benchmarks share lives in ``scripts.bench.lib``: clusters and topics, producers, the process-tree
memory sampler, percentiles, the machine record (load average, versions, git), drkit configs, the drkit child
process with its timed steps, and the JSON / Markdown output. Every benchmark prints one JSON document on
stdout; progress goes to stderr.
"""
