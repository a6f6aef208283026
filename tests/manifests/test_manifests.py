"""Generated manifests: the numbers, the signals, the rules they must follow, and their schemas."""

from __future__ import annotations

import math
import re

import pytest

from planner.dynamics.grace import drain_time_s
from planner.errors import PlannerInputError
from planner.manifests.generate import ScalingPlan, format_threshold, generate_manifests
from planner.manifests.schema import schema_errors

PLAN = ScalingPlan(
    target_name="llama-vllm",
    concurrency_target=40,
    warmup_s=240,
    max_output_tokens=4096,
    itl_ms=50,
    max_replicas=12,
    min_replicas=2,
    kv_usage_target_frac=0.8,
    queue_threshold_requests=129,
    namespace="llm",
    model_name="llama",
    knee_concurrency=48,
    growth_frac=0.2,
)


def _replace(plan, **changes):
    from dataclasses import replace

    return replace(plan, **changes)


def test_scaled_object_carries_the_signals_thresholds_and_combination():
    result = generate_manifests(PLAN)
    spec = result.scaled_object.document["spec"]
    triggers = {t["name"]: t for t in spec["triggers"]}
    assert list(triggers) == ["inflight", "kv", "waiting"]
    inflight = triggers["inflight"]["metadata"]["query"]
    assert inflight == (
        'sum(vllm:num_requests_running{namespace="llm",model_name="llama"}) + '
        'sum(vllm:num_requests_waiting{namespace="llm",model_name="llama"})'
    )
    assert triggers["kv"]["metadata"]["query"] == 'sum(vllm:kv_cache_usage_perc{namespace="llm",model_name="llama"})'
    assert [t["metadata"]["threshold"] for t in spec["triggers"]] == ["40", "0.8", "129"]
    for trigger in spec["triggers"]:
        assert trigger["metricType"] == "AverageValue"
        assert trigger["metadata"]["ignoreNullValues"] == "false"
        assert "avg(" not in trigger["metadata"]["query"]
    assert spec["advanced"]["scalingModifiers"] == {
        "formula": "max(inflight / 40, kv / 0.8, waiting / 129)",
        "target": "1",
        "metricType": "AverageValue",
    }
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (2, 12)


def test_single_signal_needs_no_formula():
    result = generate_manifests(_replace(PLAN, kv_usage_target_frac=None, queue_threshold_requests=None))
    spec = result.scaled_object.document["spec"]
    assert result.formula == "" and "scalingModifiers" not in spec["advanced"]
    assert [t["name"] for t in spec["triggers"]] == ["inflight"]


def test_behavior_window_covers_the_warmup_and_removes_one_replica_per_warmup():
    for warmup_s, window_s, period_s in ((240, 300, 240), (90, 300, 90), (900.5, 901, 901), (3600, 3600, 1800)):
        result = generate_manifests(_replace(PLAN, warmup_s=warmup_s))
        behavior = result.scaled_object.document["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
        down = behavior["scaleDown"]
        assert down["stabilizationWindowSeconds"] == window_s >= warmup_s
        assert down["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": period_s}]
        assert result.hpa.document["spec"]["behavior"] == behavior
    with pytest.raises(PlannerInputError, match="warmup_s 4000"):
        generate_manifests(_replace(PLAN, warmup_s=4000))


