"""Tests for planner.readers.manifest: real manifests, quantities, and errors that name the field."""

from __future__ import annotations

import textwrap

import pytest

from planner.autoscaler.quantity import parse_quantity_milli
from planner.errors import PlannerInputError
from planner.readers.manifest import load_autoscaler, load_autoscalers

NOT_AUTOSCALERS = {
    "50-gie-vllm-gpu-deployment.yaml",
    "51-aibrix-vllm-deploy-prestop-drain-60s.yaml",
    "52-aibrix-vllm-deploy-grace-300.yaml",
    "53-kserve-llmisvc-config-template-grace60-prestop.yaml",
    "54-llmd-optimized-baseline-vllm-deployment-no-grace.yaml",
    "55-k8sexamples-vllm-deployment-no-grace.yaml",
}


def test_every_real_manifest_loads_or_is_refused_clearly(shared_dir):
    paths = sorted((shared_dir / "real-world" / "manifests").glob("*.yaml"))
    assert len(paths) >= 30
    loaded = 0
    for path in paths:
        if path.name in NOT_AUTOSCALERS:
            with pytest.raises(PlannerInputError, match=r"no HorizontalPodAutoscaler .* found; the file holds"):
                load_autoscalers(path)
            continue
        (autoscaler,) = load_autoscalers(path)
        assert autoscaler.hpa.metrics and autoscaler.hpa.max_replicas >= 1
        loaded += 1
    assert loaded == len(paths) - len(NOT_AUTOSCALERS)


def test_real_scaled_objects_read_as_keda_creates_them(shared_dir):
    manifests = shared_dir / "real-world" / "manifests"
    seed = load_autoscaler(manifests / "90-seed000-llama-vllm.yaml")
    assert seed.kind == "ScaledObject" and seed.scaled_object.min_replica_count == 2
    assert [(m.name, m.target.type) for m in seed.hpa.metrics] == [
        ("s0-prometheus", "AverageValue"),
        ("s1-prometheus", "Value"),
    ]
    assert seed.hpa.behavior.scale_down.stabilization_window_seconds == 900
    guard = load_autoscaler(manifests / "10-llmd-keda-epp-queue-guard-scalingmodifiers.yaml")
    assert [m.name for m in guard.hpa.metrics] == ["composite-metric"]
    assert guard.scaled_object.fallback.replicas == 1
    kv = load_autoscaler(manifests / "12-llmd-keda-decode-kv-cache-sum.yaml")
    assert kv.hpa.metrics[0].target.average_value_milli == 800
    assert kv.scaled_object.triggers[0].query.startswith("sum(vllm:kv_cache_usage_perc")
    two = load_autoscaler(manifests / "14-aks-qwen-keda-running-waiting.yaml")  # after a TriggerAuthentication
    assert two.scaled_object.min_replica_count == 2 and len(two.hpa.metrics) == 2
    zero = load_autoscaler(manifests / "19-rag-platform-eks-keda-waiting-min0.yaml")
    assert zero.scaled_object.min_replica_count == 0 and zero.hpa.min_replicas == 1
    misplaced = load_autoscaler(manifests / "23-prokube-kserve-keda-token-rate.yaml")
    assert any("metadata.metricType is ignored" in note for note in misplaced.notes)
    cpu = load_autoscaler(manifests / "18-llm-serving-infra-hpa-cpu.yaml")
    assert cpu.hpa.metrics[0].target.average_utilization_pct == 70 and cpu.hpa.behavior is None


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("500m", 500),
        ("0.8", 800),
        (40, 40000),
        (0.8, 800),
        ("1k", 1_000_000),
        ("1Ki", 1_024_000),
        ("1e3", 1_000_000),
        ("0.0001", 1),
        ("2.5", 2500),
        ("100u", 1),
    ],
)
def test_parse_quantity(text, milli):
    assert parse_quantity_milli(text) == milli


@pytest.mark.parametrize("text", ["abc", "1.2.3", "", "5 pods", True, None, float("nan")])
def test_parse_quantity_rejects(text):
    with pytest.raises(ValueError):
        parse_quantity_milli(text)


def _write(tmp_path, text, name="m.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


HPA = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: x}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: vllm}
  minReplicas: 1
  maxReplicas: 5
  metrics:
  - type: Pods
    pods:
      metric: {name: waiting}
      target: {type: AverageValue, averageValue: %s}
