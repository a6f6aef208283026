"""The defaults table is read from the planner's constants, and the two-trigger example is the port's answer."""

from __future__ import annotations

import pkgutil

import pytest

from planner.autoscaler import behavior, defaults
from planner.autoscaler.defaults_table import (
    controller_defaults,
    defaults_table_markdown,
    multi_trigger_example,
    planner_names_markdown,
)


def _row(setting: str):
    return next(row for row in controller_defaults() if row.setting == setting)


def test_each_required_default_is_listed_once():
    settings = [row.setting for row in controller_defaults()]
    assert len(settings) == len(set(settings))
    for setting in (
        "--horizontal-pod-autoscaler-tolerance",
        "--horizontal-pod-autoscaler-sync-period",
        "--horizontal-pod-autoscaler-downscale-stabilization",
        "behavior.scaleUp",
        "behavior.scaleDown",
        "--horizontal-pod-autoscaler-cpu-initialization-period",
        "--horizontal-pod-autoscaler-initial-readiness-delay",
        "pollingInterval",
        "cooldownPeriod",
        "minReplicaCount",
        "activationThreshold",
        "metricType",
        "ignoreNullValues",
        "fallback",
        "several triggers",
    ):
        assert setting in settings


def test_values_match_the_constants():
    assert _row("--horizontal-pod-autoscaler-tolerance").value.startswith("0.1: ratios from 0.9 to 1.1")
    assert _row("--horizontal-pod-autoscaler-sync-period").value == "15 s"
    assert _row("--horizontal-pod-autoscaler-downscale-stabilization").value == "300 s (5 min)"
    assert _row("--horizontal-pod-autoscaler-initial-readiness-delay").value == "30 s"
    assert "+4 pods per 15 s, +100 % per 15 s; window 0 s" in _row("behavior.scaleUp").value
    assert "-100 % per 15 s; window from the flag" in _row("behavior.scaleDown").value
    assert _row("pollingInterval").value == "30 s"
    assert _row("minReplicaCount").value.startswith("0 (the HPA KEDA creates gets minReplicas 1")
    assert _row("metricType").value.startswith("AverageValue")
    assert _row("ignoreNullValues").value.startswith("true")
    assert "behavior static" in _row("fallback").value


def test_rows_follow_a_changed_constant(monkeypatch):
    # The page is computed, not typed: change a constant and the row changes.
    monkeypatch.setattr(defaults, "DEFAULT_TOLERANCE", 0.05)
    monkeypatch.setattr(defaults, "DEFAULT_SYNC_PERIOD_S", 30.0)
    monkeypatch.setattr(defaults, "DEFAULT_COOLDOWN_PERIOD_S", 600.0)
    monkeypatch.setattr(behavior, "SCALE_UP_LIMIT_MINIMUM", 8.0)
    assert _row("--horizontal-pod-autoscaler-tolerance").value.startswith("0.05: ratios from 0.95 to 1.05")
    assert _row("--horizontal-pod-autoscaler-sync-period").value == "30 s"
    assert _row("cooldownPeriod").value.startswith("600 s (10 min)")
    assert "max(2 x current, 8)" in _row("scale-up limit without spec.behavior").value


@pytest.mark.parametrize(("waiting", "kv_sum", "expected"), [(60.0, 3.6, (6, 5, 6)), (20.0, 3.6, (2, 5, 5))])
def test_multi_trigger_example_takes_the_largest_proposal(waiting, kv_sum, expected):
    example = multi_trigger_example(waiting, kv_sum, 4)
    assert (*example.proposals, example.desired_replicas) == expected


def test_every_row_links_docs_and_source_and_names_a_planner_attribute():
    for row in controller_defaults():
        assert row.docs[1].startswith("https://") and row.source[1].startswith("https://github.com/")
        first, *others = (name.strip() for name in row.planner_name.split(","))
        pkgutil.resolve_name(first)
        for other in others:
            pkgutil.resolve_name(first.rpartition(".")[0] + "." + other)


def test_tables_split_by_controller():
    hpa_table = defaults_table_markdown(controller="HPA")
    keda_table = defaults_table_markdown(controller="KEDA")
    assert "`pollingInterval`" in keda_table and "`pollingInterval`" not in hpa_table
    assert len(hpa_table.splitlines()) + len(keda_table.splitlines()) - 4 == len(controller_defaults())
    assert "`planner.autoscaler.defaults.DEFAULT_POLLING_INTERVAL_S`" in planner_names_markdown()


def test_scale_to_zero_tolerance_and_cached_metrics_rows():
    assert (
        _row("minReplicas: 0").value.startswith(
            "allowed with an Object or External metric, by default from Kubernetes 1.37"
        )
        and "ScaledToZero" in _row("minReplicas: 0").value
    )
    assert "per HPA by default from Kubernetes 1.35 (GA in 1.37)" in _row("behavior tolerance").value
    assert "from KEDA 2.18" in _row("behavior tolerance").value
    assert _row("useCachedMetrics").value.startswith("false: every HPA sync queries the scaler afresh")
    assert _row("useCachedMetrics").planner_name == "planner.autoscaler.keda.Trigger.use_cached_metrics"


def test_version_changes_table_says_what_1_37_changed():
    from planner.autoscaler.defaults_table import version_changes_markdown

    table = version_changes_markdown()
    assert "| Kubernetes 1.37 | HPA scale to zero |" in table and "`ScaledToZero`" in table
    assert "| Kubernetes 1.37 | per-HPA tolerance |" in table and "| KEDA 2.18 |" in table
    assert "| Kubernetes 1.36 |" in table