def test_grace_patch_nests_the_three_numbers():
    result = generate_manifests(PLAN)
    drain = drain_time_s(4096, 50)
    assert result.grace.drain_time_s == pytest.approx(204.8)
    assert result.grace.shutdown_timeout_s == math.ceil(drain * 1.1) == 226
    assert result.grace.termination_grace_period_s == 10 + 226 + 5
    assert result.shutdown_flag == "--shutdown-timeout=226"
    pod = result.workload_patch.document["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 241 > result.grace.shutdown_timeout_s >= drain
    assert pod["containers"][0]["lifecycle"]["preStop"] == {"sleep": {"seconds": 10}}
    assert "--shutdown-timeout=226" in result.workload_patch.header


def test_hpa_uses_external_average_value_metrics_with_the_same_targets():
    result = generate_manifests(PLAN)
    metrics = result.hpa.document["spec"]["metrics"]
    assert [m["type"] for m in metrics] == ["External"] * 3
    assert [m["external"]["target"] for m in metrics] == [
        {"type": "AverageValue", "averageValue": v} for v in ("40", "0.8", "129")
    ]
    rules = result.adapter_rules.document["externalRules"]
    assert [r["name"]["as"] for r in rules] == [m["external"]["metric"]["name"] for m in metrics]
    assert [r["metricsQuery"] for r in rules] == [
        t["metadata"]["query"] for t in result.scaled_object.document["spec"]["triggers"]
    ]


def test_every_generated_object_passes_its_schema():
    for plan in (
        PLAN,
        _replace(PLAN, namespace="", model_name="", kv_usage_target_frac=None),
        _replace(PLAN, target_kind="StatefulSet", scale_up_tolerance_frac=None),
    ):
        result = generate_manifests(plan)
        for manifest in result.all:
            if manifest.is_kubernetes_object:
                assert schema_errors(manifest.document, partial=manifest.is_patch) == [], manifest.file_stem


def test_comments_give_reasons_with_the_numbers():
    result = generate_manifests(PLAN)
    comments = dict(result.scaled_object.comments)
    assert comments[("spec", "triggers", 0, "metadata", "threshold")].startswith(
        "40 = knee 48 / (1 + 0.2 growth during one warmup)"
    )
    behavior = ("spec", "advanced", "horizontalPodAutoscalerConfig", "behavior")
    assert "240 s warmup" in comments[(*behavior, "scaleDown", "stabilizationWindowSeconds")]
    patch = dict(result.workload_patch.comments)
    assert patch[("spec", "template", "spec", "terminationGracePeriodSeconds")].startswith(
        "241 s = preStop 10 s + --shutdown-timeout 226 s"
    )
    for manifest in result.all:  # every comment points at a field that exists
        for path, _ in manifest.comments:
            node = manifest.document
            for part in path:
                node = node[part]


@pytest.mark.parametrize(
    ("value", "text"),
    [(40.0, "40"), (0.8, "0.8"), (53.33333, "53.333"), (129.9999, "129.999"), (1e-3, "0.001"), (100, "100")],
)
def test_format_threshold_rounds_down_to_milli_units(value, text):
    assert format_threshold(value) == text
    assert float(text) <= value


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"min_replicas": 0}, "min_replicas must be at least 1"),
        ({"max_replicas": 1}, "max_replicas 1 is below min_replicas 2"),
        ({"concurrency_target": 0}, "concurrency_target"),
        ({"kv_usage_target_frac": 1.5}, "kv_usage_target_frac"),
        ({"queue_threshold_requests": -1}, "queue_threshold_requests"),
        ({"target_name": ""}, "target name"),
        ({"target_kind": "Job"}, "Deployment or StatefulSet"),
        ({"prometheus_address": "prometheus:9090"}, "http://"),
        ({"model_name": 'x"y'}, "cannot be written into a PromQL matcher"),
        ({"concurrency_target": 1e-4}, "rounds to 0"),
    ],
)
def test_bad_plans_are_refused_with_the_field(changes, message):
    with pytest.raises(PlannerInputError, match=re.escape(message)):
        generate_manifests(_replace(PLAN, **changes))


# --- controller semantics in the comments, and version-aware tolerance (issue 20, items 3 and 4) ---------


def _comments(manifest) -> dict:
    return {".".join(map(str, path)): text for path, text in manifest.comments}


def test_comments_state_what_the_controllers_do():
    from planner.manifests.generate import POLLING_INTERVAL_S as DEFAULT_POLLING_INTERVAL_S

    single = generate_manifests(_replace(PLAN, kv_usage_target_frac=None, queue_threshold_requests=None))
    several = generate_manifests(PLAN)
    for result in (single, several):
        text = " ".join(_comments(result.scaled_object).values()) + " ".join(_comments(result.hpa).values())
        assert "Ready pods" not in text and "fresh value for each" not in text and "divides the fleet" not in text
        polling = _comments(result.scaled_object)["spec.pollingInterval"]
        assert "activation (0 <-> 1)" in polling and "metrics cache" in polling and "useCachedMetrics" in polling
    metric_type = _comments(single.scaled_object)["spec.triggers.0.metricType"]
    assert "ceil(fleet sum / threshold)" in metric_type and "whatever the pod count" in metric_type
    # With scalingModifiers the HPA reads only the composite metric: the triggers' metricType is not used.
    for index in range(3):
        assert _comments(several.scaled_object)[f"spec.triggers.{index}.metricType"].startswith("not used")
    assert "composite" in _comments(several.scaled_object)["spec.advanced.scalingModifiers.metricType"]
    assert DEFAULT_POLLING_INTERVAL_S == 15
    import planner.manifests.generate as module

    assert "Ready pods once" not in module.__doc__ and "one fresh value per HPA sync" not in module.__doc__


def _tolerances(result):
    behaviors = (
        result.hpa.document["spec"]["behavior"],
        result.scaled_object.document["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"],
    )
    return tuple(b["scaleUp"].get("tolerance") for b in behaviors)


