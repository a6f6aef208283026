"""Regression tests for issue 20's linter defects: valid KEDA triggers refused, one unreadable document
stopping the run, placeholders missed, vLLM not recognised, unaggregated-query misfiring, and the rules
that were missing (underscore metric name, GPU memory, HPA beside a ScaledObject, a latency quantile under
AverageValue, a query that does not single out its target)."""

from __future__ import annotations

import textwrap

import pytest

from planner.manifests.lint import lint
from planner.readers.manifest import load_autoscaler
from planner.readers.workload import manifest_set_from_texts


def lint_texts(**texts: str):
    return lint(
        manifest_set_from_texts({f"{name}.yaml": textwrap.dedent(text) for name, text in texts.items()}, strict=False)
    )


def rules(findings) -> set[str]:
    return {finding.rule for finding in findings}


def scaled_object(trigger: str, *, target: str = "llama", minimum: int = 1) -> str:
    return textwrap.dedent("""\
        apiVersion: keda.sh/v1alpha1
        kind: ScaledObject
        metadata: {name: so, namespace: llm}
        spec:
          scaleTargetRef: {name: %s}
          minReplicaCount: %d
          maxReplicaCount: 4
          triggers:
        """) % (target, minimum) + textwrap.indent(textwrap.dedent(trigger), "    ")


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: llama, namespace: llm}
spec:
  template:
    spec:
      terminationGracePeriodSeconds: 600
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.19.1
          command: ["vllm", "serve"]
          args: ["m", "--served-model-name", "llama", "--max-model-len", "4096", "--shutdown-timeout", "226"]
          readinessProbe: {httpGet: {path: /health, port: 8000}}
