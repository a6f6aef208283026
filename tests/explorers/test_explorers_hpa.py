"""planner.explorers.hpa_decisions and .kv_bounded_ratio: moving a control re-runs the planner."""

import html
import re

import pytest

from planner.autoscaler.explain import evaluate_decision
from planner.dynamics.kv_ramp import compare_ramps
from planner.errors import PlannerInputError
from planner.explorers.hpa_decisions import (
    TRIGGER_NAME,
    explorer_autoscaler,
    hpa_decisions_explorer,
    syncs_with_load_held,
)
from planner.explorers.kv_bounded_ratio import kv_bounded_ratio_explorer


def _text(widget) -> str:
    # The widget's HTML as a reader sees it: tags dropped, whitespace collapsed.
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", widget.value)).split())


def _desired(widget) -> int:
    return int(re.search(r"Desired at this sync:\s+(\d+)", _text(widget)).group(1))


def _path(widget) -> str:
    return re.search(r"starting from \d+ Ready: ([\d →]+?)\s*\(", _text(widget)).group(1).strip()


@pytest.fixture
def hpa():
    box = hpa_decisions_explorer(current_replicas=4, metric_type="AverageValue", target=2.0, metric_value=20.0)
    current, ready, metric_type, target, value, tolerance, low, high, explanation = box.children
    return {
        "current": current,
        "ready": ready,
        "type": metric_type,
        "target": target,
        "value": value,
        "tolerance": tolerance,
        "min": low,
        "max": high,
        "out": explanation,
    }


def test_w1_opens_at_ten_proposed_eight_this_sync(hpa):
    text = _text(hpa["out"])
    assert "ratio 2.5, outside the tolerance -> proposes 10" in text  # W1
    assert "Largest proposal: 10." in text and _desired(hpa["out"]) == 8  # +4 pods / +100 % per period
    assert _path(hpa["out"]) == "4 → 8 → 10"  # W4: the default scale-up policies, sync by sync


def test_the_steps_are_the_ones_planner_hpa_prints(hpa):
    autoscaler = explorer_autoscaler("AverageValue", 2.0, 0.1, 1, 40)
    decision = evaluate_decision(autoscaler, 4, {TRIGGER_NAME: 20.0})
    assert all(step in _text(hpa["out"]) for step in decision.steps)
    assert "<li>" in hpa["out"].value and hpa["out"].value.count("<li>") == len(decision.steps)


def test_moving_the_value_recomputes_w3_inside_tolerance(hpa):
    hpa["value"].value = 8.6
    text = _text(hpa["out"])
    assert "ratio 1.075, inside the tolerance -> proposes 4" in text and _desired(hpa["out"]) == 4  # W3
    hpa["value"].value = 9.0
    assert "ratio 1.125, outside the tolerance -> proposes 5" in _text(hpa["out"])  # W2
    assert _desired(hpa["out"]) == 5


def test_tolerance_slider_moves_the_band(hpa):
    hpa["value"].value = 9.0  # ratio 1.125
    hpa["tolerance"].value = 0.15
    assert "inside the tolerance -> proposes 4" in _text(hpa["out"]) and _desired(hpa["out"]) == 4
    hpa["tolerance"].value = 0.0
    hpa["value"].value = 8.2  # ratio 1.025: a move with no tolerance at all
    assert _desired(hpa["out"]) == 5


def test_value_target_counts_only_ready_pods(hpa):
    hpa["type"].value = "Value"
    hpa["target"].value = 0.8
    hpa["value"].value = 1.0
    assert "query result: value" in hpa["value"].description
    assert "Value target 0.8" in _text(hpa["out"]) and _desired(hpa["out"]) == 5  # ceil(1.25 x 4)
    hpa["ready"].value = 2
    text = _text(hpa["out"])
    assert "proposes 3" in text  # ceil(1.25 x 2 Ready)
    assert _desired(hpa["out"]) == 4 and "after the window the count goes to 3" in text  # held by the window


def test_average_value_ignores_readiness(hpa):
    hpa["ready"].value = 1
    assert "proposes 10" in _text(hpa["out"])  # ceil(20 / 2), whatever is Ready


def test_ready_follows_current_down(hpa):
    hpa["current"].value = 3
    assert hpa["ready"].max == 3 and hpa["ready"].value == 3
    assert "current 3 replicas, 3 Ready" in _text(hpa["out"])


def test_limits_and_bad_bounds(hpa):
    hpa["max"].value = 6
    assert _desired(hpa["out"]) == 6 and _path(hpa["out"]) == "4 → 6"
    hpa["min"].value = 7
    assert "Not a valid autoscaler" in _text(hpa["out"]) and "MinReplicaCount=7" in _text(hpa["out"])
    hpa["min"].value = 1
    assert _desired(hpa["out"]) == 6