def test_tolerance_is_written_only_where_the_cluster_keeps_it():
    from planner.autoscaler.versions import ClusterVersions, Version

    assert _tolerances(generate_manifests(PLAN)) == ("0", "0")  # defaults: Kubernetes 1.37, KEDA 2.20
    assert generate_manifests(PLAN).notes == ()
    old_keda = generate_manifests(PLAN, ClusterVersions(Version(1, 37), Version(2, 17)))
    assert _tolerances(old_keda) == ("0", None)
    (note,) = old_keda.notes
    assert note.startswith("scaledobject.yaml leaves behavior.scaleUp.tolerance out") and "KEDA 2.17" in note
    old_k8s = generate_manifests(PLAN, ClusterVersions(Version(1, 34), Version(2, 20)))
    assert _tolerances(old_k8s) == (None, None) and len(old_k8s.notes) == 2
    comment = _comments(old_k8s.hpa)["spec.behavior.scaleUp.selectPolicy"]
    assert "no tolerance written" in comment and "HPAConfigurableTolerance" in comment and "10 %" in comment
    # --scale-up-tolerance cluster: nothing to drop, nothing said.
    assert generate_manifests(_replace(PLAN, scale_up_tolerance_frac=None), ClusterVersions(Version(1, 34))).notes == ()


def test_min_zero_refusal_and_comment_name_the_1_37_hpa_scale_to_zero():
    with pytest.raises(PlannerInputError, match=r"beta from Kubernetes 1\.37"):
        generate_manifests(_replace(PLAN, min_replicas=0))
    assert "Kubernetes 1.37" in _comments(generate_manifests(PLAN).hpa)["spec.minReplicas"]


# --------------------------------------------------------------------------- selectors (issue 20)


def test_the_teams_own_matchers_are_kept_in_every_query():
    from planner.manifests.generate import query_matchers

    team = query_matchers('sum(vllm:num_requests_waiting{model_name="chat"})')
    plan = _replace(PLAN, namespace="llm", model_name="", label_matchers=team)
    result = generate_manifests(plan)
    queries = [t["metadata"]["query"] for t in result.scaled_object.document["spec"]["triggers"]]
    assert all('{model_name="chat",namespace="llm"}' in q for q in queries), queries
    assert [r["metricsQuery"] for r in result.adapter_rules.document["externalRules"]] == queries


def test_a_given_matcher_wins_over_the_flag_for_the_same_label():
    plan = _replace(
        PLAN, namespace="", model_name="meta-llama/Llama-3.1-8B-Instruct", label_matchers=('model_name="chat"',)
    )
    query = generate_manifests(plan).scaled_object.document["spec"]["triggers"][0]["metadata"]["query"]
    assert 'model_name="chat"' in query and "meta-llama" not in query


def test_query_matchers_read_every_operator_and_skip_non_vllm_selectors():
    from planner.manifests.generate import query_matchers

    query = (
        'sum(vllm:num_requests_running{namespace="llm", pod=~"chat-.*"}) + '
        'sum(vllm:num_requests_waiting{model_name!="x"}) + sum(up{job="other"})'
    )
    assert query_matchers(query) == ('namespace="llm"', 'pod=~"chat-.*"', 'model_name!="x"')


def test_workload_matchers_name_the_namespace_and_the_served_model():
    from planner.manifests.generate import pod_matcher, workload_matchers

    assert workload_matchers("llm", {"--served-model-name": "chat fast", "--model": "m"}) == (
        'namespace="llm"',
        'model_name="chat"',
    )
    assert workload_matchers("", {"--model": "meta-llama/Llama-3.1-8B-Instruct"}) == (
        'model_name="meta-llama/Llama-3.1-8B-Instruct"',
    )
    assert workload_matchers("", {"--model": "{{ .Values.model }}"}) == ()  # a template is not a name
    assert pod_matcher("StatefulSet", "chat") == 'pod=~"chat-[0-9]+"'


def test_a_bad_matcher_is_refused_with_the_field():
    with pytest.raises(PlannerInputError, match="label matcher 'model_name=chat'"):
        generate_manifests(_replace(PLAN, label_matchers=("model_name=chat",)))


