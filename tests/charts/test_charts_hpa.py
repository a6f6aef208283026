"""The two HPA chapters' charts: grids from the HPA port, charts that follow the manifest and fit."""

import numpy as np
import pytest

from planner.autoscaler.behavior import HorizontalPodAutoscalerBehavior
from planner.autoscaler.explain import evaluate_decision
from planner.charts.hpa_decisions import (
    WIDTH_PX,
    bounded_by_full_cache,
    has_several_triggers,
    or_chart,
    or_grid,
    or_load_factors,
    policy_chart_for,
    policy_grid,
    policy_path_text,
    policy_steps,
    ready_chart,
    ready_chart_for,
    ready_grid,
    tolerance_chart,
    tolerance_chart_for,
    tolerance_grid,
)
from planner.charts.kv_bounded_ratio import (
    kv_targets_around,
    pairing_chart,
    pairing_grid,
    pairing_summary,
    ramp_chart,
    ramp_grid,
    ramp_warmups,
    sum_avg_chart,
    sum_avg_grid,
)
from planner.readers.manifest import load_autoscaler
from tests.conftest import DATA_DIR

COLUMN_PX = 650  # the book's content column
QUEUE = DATA_DIR / "manifests" / "queue-keda.yaml"
TWO = DATA_DIR / "manifests" / "llama-vllm-keda.yaml"


def _fits_the_column(chart) -> None:
    """Plot width plus room for a y axis stays inside the column; every legend sits below the plot."""
    spec = chart.to_dict()
    assert spec["width"] + 110 <= COLUMN_PX

    def legends(node):
        if isinstance(node, dict):
            if isinstance(node.get("legend"), dict):
                yield node["legend"]
            for value in node.values():
                yield from legends(value)
        elif isinstance(node, list):
            for value in node:
                yield from legends(value)

    for legend in legends(spec):
        assert legend.get("orient") == "bottom"
        assert legend.get("labelLimit", 0) == 0 or legend["labelLimit"] >= 200  # no clipped labels


def test_tolerance_grid_both_target_types():
    grid = tolerance_grid(range(1, 13), np.arange(0.0, 60.5, 0.5), 2.0)
    row = grid[(grid.replicas == 4) & (grid.value == 20.0)].iloc[0]
    assert row.proposal == 10 and not row.within_tolerance  # ceil(20 / 2)
    assert grid[(grid.replicas == 4) & (grid.value == 8.5)].iloc[0].proposal == 4  # 1.0625: inside the band
    value = tolerance_grid([4], [1.0, 0.84], 0.8, "Value")
    assert value.proposal.tolist() == [5, 4]  # ceil(1.25 x 4); 1.05 is inside the band
    assert isinstance(tolerance_chart(grid, 4, "total", 20.0).to_dict(), dict)


def test_tolerance_chart_follows_the_manifest():
    autoscaler = load_autoscaler(TWO)
    decision = evaluate_decision(autoscaler, 4, {"in-flight": 150.0, "kv-usage": 1.0})
    chart = tolerance_chart_for(autoscaler, decision)
    spec = chart.to_dict()
    assert "kv-usage: value (target 0.8)" in str(spec)  # the deciding trigger, at its own target
    grid = chart.layer[0].data
    at_now = tolerance_grid([4], [1.0], 0.8, "Value")
    assert grid[(grid.replicas == 4) & np.isclose(grid.value, 1.0)].proposal.tolist() == at_now.proposal.tolist()
    assert grid.replicas.max() == 12  # the manifest's maxReplicaCount
    _fits_the_column(chart)


def test_ready_grid_and_chart_at_the_manifest_target():
    ready = ready_grid(6, [1.0], 0.8)
    assert ready[ready.ready_replicas == 4].proposal.tolist() == [5, 5]
    assert isinstance(ready_chart(ready, 6, 1.0).to_dict(), dict)
    autoscaler = load_autoscaler(QUEUE)
    decision = evaluate_decision(autoscaler, 4, {"waiting": 20.0})
    chart = ready_chart_for(autoscaler, decision)
    grid = chart.layer[0].data
    assert np.isclose(grid.per_pod_value.min(), 1.0) and np.isclose(grid.per_pod_value.max(), 5.0)  # 0.5 x 2 to 20 / 4
    assert chart.to_dict()["params"][0]["value"] == 5.0  # 20 waiting over 4 Ready pods
    _fits_the_column(chart)


def test_policy_grid_default_and_legacy():
    policy = policy_grid(4, [10], HorizontalPodAutoscalerBehavior())
    assert policy.replicas.tolist() == [4, 8, 10, 10] and policy_steps(policy, 10) == "4 -> 8 -> 10"
    assert policy_path_text(policy, 10) == "goes 4 -> 8 -> 10"
    assert policy_path_text(policy_grid(4, [4], HorizontalPodAutoscalerBehavior()), 4) == "stays at 4"
    legacy = policy_grid(5, [30], None)
    assert policy_steps(legacy, 30) == "5 -> 10 -> 20 -> 30"  # max(2 x current, 4) per sync
    with pytest.raises(ValueError, match="no ramp for 11"):
        policy_steps(policy, 11)