def test_scale_down_waits_for_the_window(hpa):
    hpa["value"].value = 2.0
    text = _text(hpa["out"])
    assert _desired(hpa["out"]) == 4 and "ScaleDownStabilized" in text
    assert "4 → 1 (1 at 300 s)" in text


def test_scale_from_zero_is_keda(hpa):
    hpa["min"].value = 0
    hpa["current"].value = 0
    assert "KEDA sets 1" in _text(hpa["out"]) and _desired(hpa["out"]) == 1


def test_time_view_holds_the_load_for_value_targets():
    autoscaler = explorer_autoscaler("Value", 0.8, 0.1, 1, 40)
    trace = syncs_with_load_held(autoscaler, 4, 1.0)  # 4 pods at KV 1.0: a load of 4 pods' worth
    assert trace["desired_replicas"].iloc[-1] == 5  # ceil(4 / 0.8), not a runaway
    held = syncs_with_load_held(explorer_autoscaler("AverageValue", 2.0, 0.1, 1, 40), 4, 34.0)
    assert held["desired_replicas"].tolist()[:4] == [8, 16, 16, 16]  # 34 / (2 x 16) = 1.06: inside the band


def test_bad_metric_type_is_a_clear_error():
    with pytest.raises(PlannerInputError, match="metric type must be one of AverageValue, Value"):
        explorer_autoscaler("Utilization", 80.0, 0.1, 1, 4)
    box = hpa_decisions_explorer(metric_type="Utilization", target=80.0, metric_value=160.0)
    assert box.children[2].value == "AverageValue"
    assert "opened at AverageValue instead of Utilization" in _text(box.children[-1])
    assert "proposes 2" in _text(box.children[-1])  # ceil(160 / 80), said as an AverageValue trigger
    with pytest.raises(PlannerInputError, match="target must be > 0"):
        explorer_autoscaler("Value", 0.0, 0.1, 1, 4)


@pytest.fixture
def kv():
    box = kv_bounded_ratio_explorer(start_replicas=4, kv_target_frac=0.8, goal_replicas=10, warmup_s=240.0)
    start, target, goal, warmup, summary = box.children
    return {"start": start, "target": target, "goal": goal, "warmup": warmup, "out": summary}


def test_kv_opens_at_w8_w9(kv):
    text = _text(kv["out"])
    assert "1 / 0.80 = 1.25" in text and "at most 25%" in text  # W8
    assert "4 → 5 → 7 → 9 → 12" in text  # W9
    assert "after 4 warmups, 16.0 min" in text and "all Ready after 4.2 min" in text


def test_kv_sliders_recompute(kv):
    kv["warmup"].value = 120.0
    expected = compare_ramps(4, 10, 0.8, 120.0)
    assert f"after 4 warmups, {expected.bounded_time_s / 60:.1f} min" in _text(kv["out"])
    assert "after 4 warmups, 8.0 min" in _text(kv["out"])
    kv["target"].value = 0.5
    assert "4 → 8 → 16" in _text(kv["out"]) and "after 2 warmups" in _text(kv["out"])
    kv["start"].value = 2
    kv["goal"].value = 20
    expected = compare_ramps(2, 20, 0.5, 120.0)
    assert " → ".join(map(str, expected.bounded_replicas)) in _text(kv["out"])
    assert f"all Ready after {expected.unbounded_time_s / 60:.1f} min" in _text(kv["out"])


def test_kv_target_inside_tolerance_never_scales(kv):
    kv["target"].value = 0.95
    text = _text(kv["out"])
    assert "= 1.05" in text and "never" in text and "4 → 4 → 4 → 4" in text


def test_kv_goal_already_met(kv):
    kv["goal"].value = 3
    assert "already has the replicas" in _text(kv["out"]) and "Neither signal" in _text(kv["out"])


# The chapter opens the explorer with explorer_opening(autoscaler, decision): its first state must be the page's.
OPENINGS = [
    ("data", "queue-keda.yaml", 4, None, {"waiting": 20.0}),
    ("data", "llama-vllm-keda.yaml", 4, None, {"in-flight": 150.0, "kv-usage": 1.0}),
    ("data", "llama-vllm-keda.yaml", 1, None, {"in-flight": 150.0, "kv-usage": 1.0}),
    ("shared", "14-aks-qwen-keda-running-waiting.yaml", 3, None, {"0": 6.0, "1": 9.0}),
    (
        "shared",
        "10-llmd-keda-epp-queue-guard-scalingmodifiers.yaml",
        2,
        None,
        {"queue": 5.0, "running": 40.0, "pending": 0.0, "replicas": 2.0},
    ),
    ("shared", "12-llmd-keda-decode-kv-cache-sum.yaml", 3, None, {"0": 2.9}),
    ("shared", "11-llmd-hpa-wva-desired-replicas.yaml", 1, None, {"0": 2.0}),
    ("shared", "04-k8sexamples-hpa-running.yaml", 2, None, {"0": 7.0}),
    ("shared", "02-prodstack-hpa-waiting.yaml", 1, None, {"0": 3.0}),
]