def test_a_chosen_scale_down_window_is_written_with_its_reason():
    result = generate_manifests(_replace(PLAN, scale_down_window_s=1800))
    behavior = result.scaled_object.document["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 1800 == result.scale_down_window_s
    assert any("as chosen for this traffic" in text for _, text in result.scaled_object.comments)
    with pytest.raises(PlannerInputError, match="scale_down_window_s"):
        generate_manifests(_replace(PLAN, scale_down_window_s=4000))


# --- cron windows ---------------------------------------------------------------------------------

WEEKDAYS = ("0 8 * * MON-FRI", "0 18 * * MON-FRI", "Europe/Dublin", 6)
WEEKEND = ("0 10 * * SAT,SUN", "0 16 * * SAT,SUN", "Europe/Dublin", 3)


def _lint_generated(result):
    from planner.manifests.lint import lint
    from planner.manifests.writer import dump_manifest
    from planner.readers.workload import manifest_set_from_texts

    texts = {"scaledobject.yaml": dump_manifest(result.scaled_object)}
    return lint(manifest_set_from_texts(texts))


@pytest.mark.parametrize("plan", [PLAN, _replace(PLAN, kv_usage_target_frac=None, queue_threshold_requests=None)])
def test_cron_windows_become_cron_triggers_schema_valid_and_lint_clean(plan):
    from planner.autoscaler.cron_scaler import CronMetadata
    from planner.manifests.generate import CronWindow

    result = generate_manifests(_replace(plan, cron_windows=(CronWindow(*WEEKDAYS), WEEKEND)))
    triggers = result.scaled_object.document["spec"]["triggers"]
    crons = [t for t in triggers if t["type"] == "cron"]
    assert triggers[-2:] == crons and [t["name"] for t in crons] == ["cron_0", "cron_1"]
    assert crons[0]["metadata"] == {
        "timezone": "Europe/Dublin",
        "start": "0 8 * * MON-FRI",
        "end": "0 18 * * MON-FRI",
        "desiredReplicas": "6",
    }
    assert schema_errors(result.scaled_object.document) == []
    assert [
        (f.rule, f.why) for f in _lint_generated(result) if f.severity == "error" or f.rule.startswith("cron")
    ] == []
    # The triggers read back as the simulator and KEDA take them.
    from planner.readers.manifest import autoscaler_from_document

    so = autoscaler_from_document("scaledobject.yaml", result.scaled_object.document).scaled_object
    assert [t.cron for t in so.triggers if t.type == "cron"] == [
        CronMetadata("0 8 * * MON-FRI", "0 18 * * MON-FRI", "Europe/Dublin", "6"),
        CronMetadata("0 10 * * SAT,SUN", "0 16 * * SAT,SUN", "Europe/Dublin", "3"),
    ]
    formula = result.scaled_object.document["spec"]["advanced"].get("scalingModifiers", {}).get("formula", "")
    if plan.kv_usage_target_frac is not None:
        assert formula.endswith(", cron_0, cron_1)")  # the floors join the max() in replicas
    else:
        assert formula == ""  # one metric trigger: the HPA's max over metrics already takes the floor
    assert any("hpa.yaml leaves the cron windows out" in note for note in result.notes)
    assert not any(m["external"]["metric"]["name"].startswith("cron") for m in result.hpa.document["spec"]["metrics"])


def test_a_generated_cron_floor_holds_in_the_simulator():
    # The written ScaledObject, read back and run for a Monday morning with no load: 6 replicas from 08:00.
    import numpy as np

    from planner.readers.manifest import autoscaler_from_document
    from planner.simulate import simulate
    from planner.simulate.fleet import FleetSpec
    from planner.simulate.traffic import RequestTrace

    plan = _replace(PLAN, cron_windows=(WEEKDAYS,))
    autoscaler = autoscaler_from_document("so.yaml", generate_manifests(plan).scaled_object.document)
    trace = RequestTrace(np.arange(0.0, 3 * 3600.0, 600.0), np.full(18, 100), np.full(18, 50))
    fleet = FleetSpec(tick_s=15.0, start_epoch_s=FleetSpec().start_epoch_s + 6 * 3600)
    outcome = simulate(trace, autoscaler, fleet, duration_s=3 * 3600.0)
    assert outcome.events[0] == (2 * 3600.0, 2, 6)


@pytest.mark.parametrize(
    ("windows", "message"),
    [
        ([("0 8 * * MON-FRI", "0 18 * * MON-FRI", "Europe/Dublin", 20)], "is above max_replicas 12"),
        ([("0 8 * * MON-FRI", "0 18 * * MON-FRI", "Europe/Dublin", 0)], "must be a whole number >= 1"),
        ([("0 8 * * 1-7", "0 18 * * MON-FRI", "UTC", 4)], "start: error parsing start schedule"),
        ([("0 8 * * *", "0 8 * * *", "UTC", 4)], "start and end can not have exactly same time input"),
        ([("0 8 * * *", "0 18 * * *", "Europe/Dublyn", 4)], "unknown time zone Europe/Dublyn"),
        ([("0 8 * * *", "0 18 * * *", "Local", 4)], "the KEDA operator's own zone"),
        ([WEEKDAYS, ("0 12 * * *", "0 14 * * *", "UTC", 8)], "overlaps cron window 0 with different desired_replicas"),
    ],
)
def test_cron_windows_lint_would_flag_are_refused(windows, message):
    with pytest.raises(PlannerInputError, match=re.escape(message)):
        generate_manifests(_replace(PLAN, cron_windows=tuple(windows)))


# --- forecast triggers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method", ["seasonal_naive", "predict_linear", "max_over_time", "double_exponential_smoothing"]
)
def test_a_forecast_becomes_a_trigger_in_the_formula_schema_valid_and_lint_clean(method):
    from planner.manifests.lint import LintSettings, lint
    from planner.manifests.writer import dump_manifest
    from planner.readers.workload import manifest_set_from_texts
    from planner.simulate.metrics import parse_query
    from planner.vllm.forecast import Forecast, forecast_query

    forecast = Forecast(method, lead_s=240, ahead_s=240)
    result = generate_manifests(_replace(PLAN, forecast=forecast, label_matchers=('model_name="chat"',)))
    triggers = result.scaled_object.document["spec"]["triggers"]
    trigger = next(t for t in triggers if t["name"] == "forecast")
    match = '{model_name="chat",namespace="llm"}'
    assert trigger["metadata"]["query"] == forecast_query(forecast, "in_flight", match)
    assert trigger["metadata"]["threshold"] == triggers[0]["metadata"]["threshold"]  # the in-flight target
    assert "forecast / " + trigger["metadata"]["threshold"] in result.formula
    assert "vllm_requests_in_flight_forecast" in [
        m["external"]["metric"]["name"] for m in result.hpa.document["spec"]["metrics"]
    ]
    for manifest in result.all:
        if manifest.is_kubernetes_object:
            assert schema_errors(manifest.document, partial=manifest.is_patch) == [], manifest.file_stem
    texts = {"scaledobject.yaml": dump_manifest(result.scaled_object), "hpa-alone/hpa.yaml": dump_manifest(result.hpa)}
    findings = lint(manifest_set_from_texts(texts), LintSettings(warmup_s=240, max_tokens=4096, itl_ms=50))
    assert [(f.rule, f.path) for f in findings] == []  # no rule misfires on offsets, subqueries or or vector(0)
    parse_query(trigger["metadata"]["query"])  # and the simulator reads it
    experimental = [note for note in result.notes if "promql-experimental-functions" in note]
    assert bool(experimental) == (method == "double_exponential_smoothing")


