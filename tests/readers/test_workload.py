"""Tests for planner.readers.workload: vLLM flags from every way a container starts the server,
grace, preStop, probes, GPUs, line numbers, pairing, and input that cannot be read."""

from __future__ import annotations

import textwrap

import pytest

from planner.errors import PlannerInputError
from planner.readers.workload import (
    find_scale_target,
    format_path,
    load_documents,
    parse_server_args,
    read_manifest_set,
    workload_from_document,
)


def write(tmp_path, text, name="m.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def only_server(tmp_path, text):
    (document,) = load_documents(write(tmp_path, text))
    (workload,) = workload_from_document(document)
    (server,) = workload.servers
    return workload, server


POD = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: llama, namespace: llm}}
spec:
  template:
    spec:
{grace}      containers:
        - name: sidecar
          image: envoyproxy/envoy:v1.31.0
        - name: vllm
          image: {image}
{body}
"""


def deployment(body, image="vllm/vllm-openai:v0.19.1", grace=""):
    return POD.format(image=image, grace=grace, body=textwrap.indent(textwrap.dedent(body), " " * 10))


def test_flags_from_command_and_args_lists(tmp_path):
    _, server = only_server(
        tmp_path,
        deployment("""\
        command: ["vllm", "serve"]
        args: ["Qwen/Qwen3-8B", "--max-num-seqs", "96", "--max_model_len=32768", "-tp", "2",
               "--shutdown-timeout=120", "--enable-prefix-caching"]
        """),
    )
    assert (server.max_num_seqs, server.max_model_len, server.tensor_parallel_size) == (96, 32768, 2)
    assert server.shutdown_timeout_s == 120 and server.flags["--enable-prefix-caching"] is None
    assert server.container == "vllm" and server.path == ("spec", "template", "spec", "containers", 1)


def test_flags_from_python_module_and_abbreviated_flag(tmp_path):
    # argparse accepts a unique prefix: the gateway project's "--max-num-seq 1024" sets --max-num-seqs.
    _, server = only_server(
        tmp_path,
        deployment("""\
        command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]
        args: ["--model", "m", "--max-num-seq", "1024"]
        """),
    )
    assert server.max_num_seqs == 1024 and "-m" not in server.flags


def test_flags_from_a_shell_string(tmp_path):
    _, server = only_server(
        tmp_path,
        deployment(
            """\
        command: ["/bin/bash", "-c"]
        args:
          - |
            # warm the cache first; --max-num-seqs 999 in a comment is not a flag
            python3 /warm.py && exec vllm serve /models/llama \\
              --max-num-seqs 48 \\
              --max-model-len=8192 --shutdown-timeout "{{ .Timeout }}"
        """,
            image="ghcr.io/example/llm-runtime:1.2",
        ),
    )
    assert server.max_num_seqs == 48 and server.max_model_len == 8192
    assert server.flags["--shutdown-timeout"] == "{{ .Timeout }}" and server.shutdown_timeout_s is None


def test_image_alone_marks_the_server_and_other_containers_are_skipped(tmp_path):
    workload, server = only_server(tmp_path, deployment('args: ["--model", "m", "--max-num-seqs", "8"]'))
    assert server.image == "vllm/vllm-openai:v0.19.1" and server.max_num_seqs == 8
    assert workload.kind == "Deployment" and workload.namespace == "llm"


@pytest.mark.parametrize(("resource", "count"), [("nvidia.com/gpu", 4), ("amd.com/gpu", 1), ("gpu.intel.com/i915", 2)])
def test_gpus_of_each_vendor(tmp_path, resource, count):
    _, server = only_server(
        tmp_path,
        deployment(f"""\
        args: ["--model", "m"]
        resources:
          requests: {{"{resource}": "{count}"}}
        """),
    )
    assert (server.gpus, server.gpu_resource) == (count, resource)


def test_grace_unset_is_recorded_as_none_and_set_as_written(tmp_path):
    workload, _ = only_server(tmp_path, deployment('args: ["--model", "m"]'))
    assert workload.termination_grace_period_s is None
    workload, _ = only_server(
        tmp_path, deployment('args: ["--model", "m"]', grace="      terminationGracePeriodSeconds: 240\n")
    )
    assert workload.termination_grace_period_s == 240


@pytest.mark.parametrize(
    ("hook", "action", "sleep_s", "drains"),
    [
        ("sleep: {seconds: 20}", "sleep", 20.0, False),
        ('exec: {command: ["/bin/sleep", "15"]}', "exec", 15.0, False),
        ('exec: {command: ["sh", "-c", "sleep 10"]}', "exec", 10.0, False),
        (
            'exec: {command: ["sh", "-c", "while curl -s localhost:8000/metrics | grep -q num_requests_running; '
            'do sleep 5; done"]}',
            "exec",
            None,
            True,
        ),
        ("httpGet: {path: /drain, port: 8000}", "httpGet", None, False),
    ],
)
def test_prestop_hooks(tmp_path, hook, action, sleep_s, drains):
    _, server = only_server(
        tmp_path,
        deployment(f"""\
        args: ["--model", "m"]
        lifecycle:
          preStop:
            {hook}
        """),
    )
    assert (server.pre_stop.action, server.pre_stop.sleep_s, server.pre_stop.drains) == (action, sleep_s, drains)


def test_probes_and_their_budget(tmp_path):
    _, server = only_server(
        tmp_path,
        deployment("""\
        args: ["--model", "m"]
        readinessProbe: {httpGet: {path: /health, port: 8000}, periodSeconds: 5}
        startupProbe: {httpGet: {path: /health, port: 8000}, initialDelaySeconds: 15, periodSeconds: 30,
                       failureThreshold: 120}
        """),
    )
    assert server.readiness_probe.action == "httpGet" and server.readiness_probe.period_s == 5
    assert server.startup_probe.budget_s == 15 + 30 * 120 and server.liveness_probe is None


def test_line_numbers_and_paths(tmp_path):
    path = write(
        tmp_path,
        """\
        # a comment
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: a}
        ---
        apiVersion: keda.sh/v1alpha1
        kind: ScaledObject
        metadata:
          name: b
        spec:
          triggers:
            - type: prometheus
              metadata:
                query: sum(x)
        """,
    )
    first, second = load_documents(path)
    assert (first.number, second.number) == (1, 2)
    assert second.line(("spec", "triggers", 0, "metadata", "query")) == 14
    assert second.line(("spec", "triggers", 0, "metadata", "missing")) == 13  # nearest ancestor
    assert format_path(("spec", "triggers", 0, "metadata", "query")) == "spec.triggers[0].metadata.query"


def test_helm_rendered_output_keeps_each_template(tmp_path):
    path = write(
        tmp_path,
        """\
        ---
        # Source: chart/templates/service.yaml
        apiVersion: v1
        kind: Service
        metadata: {name: llama}
        ---
        ---
        # Source: chart/templates/deployment.yaml
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: llama}
        spec: {template: {spec: {containers: [{name: s, image: vllm/vllm-openai:v0.19.1}]}}}
        """,
    )
    documents = load_documents(path)
    assert [d.template for d in documents] == ["chart/templates/service.yaml", "chart/templates/deployment.yaml"]
    assert [d.number for d in documents] == [1, 3]


def test_pairs_each_autoscaler_with_its_target(shared_dir):
    manifests = read_manifest_set([shared_dir / "real-world" / "manifests"])
    pairs = {
        autoscaler.name: find_scale_target(autoscaler, document, manifests.workloads)
        for document, autoscaler in manifests.autoscalers
    }
    assert pairs["gemma-server-hpa"].name == "vllm-gemma-deployment"
    assert pairs["gemma-server-hpa"].servers[0].max_num_seqs == 64
    assert pairs["optimized-baseline-nvidia-gpu-vllm-decode"].servers[0].tensor_parallel_size == 2
    assert pairs["lws-hpa"] is None  # its LeaderWorkerSet is not in the corpus


def test_reads_the_six_model_servers_of_the_corpus(shared_dir):
    manifests = read_manifest_set([shared_dir / "real-world" / "manifests"])
    by_name = {w.name: w for w in manifests.workloads}
    assert len(by_name) == 6
    gie = by_name["vllm-qwen3-32b"]
    assert gie.termination_grace_period_s == 130 and gie.servers[0].pre_stop.sleep_s == 30
    assert gie.servers[0].max_num_seqs == 1024 and gie.servers[0].max_model_len == 16000
    kserve = by_name["kserve-config-llm-template"].servers[0]
    assert kserve.flags["--shutdown-timeout"].startswith("{{ shutdownTimeout") and kserve.pre_stop.sleep_s == 15
    assert by_name["deepseek-llm-7b-chat"].servers[0].pre_stop.drains
    assert by_name["optimized-baseline-nvidia-gpu-vllm-decode"].termination_grace_period_s is None
    assert by_name["vllm-gemma-deployment"].servers[0].readiness_probe is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("key: [unclosed\n", "not valid YAML in document 1 at line"),
        ("- just\n- a list\n", "(document 1): not a Kubernetes object"),
        ("apiVersion: v1\nkind: ConfigMap\n---\nname: no-kind\n", "(document 2): not a Kubernetes object"),
        (
            "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: x}\nspec:\n  scaleTargetRef: "
            "{name: x}\n",
            "(document 1): spec.triggers: at least one trigger is required",
        ),
        (
            "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: x}\nspec:\n  scaleTargetRef: "
            "{name: x}\n"
            "  advanced:\n    scalingModifiers:\n      formula: \"__import__('os').system('id')\"\n      target: '1'\n"
            "  triggers:\n    - {type: prometheus, name: a, metadata: {query: sum(x), threshold: '1'}}\n",
            "(document 1): spec.advanced.scalingModifiers.formula",
        ),
        ("", "no YAML documents"),
    ],
)
def test_unreadable_input_names_file_and_document(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PlannerInputError) as error:
        read_manifest_set([path])
    assert str(path) in str(error.value) and message in str(error.value)
    assert "\n" not in str(error.value)


def test_binary_file_and_empty_folder(tmp_path):
    binary = tmp_path / "weights.yaml"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    with pytest.raises(PlannerInputError, match=r"weights\.yaml"):
        read_manifest_set([binary])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PlannerInputError, match=r"no \.yaml or \.yml files"):
        read_manifest_set([empty])


def test_parse_server_args_doctest_case():
    assert parse_server_args(["serve", "m", "--port", "8000", "--x"]) == {"--port": "8000", "--x": None}


def test_yaml_error_names_the_document(tmp_path):
    path = write(tmp_path, "apiVersion: v1\nkind: ConfigMap\n---\n# second\napiVersion: v1\nkind: [broken\n")
    with pytest.raises(PlannerInputError, match=r"not valid YAML in document 2 at line"):
        load_documents(path)


def test_command_given_as_a_string_is_one_word(tmp_path):
    _, server = only_server(tmp_path, deployment('command: "vllm"\nargs: ["serve", "m", "--max-num-seqs", "16"]'))
    assert server.max_num_seqs == 16


def test_kserve_inference_service_predictor_model(tmp_path):
    path = write(
        tmp_path,
        """\
        apiVersion: serving.kserve.io/v1beta1
        kind: InferenceService
        metadata: {name: opt-125m}
        spec:
          predictor:
            minReplicas: 1
            model:
              modelFormat: {name: huggingface}
              args: ["--model_name=opt-125m", "--model_id=facebook/opt-125m", "--max-model-len=2048"]
              resources: {limits: {nvidia.com/gpu: "1"}}
        """,
    )
    (document,) = load_documents(path)
    (workload,) = workload_from_document(document)
    (server,) = workload.servers
    assert workload.kind == "InferenceService" and workload.termination_grace_period_s is None
    assert server.path == ("spec", "predictor", "model") and server.max_model_len == 2048 and server.gpus == 1


def test_kserve_predictor_deployment_pairs_with_its_inference_service(tmp_path):
    path = write(
        tmp_path,
        """\
        apiVersion: serving.kserve.io/v1beta1
        kind: InferenceService
        metadata: {name: opt-125m}
        spec:
          predictor:
            model:
              modelFormat: {name: huggingface}
              args: ["--max-num-seqs=16"]
        ---
        apiVersion: keda.sh/v1alpha1
        kind: ScaledObject
        metadata: {name: opt}
        spec:
          scaleTargetRef: {name: opt-125m-predictor}
          triggers:
            - {type: prometheus, metadata: {query: sum(vllm:num_requests_running), threshold: "16"}}
        """,
    )
    manifests = read_manifest_set([path])
    ((document, autoscaler),) = manifests.autoscalers
    assert find_scale_target(autoscaler, document, manifests.workloads).servers[0].max_num_seqs == 16


def test_manifest_set_from_texts_reads_yaml_in_memory():
    from planner.readers.workload import manifest_set_from_texts

    texts = {
        "so.yaml": "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: a}\nspec:\n"
        "  scaleTargetRef: {name: a}\n  triggers:\n"
        "    - {type: prometheus, metadata: {query: sum(x), threshold: '1'}}\n",
        "rules.yaml": "externalRules: []\n",
    }
    manifests = manifest_set_from_texts(texts)
    assert manifests.files == ("so.yaml", "rules.yaml") and len(manifests.autoscalers) == 1
    assert manifests.documents[0].line(("spec", "triggers", 0)) == 7
    with pytest.raises(PlannerInputError, match=r"^bad\.yaml \(document 1\): not a Kubernetes object"):
        manifest_set_from_texts({"bad.yaml": "a: 1\n"})