"""


# --- 1. valid KEDA triggers are read by their own fields -------------------------------------------


VALID_TRIGGERS = {
    "external-no-threshold": """\
        - type: external
          metadata: {scalerAddress: "keda-otel-scaler.keda.svc:4318", metricQuery: "sum(x)", targetValue: "5"}
        """,
    "redis": """\
        - type: redis
          metadata: {address: "redis:6379", listName: jobs, listLength: "5"}
        """,
    "redis-default-length": """\
        - type: redis
          metadata: {address: "redis:6379", listName: jobs}
        """,
    "aws-sqs-queue": """\
        - type: aws-sqs-queue
          metadata: {queueURL: "https://sqs.us-east-1.amazonaws.com/1/q", queueLength: "10", awsRegion: us-east-1}
        """,
    "metrics-api": """\
        - type: metrics-api
          metadata: {url: "http://gateway/api/v1/stats", valueLocation: "queue.depth", targetValue: "8"}
        """,
    "datadog": """\
        - type: datadog
          metadata: {query: "sum:trace.http.request.hits{service:llm}.as_rate()", queryValue: "7"}
        """,
    "unknown-scaler": """\
        - type: my-company-scaler
          metadata: {anything: "goes"}
        """,
}


@pytest.mark.parametrize("name", sorted(VALID_TRIGGERS))
def test_a_valid_keda_trigger_is_never_refused(name):
    found = lint_texts(so=scaled_object(VALID_TRIGGERS[name]))
    assert "unreadable-document" not in rules(found), [f.why for f in found]


def test_scalers_are_read_by_their_own_target_field(tmp_path):
    expected = {"redis": 5.0, "redis-default-length": 5.0, "aws-sqs-queue": 10.0, "metrics-api": 8.0, "datadog": 7.0}
    for name, target in expected.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(scaled_object(VALID_TRIGGERS[name]))
        so = load_autoscaler(path).scaled_object  # the simulator's reader takes them too
        assert so.triggers[0].threshold == target, name


def test_a_prometheus_trigger_without_threshold_is_a_finding_with_its_line():
    text = scaled_object("""\
        - type: prometheus
          metadata: {query: "sum(vllm:num_requests_running{model_name='llama'})"}
        """)
    (finding,) = [f for f in lint_texts(so=text) if f.rule == "unreadable-document"]
    assert "metadata.threshold: required field is missing" in finding.why and finding.line == 10  # metadata


# --- 2. one unreadable document does not stop the run ----------------------------------------------


def test_a_broken_document_is_a_finding_and_the_others_are_reviewed():
    text = (
        DEPLOYMENT.replace("terminationGracePeriodSeconds: 600", "terminationGracePeriodSeconds: 60")
        + "---\nkind: [broken\n---\n"
        + scaled_object("""\
            - type: prometheus
              metadata: {query: "sum(vllm:num_requests_waiting{model_name='llama'})", threshold: "5"}
            """)
    )
    found = lint_texts(mixed=text)
    (broken,) = [f for f in found if f.rule == "unreadable-document"]
    start = text.splitlines().index("kind: [broken") + 1
    assert broken.document == 2 and start <= broken.line <= start + 1  # where YAML's parser stopped
    assert {"short-grace", "waiting-only-trigger", "ignore-null-values"} <= rules(found)


def test_a_document_that_is_not_an_object_is_a_finding():
    found = lint_texts(a="just a string\n", b=DEPLOYMENT)
    assert [(f.rule, f.file) for f in found] == [("unreadable-document", "a.yaml")]


# --- 3. placeholders ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ("image: vllm/vllm-openai:v0.19.1", "image: ${REGISTRY}/vllm-openai:v0.19.1", "${REGISTRY}"),
        ("image: vllm/vllm-openai:v0.19.1", "image: ECR_REPOSITORY_URL:v0.19.1", "ECR_REPOSITORY_URL"),
        (
            "readinessProbe:",
            "env:\n            - name: HF_TOKEN\n              value: ${HF_TOKEN}\n          readinessProbe:",
            "${HF_TOKEN}",
        ),
        ("readinessProbe:", "env: [{name: HF_TOKEN, value: $HF_TOKEN}]\n          readinessProbe:", "$HF_TOKEN"),
        (
            "      containers:",
            "      serviceAccountName: REPLACE_WITH_SERVICE_ACCOUNT\n      containers:",
            "REPLACE_WITH_SERVICE_ACCOUNT",
        ),
        (
            "      containers:",
            "      volumes: [{name: m, persistentVolumeClaim: {claimName: <your-pvc>}}]\n      containers:",
            "<your-pvc>",
        ),
        ("terminationGracePeriodSeconds: 600", "terminationGracePeriodSeconds: __GRACE_S__", "__GRACE_S__"),
    ],
)
def test_placeholders_are_found(old, new, named):
    found = lint_texts(d=DEPLOYMENT.replace(old, new))
    placeholder = [f for f in found if f.rule == "unsubstituted-placeholder"]
    assert placeholder and named in placeholder[0].why
    assert "schema-violation" not in rules(found)  # the placeholder is reported once, by its own rule


def test_kubernetes_env_expansion_and_shell_variables_are_not_placeholders():
    text = DEPLOYMENT.replace('args: ["m",', 'args: ["$(MODEL_ID)",').replace(
        "readinessProbe:", "env: [{name: MODEL_ID, value: m}]\n          readinessProbe:"
    )
    assert "unsubstituted-placeholder" not in rules(lint_texts(d=text))


def test_a_placeholder_minimum_is_read_as_unknown_not_refused():
    text = scaled_object("""\
        - type: prometheus
          metadata: {query: "sum(vllm:kv_cache_usage_perc{model_name='llama'})", threshold: "80"}
        """).replace("minReplicaCount: 1", "minReplicaCount: __KEDA_MIN_REPLICAS__")
    found = rules(lint_texts(so=text))
    assert {"unsubstituted-placeholder", "kv-threshold-out-of-range"} <= found
    assert not found & {"unreadable-document", "min-zero-pod-metric", "schema-violation"}


# --- 4. vLLM in an entrypoint script or a shell script ----------------------------------------------


ENTRYPOINT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: llama, namespace: llm}
spec:
  template:
    spec:
      containers:
        - name: server
          image: registry.example.com/llm/server:1.4
          env:
            - {name: VLLM_MODEL, value: meta-llama/Llama-3.1-8B-Instruct}
            - {name: VLLM_MAX_MODEL_LEN, value: "8192"}
            - {name: VLLM_MAX_NUM_SEQS, value: "16"}
"""
HPA_IN_FLIGHT = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llama, namespace: llm}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llama}
  minReplicas: 1
  maxReplicas: 4
  metrics:
    - type: Pods
      pods:
        metric: {name: vllm_num_requests_running}
        target: {type: AverageValue, averageValue: "16"}
