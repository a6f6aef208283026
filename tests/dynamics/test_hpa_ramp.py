"""Tests for planner.dynamics.hpa_ramp."""

import pytest

from planner.autoscaler.horizontal import ExternalReading, HorizontalController
from planner.autoscaler.hpa_spec import HorizontalPodAutoscalerSpec, MetricSpec, MetricTarget
from planner.dynamics.hpa_ramp import step_through_warmup


def test_new_pods_count_only_after_the_warmup():
    spec = HorizontalPodAutoscalerSpec(
        "kv", 100, (MetricSpec("External", "kv", MetricTarget("Value", value_milli=800)),)
    )
    trace = step_through_warmup(
        HorizontalController(spec),
        4,
        lambda ready, current: [ExternalReading((1000,))],
        warmup_s=60.0,
        duration_s=180.0,
    )
    # ceil(1.25 x Ready) every 15 s; Ready grows only once a step's pods have warmed up
    assert trace.loc[trace.t_s == 0.0, "desired_replicas"].item() == 5
    assert trace.loc[trace.t_s == 45.0, "ready_replicas"].item() == 4
    assert trace.loc[trace.t_s == 60.0, "ready_replicas"].item() == 5
    assert trace.loc[trace.t_s == 60.0, "desired_replicas"].item() == 7


def test_bad_timing_is_refused():
    spec = HorizontalPodAutoscalerSpec(
        "kv", 100, (MetricSpec("External", "kv", MetricTarget("Value", value_milli=800)),)
    )
    with pytest.raises(ValueError, match="sync_period_s"):
        step_through_warmup(
            HorizontalController(spec), 1, lambda r, c: [ExternalReading((1,))], 0.0, 10.0, sync_period_s=0.0
        )
