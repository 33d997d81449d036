"""The benchmarks' shared helpers (scripts/bench/lib/) that decide figures or write configs: the order statistics
the published results were computed with, the drkit.toml a benchmark writes, and the drkit child's code."""

from __future__ import annotations

import math
import sys
import tomllib
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from drkit.config import parse_config  # noqa: E402
from scripts.bench.lib.drkit_child import child_code, drkit_phases, phase_sums  # noqa: E402
from scripts.bench.lib.drkit_config import flow_config  # noqa: E402
from scripts.bench.lib.stats import (  # noqa: E402
    index_rank,
    median,
    nearest_rank,
    nearest_rank_summary,
    rate,
    upper_median,
)

values = st.lists(st.integers(-10_000, 10_000), min_size=1, max_size=200)
quantiles = st.floats(0.0, 1.0)


@given(values, quantiles)
def test_nearest_rank_is_the_smallest_value_with_q_of_the_values_at_or_below_it(vs: list[int], q: float) -> None:
    p = nearest_rank(vs, q)
    assert p is not None and p in vs
    at_or_below = sum(1 for v in vs if v <= p)
    assert at_or_below >= q * len(vs) - 1e-9
    assert sum(1 for v in vs if v < p) < max(1, math.ceil(q * len(vs)))


@given(values)
def test_the_summary_is_ordered_and_ends_at_the_maximum(vs: list[int]) -> None:
    s = nearest_rank_summary(vs)
    assert s is not None
    assert s["p50"] <= s["p90"] <= s["p99"] <= s["max"] == max(vs)
    assert s["p99"] == nearest_rank(vs, 0.99, digits=0)


@given(values, quantiles)
def test_index_rank_is_never_below_nearest_rank(vs: list[int], q: float) -> None:
    a, b = index_rank(vs, q), nearest_rank(vs, q)
    assert a is not None and b is not None and a >= b
    assert index_rank(vs, 1.0) == max(vs)


def test_the_rules_on_examples() -> None:
    ten = list(range(1, 11))
    assert nearest_rank(ten, 0.5) == 5 and index_rank(ten, 0.5) == 6 and upper_median(ten) == 6
    assert nearest_rank([], 0.5) is None and index_rank([], 0.5) is None and upper_median([]) is None
    assert nearest_rank_summary([]) is None
    assert median([1.0, None, 3.0, 10.0]) == 3.0 and median([None]) is None
    assert rate(10, 4) == 2.5 and rate(10, None) is None and rate(10, 0.0) is None


def test_a_benchmark_config_is_one_flow_drkit_accepts(tmp_path: Path) -> None:
    flow = {
        "topics.include": ["orders"],
        "mirror.driver_copy_max_records": 0,
        "checkpoint.max_age_seconds": 7200.0,
        "groups": {"include": [".*"], "exclude": []},
    }
    spark = {"master": "local[2]", "conf": {"spark.driver.memory": "1g"}}
    text = flow_config(str(tmp_path / "state"), "127.0.0.1:1", "127.0.0.1:2", flow, spark)
    data = tomllib.loads(text)
    [f] = data["flows"]
    assert (f["source"], f["target"], f["topics"]["include"]) == ("A", "B", ["orders"])
    assert f["mirror"]["driver_copy_max_records"] == 0 and f["checkpoint"]["max_age_seconds"] == 7200.0
    assert data["spark"]["conf"] == {"spark.driver.memory": "1g"}
    config = parse_config(data, str(tmp_path / "drkit.toml"))
    assert [c for c in config.clusters] == ["A", "B"]


def test_the_child_code_compiles_and_its_lines_parse(tmp_path: Path) -> None:
    for progress in (False, True):
        for query_start in (False, True):
            code = child_code(progress=progress, query_start=query_start)
            compile(code, "<child>", "exec")
            assert ("drkit.mirror.progress" in code) == progress
            assert ('"query_start"' in code) == query_start
    log = tmp_path / "drkit.log"
    log.write_text(
        "DRKIT-BENCH-PHASE spark_session 1.5\n"
        "x flow A->B: batch 0 mirrored 10 records in 2 ranges (0.3s, plan 0.01s, copy 0.2s)\n"
        "DRKIT-BENCH-PHASE plan_batch 0.25\nDRKIT-BENCH-PHASE plan_batch 0.5\n"
    )
    assert phase_sums(log.read_text()) == {"spark_session": 1.5, "plan_batch": 0.75}
    phases = drkit_phases(log)
    assert phases["first"] == {"spark_session": 1.5, "plan_batch": 0.25}
    assert phases["batches"] == 1 and phases["batch_ms_p50"] == {"copy": 200.0, "plan": 10.0}