"""


def test_vllm_configured_through_env_is_a_vllm_workload():
    found = lint_texts(d=ENTRYPOINT, hpa=HPA_IN_FLIGHT)
    assert "scale-target-not-found" not in rules(found)
    assert {"short-grace", "shutdown-timeout-vs-grace", "missing-readiness-probe"} <= rules(found)
    batch = [f for f in found if f.rule == "threshold-at-batch-limit"]
    assert batch and "16" in batch[0].why and "--max-num-seqs of Deployment llama" in batch[0].why


def test_a_client_of_vllm_is_not_vllm():
    client = (
        ENTRYPOINT.replace("VLLM_MODEL", "VLLM_BASE_URL")
        .replace("meta-llama/Llama-3.1-8B-Instruct", "http://vllm:8000")
        .replace(
            '            - {name: VLLM_MAX_MODEL_LEN, value: "8192"}\n            - {name: VLLM_MAX_NUM_SEQS, '
            'value: "16"}\n',
            "",
        )
    )
    assert lint_texts(d=client) == ()


@pytest.mark.parametrize("shell", ['["/bin/bash", "-lc"]', '["sh", "-c"]', '["bash", "-ec"]'])
def test_flags_inside_a_shell_script_are_read(shell):
    text = DEPLOYMENT.replace('command: ["vllm", "serve"]', f"command: {shell}").replace(
        'args: ["m", "--served-model-name", "llama", "--max-model-len", "4096", "--shutdown-timeout", "226"]',
        'args:\n            - |\n              exec vllm serve "$MODEL" --served-model-name llama \\\n'
        "                --max-num-seqs 1 --max-model-len 32768",
    )
    so = scaled_object("""\
        - type: prometheus
          metadata: {query: "sum(vllm:num_requests_running{model_name='llama'})", threshold: "2",
                     ignoreNullValues: "false"}
        """)
    found = lint_texts(d=text, so=so)
    grace = [f for f in found if f.rule == "short-grace"]
    assert grace and "32768" in grace[0].why  # 1638.4 s against 600 s
    batch = [f for f in found if f.rule == "threshold-at-batch-limit"]
    assert batch and batch[0].severity == "error" and "never runs more than 1 " in batch[0].why


# --- 5. unaggregated-query on a single-series gauge ------------------------------------------------


def test_unaggregated_query_only_on_a_per_pod_metric():
    gauge = scaled_object("""\
        - type: prometheus
          metricType: Value
          metadata: {query: 'llm_d_wva_desired_replicas{variant_name="llama"}', threshold: "1",
                     ignoreNullValues: "false"}
        """)
    assert "unaggregated-query" not in rules(lint_texts(so=gauge))
    per_pod = gauge.replace("llm_d_wva_desired_replicas", "vllm:num_requests_running")
    assert "unaggregated-query" in rules(lint_texts(so=per_pod))


# --- 6. the new rules, where they must stay silent ---------------------------------------------------


def test_underscore_name_is_only_checked_in_queries():
    hpa_name = rules(lint_texts(hpa=HPA_IN_FLIGHT))  # an adapter's metric name, not a query
    assert "underscore-metric-name" not in hpa_name
    labelled = scaled_object("""\
        - type: prometheus
          metricName: vllm_waiting
          metadata: {query: 'sum(vllm:num_requests_waiting{vllm_instance="a", model_name="llama"})', threshold: "5"}
        """)
    assert "underscore-metric-name" not in rules(lint_texts(so=labelled))


def test_kedas_own_hpa_is_not_a_second_autoscaler():
    so = scaled_object(VALID_TRIGGERS["redis"], target="llama")
    keda_hpa = """\
        apiVersion: autoscaling/v2
        kind: HorizontalPodAutoscaler
        metadata:
          name: keda-hpa-so
          namespace: llm
          labels: {scaledobject.keda.sh/name: so}
          ownerReferences: [{apiVersion: keda.sh/v1alpha1, kind: ScaledObject, name: so, uid: "1"}]
        spec:
          scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llama}
          minReplicas: 1
          maxReplicas: 4
          metrics:
            - type: External
              external:
                metric: {name: s0-redis-jobs, selector: {matchLabels: {scaledobject.keda.sh/name: so}}}
                target: {type: AverageValue, averageValue: "5"}
        """
    dump = "apiVersion: v1\nkind: List\nitems:\n" + textwrap.indent(
        "- " + textwrap.indent(so, "  ")[2:] + "- " + textwrap.indent(textwrap.dedent(keda_hpa), "  ")[2:], "  "
    )
    assert "hpa-and-scaledobject" not in rules(lint_texts(dump=dump))
    user_hpa = (
        textwrap.dedent(keda_hpa)
        .replace("keda-hpa-so", "my-hpa")
        .replace("  labels: {scaledobject.keda.sh/name: so}\n", "")
        .replace('  ownerReferences: [{apiVersion: keda.sh/v1alpha1, kind: ScaledObject, name: so, uid: "1"}]\n', "")
    )
    found = lint_texts(both=so + "---\n" + user_hpa)
    assert [f.document for f in found if f.rule == "hpa-and-scaledobject"] == [1, 2]


def test_a_list_dump_is_read_item_by_item():
    dump = "apiVersion: v1\nkind: List\nitems:\n" + textwrap.indent(
        "- " + textwrap.indent(scaled_object(VALID_TRIGGERS["redis"], target="worker"), "  ")[2:], "  "
    )
    found = lint_texts(dump=dump, d=DEPLOYMENT)
    (missing,) = [f for f in found if f.rule == "scale-target-not-found"]
    assert "'worker'" in missing.why and missing.line == 8  # the item's own scaleTargetRef


def test_latency_quantile_under_an_hpa_external_average_value():
    hpa = HPA_IN_FLIGHT.replace("- type: Pods\n      pods:", "- type: External\n      external:").replace(
        "vllm_num_requests_running", "vllm_ttft_p95_seconds"
    )
    assert "latency-quantile-averagevalue" in rules(lint_texts(hpa=hpa))
    assert "latency-quantile-averagevalue" not in rules(lint_texts(hpa=HPA_IN_FLIGHT))


# --- 7. a query that does not single out its target --------------------------------------------------


def in_flight(selector: str) -> str:
    return scaled_object(f"""\
        - type: prometheus
          metadata: {{query: 'sum(vllm:num_requests_running{selector}) + sum(vllm:num_requests_waiting{selector})',
                     threshold: "40", ignoreNullValues: "false"}}
        """)


OTHER_MODEL = DEPLOYMENT.replace("name: llama,", "name: coder,").replace('"llama"', '"coder"')


@pytest.mark.parametrize(
    ("selector", "others", "flagged"),
    [
        ("", "", True),  # sums every vLLM in the cluster
        ('{namespace="llm"}', "", False),  # the only vLLM workload in llm
        ('{namespace="llm"}', OTHER_MODEL, True),  # coder runs in llm too
        ('{model_name="llama"}', OTHER_MODEL, False),  # the served model name
        ('{model_name="coder"}', OTHER_MODEL, True),  # another team's model
        ('{pod=~"llama-.*"}', OTHER_MODEL, False),  # the target's pods
        ('{model_name=~".*"}', "", True),  # matches everything
    ],
)
def test_unscoped_query_with_the_target_known(selector, others, flagged):
    texts = {"so": in_flight(selector), "d": DEPLOYMENT}
    if others:
        texts["other"] = others
    assert ("unscoped-query" in rules(lint_texts(**texts))) is flagged


def test_unscoped_query_with_the_target_unknown():
    assert "unscoped-query" in rules(lint_texts(so=in_flight("")))
    assert "unscoped-query" not in rules(lint_texts(so=in_flight('{namespace="llm"}')))


# --- 8. a KServe InferenceService scaled by KEDA is reviewed through the ScaledObject KServe writes ----


KSERVE = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: qwen
  namespace: inference
  annotations: {serving.kserve.io/autoscalerClass: keda}
spec:
  predictor:
    minReplicas: 1
    maxReplicas: 4
    autoScaling:
      metrics:
        - type: External
          external:
            metric: {backend: prometheus, serverAddress: "http://prom:9090",
                     query: 'sum(vllm:num_requests_waiting{namespace="inference"})'}
            target: {type: Value, value: "4"}
    terminationGracePeriodSeconds: 600
    model:
      modelFormat: {name: huggingface}
      args: ["--model_name=qwen", "--max-model-len=4096", "--shutdown-timeout=226"]
"""


