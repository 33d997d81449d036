"""The Grafana dashboard and the Prometheus alerting rules under ``dashboards/`` query only what drkit exports.

The exported names come from the code: every prometheus_client metric object defined in ``drkit.metrics``
and registered in the default registry (the one ``drkit.metrics.serve`` exposes), with the sample names
its type gives (a counter ``x`` is scraped as ``x_total``, a histogram as ``x_bucket``/``x_sum``/``x_count``).
A PromQL expression is reduced to its identifiers (strings, label matchers, ranges, grouping clauses,
numbers and durations removed); each identifier left must be a PromQL function, aggregation or keyword,
or an exported sample name. So a typo, a metric renamed in the code but not in the dashboard, or a
metric that was never exported fails here. ``promtool`` is not available on this machine: the rules file
gets a structural check (valid YAML, groups of rules with alert, expr, severity and summary).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY
from prometheus_client.metrics import MetricWrapperBase

from drkit import metrics

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "dashboards" / "drkit.json"
ALERTS = REPO / "dashboards" / "drkit-alerts.yml"

#: PromQL's functions, aggregations and keywords (prometheus.io/docs/prometheus/latest/querying/).
PROMQL_WORDS = frozenset(
    [
        "abs",
        "absent",
        "absent_over_time",
        "avg",
        "avg_over_time",
        "bottomk",
        "ceil",
        "changes",
        "clamp",
        "clamp_max",
        "clamp_min",
        "count",
        "count_over_time",
        "count_values",
        "day_of_month",
        "day_of_week",
        "delta",
        "deriv",
        "exp",
        "floor",
        "group",
        "histogram_quantile",
        "holt_winters",
        "idelta",
        "increase",
        "irate",
        "label_join",
        "label_replace",
        "last_over_time",
        "ln",
        "log2",
        "log10",
        "max",
        "max_over_time",
        "min",
        "min_over_time",
        "predict_linear",
        "present_over_time",
        "quantile",
        "quantile_over_time",
        "rate",
        "resets",
        "round",
        "scalar",
        "sgn",
        "sort",
        "sort_desc",
        "sqrt",
        "stddev",
        "stddev_over_time",
        "stdvar",
        "stdvar_over_time",
        "sum",
        "sum_over_time",
        "time",
        "timestamp",
        "topk",
        "vector",
        "and",
        "or",
        "unless",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "offset",
        "inf",
        "nan",
    ]
)
SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "gauge": ("",),
    "summary": ("_sum", "_count", ""),
}


def exported_names() -> set[str]:
    registered = set(REGISTRY._collector_to_names)  # the registry drkit.metrics.serve exposes
    names: set[str] = set()
    for obj in vars(metrics).values():
        if isinstance(obj, MetricWrapperBase):
            assert obj in registered, f"{obj._name} is defined but not registered"
            for family in obj.describe():
                names |= {family.name + s for s in SUFFIXES[family.type]}
    return names


def identifiers(expr: str) -> set[str]:
    """The identifiers of a PromQL expression that are not label names, label values or durations."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # strings (label values)
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges, subqueries
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)  # label lists
    expr = re.sub(r"\$\w+", "", expr)  # Grafana variables
    expr = re.sub(r"\b\d[\w.]*", "", expr)  # numbers, durations (5m)
    return set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", expr))


def metric_names(expr: str) -> set[str]:
    """The metric names an expression queries: every identifier that is not a PromQL word."""
    return {i for i in identifiers(expr) if i.lower() not in PROMQL_WORDS}


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def panels() -> list[dict[str, Any]]:
    out = []
    for p in dashboard()["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))  # a collapsed row holds its panels
    return out


def dashboard_exprs() -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in panels() for t in p.get("targets", [])]


def rules() -> list[dict[str, Any]]:
    data = yaml.safe_load(ALERTS.read_text())
    return [r for g in data["groups"] for r in g["rules"]]