def test_policy_chart_follows_the_manifest_behavior(shared_dir):
    # One pod per 180 s on scale-up, bounds 1..10.
    autoscaler = load_autoscaler(shared_dir / "real-world" / "manifests" / "12-llmd-keda-decode-kv-cache-sum.yaml")
    decision = evaluate_decision(autoscaler, 3, {"0": 5.0})  # ceil(5 / 0.8) = 7
    chart, grid, wanted = policy_chart_for(autoscaler, decision)
    assert wanted == 7 and sorted(grid.wanted.unique()) == list(range(1, 11))
    ramp = grid[grid.wanted == 7]
    changes = ramp[ramp.reason != "end of view"]
    assert changes.replicas.tolist() == [3, 4, 5, 6, 7] and changes.t_s.tolist() == [0.0, 0.0, 180.0, 360.0, 540.0]
    _fits_the_column(chart)


def test_policy_chart_starts_within_the_bounds():
    autoscaler = load_autoscaler(TWO)  # minReplicaCount 2
    decision = evaluate_decision(autoscaler, 1, {"in-flight": 150.0, "kv-usage": 1.0})
    _, grid, wanted = policy_chart_for(autoscaler, decision)
    assert wanted == 2 and (grid[grid.t_s == 0.0].replicas.head(1) == 2).all()


def test_or_grid_runs_the_decision_on_the_manifest():
    autoscaler = load_autoscaler(TWO)
    assert has_several_triggers(autoscaler) and not has_several_triggers(load_autoscaler(QUEUE))
    assert bounded_by_full_cache(autoscaler.scaled_object.triggers[1].query)
    values = {"in-flight": 150.0, "kv-usage": 1.0}
    grid = or_grid(autoscaler, 4, values, [0.0, 1.0, 2.0, 4.0])
    larger = grid[grid.proposal_of == "HPA: the larger"].set_index("load").replicas
    # at 1 the chart equals the decision; KV stays at full caches (ceil(1.25 x 4) = 5) while in-flight grows
    assert larger[1.0] == evaluate_decision(autoscaler, 4, values).max_proposal == 5
    kv = grid[grid.proposal_of == "kv-usage"].set_index("load").replicas
    assert kv[2.0] == kv[4.0] == 5
    assert larger[4.0] == 15  # ceil(600 / 40)
    assert 1.0 in or_load_factors(3.0, 10)
    _fits_the_column(or_chart(grid))
    with pytest.raises(ValueError, match="several triggers"):
        or_grid(load_autoscaler(QUEUE), 4, {"waiting": 1.0}, [1.0])


def test_kv_ramp_grid_stops_at_the_goal():
    targets = kv_targets_around(0.8)
    assert 0.8 in targets.tolist() and targets.min() >= 0.3 and targets.max() <= 0.99
    assert 0.83 in kv_targets_around(0.83).tolist() and kv_targets_around(1.0).tolist()[-1] == 1.0
    n = ramp_warmups(4, 10, targets)
    assert n == 7  # target 0.9 needs six warmups (4 -> 5 -> ... -> 10), one more to show the hold
    ramp = ramp_grid(4, targets, n, 10)
    bounded = ramp[ramp.signal == "KV usage (bounded)"]
    assert bounded[bounded.target == 0.8].replicas.tolist() == [4, 5, 7, 9, 12, 12, 12, 12]
    for _, one in bounded.groupby("target"):  # every ramp holds from its first count at or past the goal
        counts = one.sort_values("warmup").replicas.to_numpy()
        reached = np.flatnonzero(counts >= 10)
        assert reached.size == 0 or (counts[reached[0] :] == counts[reached[0]]).all()
    assert bounded.replicas.max() == 20  # target 0.45: 4 -> 9 -> 20, one step past the goal at most
    assert bounded[bounded.target == 0.95].replicas.tolist() == [4] * (n + 1)  # inside the tolerance
    chart = ramp_chart(ramp, 10, 0.8)
    assert chart.to_dict()["params"][0]["value"] == 0.8
    _fits_the_column(chart)


