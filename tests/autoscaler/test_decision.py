"""Tests for planner.autoscaler.explain beyond the CLI: values per trigger, and the texts the HPA chapter glues."""

import pytest

from planner.autoscaler.explain import behavior_text, evaluate_decision, metric_values_by_key
from planner.errors import PlannerInputError
from planner.readers.manifest import load_autoscaler
from tests.conftest import DATA_DIR

TWO = DATA_DIR / "manifests" / "llama-vllm-keda.yaml"
QUEUE = DATA_DIR / "manifests" / "queue-keda.yaml"


def test_values_by_name_index_or_list():
    assert metric_values_by_key({0: 6, "kv": 0.9}) == {"0": 6, "kv": 0.9}
    assert metric_values_by_key([6, None]) == {"0": 6, "1": None}
    assert metric_values_by_key("0=6, kv=0.9") == {"0": "6", "kv": "0.9"}  # as -p metric_values "0=6,kv=0.9"
    with pytest.raises(PlannerInputError, match=r"metric_values: expected NAME=VALUE items, got 'kv'"):
        metric_values_by_key("0=6,kv")
    with pytest.raises(PlannerInputError, match=r"metric_values must map trigger names or 0-based indices"):
        metric_values_by_key(6.0)
    with pytest.raises(PlannerInputError, match=r"example_values: keys are trigger names or 0-based indices, got -1"):
        metric_values_by_key({-1: 3}, "example_values")


def test_missing_trigger_is_named_with_the_callers_hint(shared_dir):
    autoscaler = load_autoscaler(shared_dir / "real-world" / "manifests" / "14-aks-qwen-keda-running-waiting.yaml")
    hint = "metric_values takes one value per trigger"
    with pytest.raises(PlannerInputError, match=rf"^no value given for trigger 1; {hint}$"):
        evaluate_decision(autoscaler, 3, metric_values_by_key({0: 6.0}), value_hint=hint)
    # the chapter's default key on someone else's manifest: named, with the fix
    with pytest.raises(PlannerInputError, match=rf"^no trigger named 'waiting' \(known: 0, 1\); {hint}$"):
        evaluate_decision(autoscaler, 3, {"waiting": 20.0}, value_hint=hint)
    with pytest.raises(PlannerInputError, match=r"no value given for trigger 0, 1; pass --metric NAME=VALUE"):
        evaluate_decision(autoscaler, 3, {})
    both = evaluate_decision(autoscaler, 3, metric_values_by_key([6.0, 9.0]))
    assert (
        both.desired_replicas == 5 and both.explained_metric.key == "1"
    )  # 9 waiting / 2 asks for 5; 6 running per pod / 4 asks for 2


def test_below_the_minimum_no_proposal_is_said_plainly():
    autoscaler = load_autoscaler(TWO)  # minReplicaCount 2
    decision = evaluate_decision(autoscaler, 1, {"in-flight": 150.0, "kv-usage": 1.0})
    lines = decision.proposal_lines()
    assert decision.max_proposal is None and decision.desired_replicas == 2
    assert lines[0].endswith("-> not evaluated") and "None" not in " ".join(lines)
    assert (
        lines[-1] == "No proposal at this sync (1 is below the minimum, so the HPA sets the minimum without "
        "reading metrics); sets 2."
    )
    assert decision.outcome_text().startswith("No metric is evaluated at this sync")


def test_outcome_text_names_the_deciding_metric():
    decision = evaluate_decision(load_autoscaler(TWO), 4, {"in-flight": 150.0, "kv-usage": 1.0})
    assert decision.explained_metric.key == "kv-usage"
    assert decision.outcome_text() == (
        "Trigger kv-usage has the ratio 1.25, so it proposes 5 replicas, the largest proposal; after the "
        "stabilization window and the rate limits the controller sets 5 replicas at this sync."
    )
    assert decision.proposal_lines()[-1] == "The HPA takes the largest: 5; sets 5 this sync."
    held = evaluate_decision(load_autoscaler(QUEUE), 4, {"waiting": 2.0})
    assert "Once the window has passed, the same values take it to 1." in held.outcome_text()
    zero = evaluate_decision(load_autoscaler(QUEUE), 0, {"waiting": 5.0})
    assert "at 0 replicas the HPA is idle and KEDA decides" in zero.outcome_text()


def test_formula_inputs_feed_the_formula(shared_dir):
    path = shared_dir / "real-world" / "manifests" / "10-llmd-keda-epp-queue-guard-scalingmodifiers.yaml"
    decision = evaluate_decision(load_autoscaler(path), 2, {"queue": 5, "running": 40, "pending": 0, "replicas": 2})
    lines = decision.proposal_lines()
    assert "queue: value 5 -> feeds the formula" in lines[0]
    assert decision.explained_metric.key == "composite-metric" and decision.max_proposal == 5
    assert decision.outcome_text().startswith("The scalingModifiers formula's composite metric has the ratio 2.5")


def test_tolerance_flag_reaches_the_controller():
    queue = load_autoscaler(QUEUE)
    assert evaluate_decision(queue, 4, {"waiting": 9.0}).max_proposal == 5  # ratio 1.125
    assert evaluate_decision(queue, 4, {"waiting": 9.0}, tolerance_frac=0.15).metrics[0].within_tolerance


def test_behavior_text(shared_dir):
    assert behavior_text(load_autoscaler(QUEUE).hpa) == (
        "Scale-up: window 0 s, 4 pods per 15 s, 100 % per 15 s (the larger applies). "
        "Scale-down: window 300 s, 100 % per 15 s."
    )
    folder = shared_dir / "real-world" / "manifests"
    assert behavior_text(load_autoscaler(folder / "12-llmd-keda-decode-kv-cache-sum.yaml").hpa) == (
        "Scale-up: window 0 s, 1 pod per 180 s. Scale-down: window 300 s, 1 pod per 300 s."
    )
    assert behavior_text(load_autoscaler(folder / "02-prodstack-hpa-waiting.yaml").hpa).startswith(
        "No behavior is set, so the legacy rules apply"
    )