@pytest.mark.parametrize(
    ("where", "name", "current", "ready", "values"), OPENINGS, ids=[f"{o[1].split('.')[0]}@{o[2]}" for o in OPENINGS]
)
def test_explorer_opens_on_the_pages_decision(request, where, name, current, ready, values):
    from planner.explorers.hpa_decisions import explorer_opening, opening_decision
    from planner.readers.manifest import load_autoscaler
    from tests.conftest import DATA_DIR

    folder = (
        DATA_DIR / "manifests"
        if where == "data"
        else request.getfixturevalue("shared_dir") / "real-world" / "manifests"
    )
    autoscaler = load_autoscaler(folder / name)
    page = evaluate_decision(autoscaler, current, values, ready_replicas=ready)
    opening = explorer_opening(autoscaler, page)
    assert opening.exact and opening.metric_key == page.explained_metric.key
    box = hpa_decisions_explorer(**opening.kwargs())
    assert _desired(box.children[-1]) == page.desired_replicas == opening_decision(opening).desired_replicas
    if page.max_proposal is not None:
        assert f"Largest proposal: {page.max_proposal}." in _text(box.children[-1])


def test_explorer_opening_keeps_the_manifests_behavior_and_legacy_path(shared_dir):
    from planner.explorers.hpa_decisions import explorer_opening
    from planner.readers.manifest import load_autoscaler

    legacy = load_autoscaler(shared_dir / "real-world" / "manifests" / "02-prodstack-hpa-waiting.yaml")
    opening = explorer_opening(legacy, evaluate_decision(legacy, 1, {"0": 3.0}))
    assert opening.behavior is None and (opening.min_replicas, opening.max_replicas) == (1, 2)
    assert (opening.metric_type, opening.target, opening.metric_value) == ("Value", 1.0, 3.0)
    pods = load_autoscaler(shared_dir / "real-world" / "manifests" / "04-k8sexamples-hpa-running.yaml")
    opening = explorer_opening(pods, evaluate_decision(pods, 2, {"0": 7.0}))
    assert opening.metric_value == 14.0 and opening.behavior is pods.hpa.behavior  # 7 per pod x 2 Ready
    warming = explorer_opening(pods, evaluate_decision(pods, 2, {"0": 7.0}, ready_replicas=1))
    assert not warming.exact and "Ready pods' total" in warming.note


def test_explorer_opening_names_the_trigger_it_shows():
    from planner.explorers.hpa_decisions import explorer_opening
    from planner.readers.manifest import load_autoscaler
    from tests.conftest import DATA_DIR

    two = load_autoscaler(DATA_DIR / "manifests" / "llama-vllm-keda.yaml")
    opening = explorer_opening(two, evaluate_decision(two, 4, {"in-flight": 150.0, "kv-usage": 1.0}))
    box = hpa_decisions_explorer(**opening.kwargs())
    assert "It opens on kv-usage, the metric with the largest proposal" in _text(box.children[-1])
    assert box.children[2].value == "Value" and box.children[3].value == 0.8


def test_explorer_opening_at_zero_replicas(shared_dir):
    from planner.explorers.hpa_decisions import explorer_opening, opening_decision
    from planner.readers.manifest import load_autoscaler

    folder = shared_dir / "real-world" / "manifests"
    min0 = load_autoscaler(folder / "21-eks-llm-inference-keda-waiting-min0.yaml")  # activationThreshold 1
    for waiting, desired in ((1.0, 0), (2.0, 1)):  # active only strictly above the activation threshold
        page = evaluate_decision(min0, 0, {"0": waiting})
        opening = explorer_opening(min0, page)
        assert opening.exact and opening.activation_threshold == 1.0
        assert page.desired_replicas == opening_decision(opening).desired_replicas == desired
        assert _desired(hpa_decisions_explorer(**opening.kwargs()).children[-1]) == desired
    plain = load_autoscaler(folder / "11-llmd-hpa-wva-desired-replicas.yaml")
    opening = explorer_opening(plain, evaluate_decision(plain, 0, {"0": 2.0}))
    assert (
        not opening.exact and "A plain HPA at 0 replicas acts only if it took the target there itself" in opening.note
    )


def test_explorer_opens_at_small_targets_and_wide_tolerances():
    # Controls never clamp the opening: a 5-milli target and a 60 % tolerance open as given.
    box = hpa_decisions_explorer(
        current_replicas=2, metric_type="AverageValue", target=0.005, metric_value=0.03, tolerance_frac=0.6
    )
    assert box.children[3].value == 0.005 and box.children[5].value == 0.6
    assert "proposes 6" in _text(box.children[-1])  # ceil(0.03 / 0.005); ratio 3 is outside even 60 %