def test_kv_charts_fit_and_pairing_summary_matches_the_chart():
    sums = sum_avg_grid([10], [0.95], 0.8)
    assert dict(zip(sums.trigger, sums.proposal, strict=True)) == {
        "sum(kv) with AverageValue": 12,
        "avg(kv) with Value": 12,
        "avg(kv) with AverageValue": 2,
    }
    _fits_the_column(sum_avg_chart(sums, 0.95))
    pairs = pairing_grid(
        [0.8, 0.95],
        start_replicas=4,
        in_flight_total=400.0,
        kv_capacity_requests=48.0,
        in_flight_target=40.0,
        warmup_s=240.0,
        duration_s=1440.0,
        max_replicas=40,
    )
    first = pairs[pairs.ready_replicas >= 10].groupby(["kv_target", "triggers"]).t_s.min()
    assert first[(0.8, "KV usage + in-flight")] < first[(0.8, "KV usage alone")]
    summary = pairing_summary(pairs, 0.8, 10)
    alone = pairs[(pairs.kv_target == 0.8) & (pairs.triggers == "KV usage alone")]
    assert summary.alone_final == alone.ready_replicas.iloc[-1] == 11  # at 9 Ready the caches are 93 % full
    assert summary.alone_reach_s == first[(0.8, "KV usage alone")] == 960.0 and summary.paired_reach_s == 255.0
    never = pairing_summary(pairs, 0.95, 10)
    assert never.alone_reach_s is None and never.minutes(None, 1440.0) == "never (within 24 minutes)"
    assert alone.t_s.max() == 1440.0 and len(pairs) < 100  # only the syncs where something changes
    with pytest.raises(ValueError, match=r"no KV target 0\.5"):
        pairing_summary(pairs, 0.5, 10)
    _fits_the_column(pairing_chart(pairs, 10, 0.8))


def test_width_constant_leaves_room_for_axes():
    assert WIDTH_PX + 110 <= COLUMN_PX


def _line_layers(spec) -> dict[str, dict]:
    """Each line layer by the series its filter keeps (or the diagonal's constant series)."""
    found = {}
    for layer in spec["layer"]:
        mark = layer["mark"] if isinstance(layer["mark"], dict) else {"type": layer["mark"]}
        if mark["type"] != "line":
            continue
        kept = [t["filter"] for t in layer.get("transform", []) if "filter" in t and "'trigger'" in str(t["filter"])]
        name = kept[0].split("===")[-1].strip(" '\")") if kept else "other"
        found[name] = {"mark": mark, "layer": layer}
    return found


def test_coinciding_series_are_both_visible_and_the_chart_says_why():
    spec = ready_chart(ready_grid(6, [0.5, 1.0, 1.5], 0.8), 6, 1.0).to_dict()
    lines = _line_layers(spec)
    band, line = lines["avg(...) with Value"]["mark"], lines["sum(...) with AverageValue"]["mark"]
    assert band["strokeWidth"] >= 3 * line["strokeWidth"] and band["opacity"] < 1 and line["point"]
    assert spec["layer"].index(lines["avg(...) with Value"]["layer"]) < spec["layer"].index(
        lines["sum(...) with AverageValue"]["layer"]
    )  # the band is drawn first, the line on top
    assert "coincide" in " ".join(spec["title"]["subtitle"])
    grid = ready_grid(6, [0.5, 1.0, 1.5], 0.8).pivot_table(
        index=["per_pod_value", "ready_replicas"], columns="trigger", values="proposal"
    )
    parted = grid[grid["avg(...) with Value"] != grid["sum(...) with AverageValue"]]
    assert (parted == 6).any(axis=1).all()  # where they part, one of them kept the current count


def test_kv_sum_line_rides_on_the_avg_band_and_the_diagonal_is_in_the_legend():
    grid = sum_avg_grid(range(1, 11), [0.5, 0.95], 0.8)
    spec = sum_avg_chart(grid, 0.95).to_dict()
    lines = _line_layers(spec)
    band, line = lines["avg(kv) with Value"]["mark"], lines["sum(kv) with AverageValue"]["mark"]
    assert band["strokeWidth"] >= 3 * line["strokeWidth"] and band["opacity"] < 1 and line["point"]
    domain = spec["layer"][0]["encoding"]["color"]["scale"]["domain"]
    assert "no change: proposal = current" in domain and len(domain) == 4
    pivot = grid.pivot_table(index=["kv_usage", "replicas"], columns="trigger", values="proposal")
    assert (pivot["sum(kv) with AverageValue"] == pivot["avg(kv) with Value"]).all()


def test_tolerance_legend_says_what_a_colour_means_not_true_or_false():
    spec = tolerance_chart(tolerance_grid([4], [1.0, 8.0], 2.0), 4, "waiting").to_dict()
    legend = spec["layer"][1]["encoding"]["color"]["legend"]
    assert "inside the tolerance: the count stays" in legend["labelExpr"] and legend.get("title") is None


def test_ramp_chart_names_the_goal_the_unbounded_line_covers():
    spec = ramp_chart(ramp_grid(4, [0.8], 5, 10), 10, 0.8).to_dict()
    texts = [
        layer
        for layer in spec["layer"]
        if (layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"]) == "text"
    ]
    assert len(texts) == 1 and "goal: 10 replicas" in str(spec)