def test_kserve_autoscaling_metrics_are_reviewed():
    found = lint_texts(isvc=KSERVE)
    waiting = [f for f in found if f.rule == "waiting-only-trigger"]
    assert waiting and waiting[0].line == 13  # the metric in predictor.autoScaling
    assert "missing-readiness-probe" not in rules(found)  # KServe adds a TCP readiness probe
    cpu = KSERVE.replace(
        """        - type: External
          external:
            metric: {backend: prometheus, serverAddress: "http://prom:9090",
                     query: 'sum(vllm:num_requests_waiting{namespace="inference"})'}
            target: {type: Value, value: "4"}""",
        """        - type: Resource
          resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}""",
    )
    assert "cpu-trigger" in rules(lint_texts(isvc=cpu))
    assert rules(lint_texts(isvc=KSERVE.replace("keda}", "hpa}"))) == set()


def test_llm_inference_service_inherits_grace_and_probes_and_owns_its_deployment():
    llmisvc = """\
        apiVersion: serving.kserve.io/v1alpha2
        kind: LLMInferenceService
        metadata: {name: mixtral, namespace: default}
        spec:
          model: {uri: "hf://mistralai/Mixtral-8x7B-Instruct-v0.1", name: mistralai/Mixtral-8x7B-Instruct-v0.1}
          template:
            containers:
              - name: main
                image: vllm/vllm-openai:v0.19.1
                args: ["--tensor-parallel-size", "2"]
        """
    so = scaled_object(
        """\
        - type: prometheus
          metadata: {query: 'sum(vllm:num_requests_running{model_name="mistralai/Mixtral-8x7B-Instruct-v0.1"})',
                     threshold: "8", ignoreNullValues: "false"}
        """,
        target="mixtral-kserve",
    ).replace("namespace: llm", "namespace: default")
    assert lint_texts(llm=llmisvc, so=so) == ()


def test_a_placeholder_target_is_reported_once():
    found = rules(lint_texts(so=scaled_object(VALID_TRIGGERS["redis"], target='"${TARGET_DEPLOYMENT}"'), d=DEPLOYMENT))
    assert "unsubstituted-placeholder" in found and "scale-target-not-found" not in found