"""


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", r"spec\.metrics\[0\]\.pods\.target\.averageValue: expected a quantity such as 40, 0\.8 or 500m"),
        ("0", r"spec\.metrics\[0\]\.pods\.target\.averageValue: expected a quantity above 0"),
    ],
)
def test_errors_name_file_and_field(tmp_path, value, message):
    path = _write(tmp_path, HPA % value)
    with pytest.raises(PlannerInputError, match=rf"{path.name}: {message}"):
        load_autoscalers(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("spec: [", "not valid YAML at line"),
        (
            "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nspec:\n  scaleTargetRef: {name: a}\n",
            r"spec\.maxReplicas: required field is missing",
        ),
        (
            "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nspec:\n  scaleTargetRef: {name: a}\n"
            "  maxReplicas: 3\n  metrics:\n  - type: Pods\n    pods:\n      metric: {name: q}\n"
            "      target: {type: Value, value: 1}\n",
            r"spec\.metrics\[0\]\.pods\.target\.type: expected one of AverageValue, got 'Value'",
        ),
        (
            "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nspec:\n  scaleTargetRef: {name: a}\n"
            "  triggers:\n  - type: prometheus\n    metadata: {query: q}\n",
            r"spec\.triggers\[0\]\.metadata\.threshold: required field is missing",
        ),
        (
            "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nspec:\n  scaleTargetRef: {name: a}\n"
            "  triggers:\n  - type: prometheus\n    metadata: {threshold: 'five'}\n",
            r"spec\.triggers\[0\]\.metadata\.threshold: expected a number, got 'five'",
        ),
        (
            "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nspec:\n  scaleTargetRef: {name: a}\n"
            "  advanced:\n    scalingModifiers:\n      target: '1'\n      formula: \"__import__('os').system('id')\"\n"
            "  triggers:\n  - type: prometheus\n    name: q\n    metadata: {threshold: '5'}\n",
            r"spec\.advanced\.scalingModifiers\.formula: unexpected character",
        ),
        (
            "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nspec:\n  scaleTargetRef: {name: a}\n"
            "  maxReplicas: 3\n  behavior:\n    scaleUp:\n      selectPolicy: Fastest\n",
            r"spec\.behavior\.scaleUp\.selectPolicy: expected one of Max, Min, Disabled, got 'Fastest'",
        ),
    ],
)
def test_malformed_manifests_are_refused(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(PlannerInputError, match=message):
        load_autoscalers(path)


def test_hpa_defaults_and_v1(tmp_path):
    no_metrics = _write(
        tmp_path,
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: a}\n"
        "spec:\n  scaleTargetRef: {name: a}\n  maxReplicas: 3\n",
    )
    (autoscaler,) = load_autoscalers(no_metrics)
    assert autoscaler.hpa.metrics[0].target.average_utilization_pct == 80
    assert autoscaler.hpa.effective_min_replicas == 1
    v1 = _write(
        tmp_path,
        "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {name: b}\n"
        "spec:\n  scaleTargetRef: {name: a}\n  maxReplicas: 3\n  targetCPUUtilizationPercentage: 55\n",
        "v1.yaml",
    )
    assert load_autoscaler(v1).hpa.metrics[0].target.average_utilization_pct == 55


def test_tolerance_and_policies_are_read(tmp_path):
    text = (HPA % "5") + (
        "  behavior:\n"
        "    scaleUp:\n"
        "      tolerance: 50m\n"
        "      policies: [{type: Pods, value: 2, periodSeconds: 60}]\n"
        "    scaleDown:\n"
        "      selectPolicy: Disabled\n"
    )
    behavior = load_autoscaler(_write(tmp_path, text)).hpa.behavior
    assert behavior.scale_up.tolerance == 0.05
    assert behavior.scale_up.policies[0].period_seconds == 60
    assert behavior.scale_down.select_policy == "Disabled"


def test_several_autoscalers_need_a_name(tmp_path):
    path = _write(tmp_path, (HPA % "5") + "---\n" + (HPA % "7").replace("name: x", "name: y"))
    with pytest.raises(PlannerInputError, match="holds 2 autoscalers"):
        load_autoscaler(path)
    assert load_autoscaler(path, "y").hpa.metrics[0].target.average_value_milli == 7000


def test_a_real_cron_trigger_is_read_with_its_schedule(shared_dir):
    from planner.autoscaler.cron_scaler import CronMetadata

    path = shared_dir / "real-world" / "manifests-2" / "02-tazmainian-keda-queue-plus-cron-min0.yaml"
    (autoscaler,) = load_autoscalers(path)
    queue, schedule = autoscaler.scaled_object.triggers
    assert queue.cron is None
    assert schedule.cron == CronMetadata("0 8 * * MON-FRI", "0 18 * * MON-FRI", "Europe/Dublin", "10")
    assert (schedule.threshold, schedule.activation_threshold) == (1.0, 0.0)
    names = [metric.name for metric in autoscaler.hpa.metrics]
    assert names == ["s0-prometheus", "s1-cron-Europe-Dublin-08xxMON-FRI-018xxMON-FRI"]


def test_cron_metadata_keda_would_refuse_is_still_read(tmp_path):
    # The linter names what is wrong; the reader keeps the values as written (trimmed, "" when absent).
    path = tmp_path / "so.yaml"
    path.write_text(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: chat}\nspec:\n"
        "  scaleTargetRef: {name: chat}\n  triggers:\n  - type: cron\n"
        "    metadata: {start: ' 0 8 * * 7 ', end: 0 18 * * *, desiredReplicas: 'ten'}\n"
    )
    (autoscaler,) = load_autoscalers(path)
    metadata = autoscaler.scaled_object.triggers[0].cron
    assert (metadata.start, metadata.end, metadata.timezone, metadata.desired_replicas) == (
        "0 8 * * 7",
        "0 18 * * *",
        "",
        "ten",
    )