def test_the_expression_reader_finds_metrics_and_nothing_else() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (flow, le) (rate(drkit_mirror_batch_seconds_bucket{flow=~"$flow"}'
        "[$__rate_interval]))) > 2 or absent(drkit_x) unless on(flow) time() - y_total offset 5m"
    )
    assert metric_names(expr) == {"drkit_mirror_batch_seconds_bucket", "drkit_x", "y_total"}


def test_exported_names_come_from_the_registry() -> None:
    names = exported_names()
    assert {"drkit_mirror_records_total", "drkit_mirror_batch_seconds_bucket", "drkit_status_verdict"} <= names
    assert "drkit_mirror_records" not in names  # a counter is scraped with its _total suffix


def test_every_metric_the_dashboard_queries_is_exported() -> None:
    exported = exported_names()
    exprs = dashboard_exprs()
    assert len(exprs) >= 15
    unknown = {(title, name) for title, expr in exprs for name in metric_names(expr) - exported}
    assert unknown == set()


def test_every_metric_the_alerts_query_is_exported() -> None:
    exported = exported_names()
    unknown = {(r["alert"], name) for r in rules() for name in metric_names(r["expr"]) - exported}
    assert unknown == set()


@pytest.mark.parametrize(
    "panel_about, metric",
    [
        ("Lag (records)", "drkit_mirror_lag_records"),
        ("Lag (seconds)", "drkit_mirror_lag_seconds"),
        ("Heartbeat latency", "drkit_heartbeat_latency_seconds"),
        ("Checkpoint age", "drkit_status_checkpoint_age_seconds"),
        ("Heartbeat age", "drkit_heartbeat_age_seconds"),
        ("Failovers and failbacks", "drkit_operation_last_timestamp_seconds"),
        ("Copy tasks on a cluster", "drkit_mirror_copy_tasks"),
        ("Drill RPO", "drkit_drill_rpo_records"),
        ("Drill RPO", "drkit_drill_rpo_seconds"),
        ("Drill RTO", "drkit_drill_rto_seconds"),
        ("Drill verdicts", "drkit_drill_verdict"),
        ("Drill verdicts", "drkit_drill_runs_total"),
        ("Since the last drill", "drkit_drill_last_timestamp_seconds"),
    ],
)
def test_the_dashboard_has_the_panels_an_operator_needs(panel_about: str, metric: str) -> None:
    [expr_names] = [
        {n for t in p["targets"] for n in metric_names(t["expr"])} for p in panels() if p["title"] == panel_about
    ]
    assert metric in expr_names


def test_the_dashboard_imports_into_grafana_10() -> None:
    data = dashboard()
    assert data["schemaVersion"] >= 38 and data["uid"] and data["title"]
    variables = {v["name"]: v for v in data["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in panels()]
    assert len(ids) == len(set(ids))
    for p in panels():
        assert {"h", "w", "x", "y"} <= set(p["gridPos"]) and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        if p["type"] == "row":
            continue
        assert p["type"] in {"stat", "timeseries", "table"}, p["title"]
        # Every query goes to the data source the importer picks, never to a uid of someone's Grafana.
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"] and all(t["datasource"]["uid"] == "${datasource}" for t in p["targets"]), p["title"]
        assert all(re.match(r"[A-Z]$", t["refId"]) for t in p["targets"])


def test_the_rules_file_is_a_prometheus_rules_file() -> None:
    data = yaml.safe_load(ALERTS.read_text())
    assert set(data) == {"groups"} and data["groups"]
    alerts: list[str] = []
    for group in data["groups"]:
        assert set(group) <= {"name", "interval", "limit", "rules"} and group["name"]
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}, rule
            assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", rule["alert"]) and isinstance(rule["expr"], str)
            assert re.fullmatch(r"\d+[smhd]", rule.get("for", "0s")), rule["alert"]
            assert rule["labels"]["severity"] in {"critical", "warning"}
            assert rule["annotations"]["summary"]
            assert rule["expr"].count("(") == rule["expr"].count(")")
            alerts.append(rule["alert"])
    assert len(alerts) == len(set(alerts))


@pytest.mark.parametrize(
    "alert, metric",
    [
        ("DrkitCheckpointsStale", "drkit_status_checkpoint_age_seconds"),
        ("DrkitLagHigh", "drkit_mirror_lag_seconds"),
        ("DrkitSourceUnreachable", "drkit_status_source_reachable"),
        ("DrkitTargetDiverged", "drkit_status_target_diverged_partitions"),
        ("DrkitNoActiveMirror", "drkit_mirror_lease_active"),
        ("DrkitCopyTasksMissing", "drkit_mirror_copy_tasks"),
        ("DrkitDrillFailed", "drkit_drill_verdict"),
        ("DrkitDrillOverdue", "drkit_drill_last_timestamp_seconds"),
        ("DrkitDrillTrendWorse", "drkit_drill_rto_seconds"),
        ("DrkitDrillTrendWorse", "drkit_drill_rpo_seconds"),
    ],
)
def test_the_alerts_the_issue_asks_for(alert: str, metric: str) -> None:
    [rule] = [r for r in rules() if r["alert"] == alert]
    assert metric in metric_names(rule["expr"])


def test_each_runbook_link_names_a_section_that_exists() -> None:
    for rule in rules():
        link = rule["annotations"].get("runbook")
        if link is None:
            continue
        path, _, anchor = link.partition("#")
        headings = [line.lstrip("#").strip() for line in (REPO / path).read_text().splitlines() if line.startswith("#")]
        slugs = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}
        assert anchor in slugs, (rule["alert"], link)
