"""cluster-autoscaler buying nodes for one GPU pod while the first node's GPUs are not allocatable yet."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.dynamics.cold_start import ClusterAutoscalerSettings, ColdStartPhases, cluster_autoscaler_scale_up_s
from planner.dynamics.node_overbuy import node_overbuy
from planner.errors import PlannerInputError

DEFAULTS = ClusterAutoscalerSettings()


def test_kaito_2325s_node_gets_one_extra_node():
    # The pod is counted at 30 s; its node registers at 314 s, is allocatable at 440 s. At the scan after
    # 314 s the Ready node has no GPU, so a second node is requested at 320 s; it registers at 604 s, after 440 s.
    overbuy = node_overbuy(ColdStartPhases(provision_s=284, node_init_s=126), DEFAULTS)
    assert overbuy.requested_s == (30.0, 320.0) and overbuy.extra_nodes == 1
    # Unneeded 600 s after it registered (1,204 s), at the next scan; the delay after add (920 s) is shorter.
    assert overbuy.removed_s == (1210.0,)
    assert overbuy.extra_node_hours == pytest.approx((1210 - 320) / 3600)


def test_a_fast_boot_and_a_slow_driver_buy_four_extra_nodes():
    # gpu-operator issue 708 reports about four scale-ups for one workload; these timings are assumed.
    overbuy = node_overbuy(ColdStartPhases(provision_s=60, node_init_s=240), DEFAULTS)
    assert overbuy.requested_s == (30.0, 90.0, 150.0, 210.0, 270.0) and overbuy.extra_nodes == 4
    # No scale-down within 600 s of the last scale-up (270 s): each waits for 870 s, or its own unneeded time.
    assert overbuy.removed_s == (870.0, 870.0, 870.0, 930.0)


def test_no_extra_node_when_the_gpus_are_there_before_another_scan():
    assert node_overbuy(ColdStartPhases(provision_s=284, node_init_s=0), DEFAULTS).extra_nodes == 0
    assert node_overbuy(ColdStartPhases(provision_s=284, node_init_s=5), DEFAULTS).extra_nodes == 0


def test_a_zero_provisioning_with_continuous_scans_is_refused():
    settings = ClusterAutoscalerSettings(scan_interval_s=0.0)
    with pytest.raises(PlannerInputError, match="provision_s and scan_interval_s are both 0"):
        node_overbuy(ColdStartPhases(provision_s=0, node_init_s=60), settings)
    assert node_overbuy(ColdStartPhases(provision_s=0, node_init_s=0), settings).extra_nodes == 0


@given(
    st.floats(1.0, 600.0),
    st.floats(0.0, 900.0),
    st.floats(1.0, 30.0),
    st.floats(0.0, 1200.0),
    st.floats(0.0, 1200.0),
    st.floats(0.0, 100.0),
)
def test_every_extra_node_follows_the_rules(provision_s, node_init_s, scan_s, unneeded_s, after_add_s, pending_s):
    settings = ClusterAutoscalerSettings(
        scan_interval_s=scan_s, scale_down_unneeded_s=unneeded_s, scale_down_delay_after_add_s=after_add_s
    )
    phases = ColdStartPhases(provision_s=provision_s, node_init_s=node_init_s)
    overbuy = node_overbuy(phases, settings, pending_since_s=pending_s)
    first_s = overbuy.requested_s[0]
    assert first_s == cluster_autoscaler_scale_up_s(pending_s, settings)
    allocatable_s = first_s + provision_s + node_init_s

    def on_a_scan(time_s: float) -> bool:
        return math.isclose(time_s / scan_s, round(time_s / scan_s), abs_tol=1e-6)

    for before_s, bought_s in zip(overbuy.requested_s, overbuy.requested_s[1:], strict=False):
        # Bought at the first scan after the previous node registered, before the first one is allocatable.
        assert before_s + provision_s - 1e-6 <= bought_s < before_s + provision_s + scan_s + 1e-6
        assert bought_s < allocatable_s and on_a_scan(bought_s)
    last_s = overbuy.requested_s[-1]
    assert (last_s + provision_s + scan_s >= allocatable_s - 1e-6) or overbuy.extra_nodes == 0
    for bought_s, removed_s in zip(overbuy.requested_s[1:], overbuy.removed_s, strict=True):
        assert removed_s >= bought_s + provision_s + unneeded_s - 1e-6
        assert removed_s >= last_s + after_add_s - 1e-6 and on_a_scan(removed_s)
