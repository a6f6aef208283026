from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.dynamics.cold_start import (
    ClusterAutoscalerSettings,
    ColdStartPhases,
    KarpenterSettings,
    cluster_autoscaler_scale_up_s,
    karpenter_batch_close_s,
    phase_waterfall,
    pods_per_node,
    time_to_ready_s,
)
from planner.errors import PlannerInputError

# kaito issue 2325 (one A100 node, a 27B model): 966 s from creation to ready. Its 284 s provisioning,
# 126 s node init, 101 s pull and 195 s compile are phases here; the other 260 s it lists (resource
# preparation 7, container start 3, framework bootstrap 74, engine pre-load 21, weights 62, its own
# benchmark 92, readiness 1) are lumped into weights_load_s.
KAITO = ColdStartPhases(provision_s=284, node_init_s=126, image_pull_s=101, weights_load_s=260, warmup_s=195)


def test_a_cold_node_pod_takes_every_phase():
    assert time_to_ready_s(KAITO, needs_node=True, image_cached=False) == 966.0


def test_a_warm_node_with_the_image_skips_node_and_pull():
    assert time_to_ready_s(KAITO, needs_node=False, image_cached=True) == 455.0
    assert time_to_ready_s(KAITO, needs_node=False, image_cached=False) == 556.0


def test_the_node_autoscaler_delay_adds_to_a_cold_start():
    delay_s = cluster_autoscaler_scale_up_s(0.0, ClusterAutoscalerSettings())
    assert delay_s == 30.0
    assert time_to_ready_s(KAITO, needs_node=True, image_cached=False, reaction_delay_s=delay_s) == 996.0
    no_delay = ClusterAutoscalerSettings(scan_interval_s=0.0, gpu_pod_scale_up_delay_s=0.0)
    assert cluster_autoscaler_scale_up_s(7.0, no_delay) == 7.0


@pytest.mark.parametrize(
    ("pending_s", "first_scan_s", "expected_s"),
    [(0.0, 0.0, 30.0), (3.0, 0.0, 40.0), (0.0, 4.0, 34.0), (10.0, 0.0, 40.0)],
)
def test_cluster_autoscaler_waits_for_the_gpu_buffer_then_the_next_scan(pending_s, first_scan_s, expected_s):
    assert (
        cluster_autoscaler_scale_up_s(pending_s, ClusterAutoscalerSettings(), first_scan_s=first_scan_s) == expected_s
    )


@given(st.floats(0, 1e5), st.floats(0, 120), st.floats(0.5, 60))
def test_cluster_autoscaler_acts_on_a_scan_no_earlier_than_the_buffer(pending_s, buffer_s, scan_s):
    settings = ClusterAutoscalerSettings(scan_interval_s=scan_s, gpu_pod_scale_up_delay_s=buffer_s)
    at_s = cluster_autoscaler_scale_up_s(pending_s, settings)
    assert at_s >= pending_s + buffer_s - 1e-6
    assert at_s < pending_s + buffer_s + scan_s + 1e-6


@pytest.mark.parametrize(
    ("times_s", "expected_s"),
    [
        ([0.0], 1.0),  # one pod: the idle window
        ([0.0, 0.5, 1.2, 5.0], 2.2),  # the fourth pod comes after the window closed
        ([0.0, 0.9, 1.8, 2.7, 3.6, 4.5, 5.4, 6.3, 7.2, 8.1, 9.0, 9.9], 10.0),  # a steady stream: the max window
    ],
)
def test_karpenter_closes_a_batch_on_idle_or_max(times_s, expected_s):
    assert karpenter_batch_close_s(times_s, KarpenterSettings()) == pytest.approx(expected_s)


def test_karpenter_refuses_an_empty_or_unsorted_batch():
    with pytest.raises(PlannerInputError, match="at least one"):
        karpenter_batch_close_s([], KarpenterSettings())
    with pytest.raises(PlannerInputError, match="ascending"):
        karpenter_batch_close_s([2.0, 1.5], KarpenterSettings())


def test_the_waterfall_is_back_to_back_and_ends_at_ready():
    bars = phase_waterfall(KAITO, needs_node=True, image_cached=False, reaction_delay_s=30.0)
    assert [bar.name for bar in bars] == [
        "node autoscaler",
        "provision",
        "node init",
        "image pull",
        "weights load",
        "warmup",
    ]
    assert all(a.end_s == b.start_s for a, b in itertools.pairwise(bars))
    assert bars[0].start_s == 0.0 and bars[-1].end_s == 996.0
    assert [bar.duration_s for bar in bars] == [30, 284, 126, 101, 260, 195]


def test_a_negative_phase_is_refused_by_name():
    with pytest.raises(PlannerInputError, match="image_pull_s"):
        ColdStartPhases(image_pull_s=-1.0)
    with pytest.raises(PlannerInputError, match="batch_idle_s"):
        KarpenterSettings(batch_idle_s=-0.5)


def test_pods_per_node_packs_whole_pods_and_refuses_one_too_large():
    assert pods_per_node(8, 1) == 8 and pods_per_node(8, 3) == 2 and pods_per_node(8, 8) == 1
    with pytest.raises(PlannerInputError, match="do not fit on a node of 4"):
        pods_per_node(4, 8)