def test_prometheus_2_gets_holt_winters_and_a_bad_major_is_refused():
    from planner.vllm.forecast import Forecast

    result = generate_manifests(_replace(PLAN, forecast=Forecast("double_exponential_smoothing"), prometheus_major=2))
    query = next(t for t in result.scaled_object.document["spec"]["triggers"] if t["name"] == "forecast")
    assert query["metadata"]["query"].startswith("holt_winters(")
    assert any("renamed double_exponential_smoothing" in note for note in result.notes)
    with pytest.raises(PlannerInputError, match="prometheus_major"):
        generate_manifests(_replace(PLAN, prometheus_major=4))
    with pytest.raises(PlannerInputError, match="forecast"):
        generate_manifests(_replace(PLAN, forecast="predict_linear"))


def test_forecast_triggers_name_only_metrics_a_real_scrape_exports(shared_dir):
    from planner.manifests.lint import LintSettings, lint
    from planner.manifests.writer import dump_manifest
    from planner.readers.metrics import read_metrics_scrape
    from planner.readers.workload import manifest_set_from_texts
    from planner.vllm.forecast import FORECAST_METHODS, Forecast

    scrape = read_metrics_scrape(shared_dir / "real-world" / "metrics" / "vllm-v1-qwen1.5-0.5b-chat-idle.txt")
    settings = LintSettings(warmup_s=300, max_tokens=4096, itl_ms=50, exported_metrics=scrape.exported)
    for method in FORECAST_METHODS:
        for major in (2, 3):
            plan = _replace(PLAN, forecast=Forecast(method, lead_s=300, ahead_s=300), prometheus_major=major)
            texts = {"scaledobject.yaml": dump_manifest(generate_manifests(plan).scaled_object)}
            assert [(f.rule, f.path) for f in lint(manifest_set_from_texts(texts), settings)] == [], (method, major)
