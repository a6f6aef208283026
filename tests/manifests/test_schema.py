"""Schema checks: real manifests pass, introduced violations are reported with their path."""

from __future__ import annotations

import copy

import pytest
import yaml

from planner.manifests.schema import (
    KUBERNETES_VERSION,
    SchemaProblem,
    schema_errors,
    validate_manifest,
)


def _documents(path):
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def _real(shared_dir, name):
    return _documents(shared_dir / "real-world" / "manifests" / name)[0]


def test_every_real_kubernetes_and_keda_manifest_passes(shared_dir):
    checked = 0
    for path in sorted((shared_dir / "real-world" / "manifests").glob("*.yaml")):
        for number, document in enumerate(_documents(path)):
            problems = validate_manifest(document, source=f"{path.name} (document {number + 1})")
            assert schema_errors(document) == [], problems
            checked += all(p.checked for p in problems)
    assert checked >= 30  # all but the TriggerAuthentication and the KServe template


def test_kind_without_schema_is_not_checked_rather_than_valid(shared_dir):
    document = _real(shared_dir, "53-kserve-llmisvc-config-template-grace60-prestop.yaml")
    [problem] = validate_manifest(document, source="53.yaml")
    assert not problem.checked
    assert "not checked" in problem.message and "LLMInferenceServiceConfig" in problem.message
    assert schema_errors(document) == []


@pytest.mark.parametrize("document", [None, "text", [1, 2], {"kind": "Deployment"}, {"apiVersion": "v1"}])
def test_not_a_kubernetes_object_is_a_problem_not_a_crash(document):
    [problem] = validate_manifest(document, source="bad.yaml")
    assert problem.checked and problem.source == "bad.yaml"
    assert "Kubernetes object" in problem.message


def test_scaled_object_violations_are_reported_with_their_paths(shared_dir):
    document = copy.deepcopy(_real(shared_dir, "12-llmd-keda-decode-kv-cache-sum.yaml"))
    spec = document["spec"]
    spec["triggers"][0]["metadata"]["threshold"] = 0.8  # KEDA metadata values must be strings
    spec["triggers"][0]["metricTyp"] = "Value"  # misspelt field
    spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] = (
        7200  # above the API's one hour
    )
    spec["minReplicaCount"] = 20  # above maxReplicaCount 10: the CRD's CEL rule
    problems = {p.path: p for p in validate_manifest(document, source="so.yaml")}
    assert set(problems) == {
        "spec.triggers[0].metadata.threshold",
        "spec.triggers[0]",
        "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.stabilizationWindowSeconds",
        "spec.minReplicaCount",
    }
    assert "'metricTyp'" in problems["spec.triggers[0]"].message
    assert "string" in problems["spec.triggers[0].metadata.threshold"].message
    assert "3600" in str(
        problems["spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.stabilizationWindowSeconds"]
    )
    assert str(problems["spec.minReplicaCount"]).startswith("so.yaml: spec.minReplicaCount: ")


def test_scaled_object_without_triggers_fails(shared_dir):
    document = copy.deepcopy(_real(shared_dir, "22-llm-serving-keda-running-sum.yaml"))
    document["spec"]["triggers"] = []
    [problem] = schema_errors(document)
    assert problem.path == "spec.triggers"
    del document["spec"]["triggers"]
    [problem] = schema_errors(document)
    assert problem.path == "spec" and "'triggers' is required" in problem.message


def test_deployment_violations_are_reported_with_their_paths(shared_dir):
    document = copy.deepcopy(_real(shared_dir, "55-k8sexamples-vllm-deployment-no-grace.yaml"))
    pod = document["spec"]["template"]["spec"]
    pod["containers"][0]["args"] = "--model x"  # a string where the API wants a list
    pod["containers"][0]["lifecycle"] = {"preStop": {"sleep": {"seconds": "ten"}}}
    pod["terminationGracePeriodSecond"] = 30  # misspelt: silently dropped without strict checks
    del document["spec"]["selector"]
    paths = {p.path for p in schema_errors(document)}
    assert paths == {
        "spec",
        "spec.template.spec",
        "spec.template.spec.containers[0].args",
        "spec.template.spec.containers[0].lifecycle.preStop.sleep.seconds",
    }


def test_hpa_violation(shared_dir):
    document = copy.deepcopy(_real(shared_dir, "04-k8sexamples-hpa-running.yaml"))
    document["spec"]["metrics"][0]["type"] = 7
    problems = schema_errors(document)
    assert problems and all(p.path.startswith("spec.metrics[0]") for p in problems)


def test_partial_patch_skips_required_fields_but_not_types():
    patch = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vllm"},
        "spec": {"template": {"spec": {"terminationGracePeriodSeconds": 241, "containers": [{"name": "vllm"}]}}},
    }
    assert schema_errors(patch, partial=True) == []
    assert {p.path for p in schema_errors(patch)} == {"spec"}  # a full Deployment needs a selector
    patch["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "241"
    [problem] = schema_errors(patch, partial=True)
    assert problem.path == "spec.template.spec.terminationGracePeriodSeconds"


def test_version_and_str():
    assert KUBERNETES_VERSION.startswith("1.37")
    assert str(SchemaProblem("spec", "bad", source="f.yaml")) == "f.yaml: spec: bad"
    assert str(SchemaProblem("", "bad")) == "bad"


def test_schemas_load_without_network(monkeypatch, shared_dir):
    import socket

    from planner.manifests import schema

    def refuse(*args, **kwargs):
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    schema._validator.cache_clear()
    schema._keda_schema.cache_clear()
    for name in (
        "22-llm-serving-keda-running-sum.yaml",
        "55-k8sexamples-vllm-deployment-no-grace.yaml",
        "04-k8sexamples-hpa-running.yaml",
    ):
        assert schema_errors(_real(shared_dir, name)) == []
