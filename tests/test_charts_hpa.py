"""Chart functions of the two HPA chapters return valid, bounded altair specs."""

import numpy as np

from planner.charts.hpa_decisions import (
    or_chart,
    or_grid,
    policy_chart,
    policy_grid,
    ready_chart,
    ready_grid,
    tolerance_chart,
    tolerance_grid,
)
from planner.charts.kv_bounded_ratio import (
    pairing_chart,
    pairing_grid,
    ramp_chart,
    ramp_grid,
    sum_avg_chart,
    sum_avg_grid,
)


def test_hpa_decision_charts():
    grid = tolerance_grid(range(1, 13), np.arange(0.0, 60.5, 0.5), 2.0)
    assert len(grid) < 5000
    row = grid[(grid.replicas == 4) & (grid.total == 20.0)].iloc[0]
    assert row.proposal == 10 and not row.within_tolerance
    assert isinstance(tolerance_chart(grid, 4).to_dict(), dict)
    ready = ready_grid(6, [1.0], 0.8)
    assert ready[ready.ready_replicas == 4].proposal.tolist() == [5, 5]
    assert isinstance(ready_chart(ready, 6, 1.0).to_dict(), dict)
    policy = policy_grid(4, [10], periods=3)
    assert policy.replicas.tolist() == [4, 8, 10, 10]
    assert isinstance(policy_chart(policy, 10).to_dict(), dict)
    either = or_grid(4, [160.0, 200.0, 400.0], 40.0, 48.0, 0.8)
    # 160: both inside the tolerance; 200: both ask for 5 (KV saturated at ratio 1.25); 400: in-flight asks for 10
    assert either[either.proposal_of == "HPA: the larger"].replicas.tolist() == [4, 5, 10]
    assert isinstance(or_chart(either).to_dict(), dict)


def test_kv_charts():
    ramp = ramp_grid(4, [0.8], 4, 10)
    assert ramp[ramp.signal == "KV usage (bounded)"].replicas.tolist() == [4, 5, 7, 9, 12]
    assert isinstance(ramp_chart(ramp, 10, 0.8).to_dict(), dict)
    sums = sum_avg_grid([10], [0.95], 0.8)
    assert dict(zip(sums.trigger, sums.proposal, strict=True)) == {
        "sum(kv) with AverageValue": 12, "avg(kv) with Value": 12, "avg(kv) with AverageValue": 2}
    assert isinstance(sum_avg_chart(sums, 0.95).to_dict(), dict)
    pairs = pairing_grid([0.8], start_replicas=4, in_flight_total=400.0, kv_capacity_requests=48.0,
                         in_flight_target=40.0, warmup_s=240.0, duration_s=1440.0, max_replicas=40)
    first = pairs[pairs.ready_replicas >= 10].groupby("triggers").t_s.min()
    assert first["KV usage + in-flight"] < first["KV usage alone"]
    assert isinstance(pairing_chart(pairs, 10, 0.8).to_dict(), dict)
