"""An expert's review of the 23 real manifests in ../shared/real-world/manifests-2, and the linter scored against it.

The expectations below were written by reading each file as an engineer who runs KEDA, the HPA and
vLLM would, before `planner lint` was run on the folder even once. Each expected rule id carries the
reason. All 23 files are linted together (as `planner lint manifests-2/`), so `scale-target-not-found`
is judged against the whole folder: it is expected only where the autoscaler's target is in none of
the 23 files. Rule ids introduced for issue 20 are used where they apply: `underscore-metric-name`,
`gpu-memory-trigger`, `hpa-and-scaledobject`, `latency-quantile-averagevalue`, `unscoped-query`.

Score: over (file, rule) pairs, precision and recall must both be at least 0.95, no document is
refused (`unreadable-document`), and the JSON output is printed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from planner.manifests.lint import lint
from planner.readers.workload import read_manifest_set

EXPECTED: dict[str, dict[str, str]] = {
    "01-kedify-keda-otel-llmd-pd-multidoc.yaml": {
        # external trigger (kedify OTel scaler): no threshold field exists for it, so nothing may be refused;
        # the query is scoped by deployment=..., windows 120 s / 1200 s are above the warmup, min 1.
        "scale-target-not-found": "Deployments pd-llm-d-modelservice-decode/-prefill are in none of the files",
    },
    "02-tazmainian-keda-queue-plus-cron-min0.yaml": {
        # The cron trigger is a schedule floor: OR with it is the intent, so no multi-trigger-or.
        # gpu_job_queue_depth is an application job queue that exists without pods: min 0 is fine.
        "ignore-null-values": 'no ignoreNullValues "false", and `or vector(0)` hides a missing series as 0',
        "scale-target-not-found": "Deployment inference-pod is in none of the files",
    },
    "03-adityo-keda-redis-vllm-min0.yaml": {
        # A redis list trigger needs no threshold (listLength defaults to 5); the list lives outside the pods,
        # so scale to zero is sound. Target vllm is 04. Nothing to raise.
    },
    "04-adityo-vllm-deployment.yaml": {
        "short-grace": "no terminationGracePeriodSeconds (30 s) against --max-model-len 4096 (204.8 s at 50 ms)",
        "shutdown-timeout-vs-grace": "no --shutdown-timeout and no draining preStop: SIGTERM aborts running requests",
        # $(MODEL_ID) is Kubernetes' own env expansion, not a placeholder.
    },
    "05-adminless-keda-running-min0.yaml": {
        "underscore-metric-name": "vllm_num_requests_running: vLLM exports vllm:num_requests_running; "
        "a standard Prometheus stores no underscore name",
        "min-zero-pod-metric": "minReplicaCount 0 with a vLLM metric only the pods serve: the fleet never comes back",
        "ignore-null-values": 'no ignoreNullValues "false": the empty result reads as 0',
        "unscoped-query": "sum(vllm_num_requests_running) has no selector: it sums every vLLM in the cluster",
    },
    "06-adminless-vllm-deployment-grace60.yaml": {
        "short-grace": "grace 60 s against --max-model-len 8192 (409.6 s at 50 ms)",
        "shutdown-timeout-vs-grace": "no --shutdown-timeout, no preStop",
    },
    "07-taixingbi-keda-kv-cache-80-running-placeholder.yaml": {
        "unsubstituted-placeholder": "minReplicaCount: __KEDA_MIN_REPLICAS__ (sed placeholder); read as unknown, "
        "not refused",
        "kv-threshold-out-of-range": "threshold 80 on gpu_cache_usage_perc, a 0-1 fraction",
        "deprecated-metric": "vllm:gpu_cache_usage_perc is the old name of vllm:kv_cache_usage_perc",
        "avg-with-averagevalue": "avg(...) under the default AverageValue divides by the pods twice",
        "multi-trigger-or": "KV and running triggers without scalingModifiers combine as OR",
        "ignore-null-values": 'neither trigger sets ignoreNullValues "false"',
        # {namespace="vllm"} singles out vllm-qwen (09): it is the only vLLM workload in that namespace.
        # The metricName fields are KEDA's labels, not queries: no underscore-metric-name.
    },
    "08-taixingbi-keda-aws-cloudwatch-alb-fallback.yaml": {
        "unsubstituted-placeholder": "dimensionValue REPLACE_ALB_ARN_SUFFIX;REPLACE_TG_ARN_SUFFIX",
        # aws-cloudwatch has its own fields (targetMetricValue), no threshold; min 2. Its twin 07 is an
        # alternative ScaledObject (the file says apply only one); KEDA's webhook refuses a second anyway.
    },
    "09-taixingbi-vllm-deployment-placeholders.yaml": {
        "unsubstituted-placeholder": "__VLLM_REPLICAS__, __VLLM_MAX_MODEL_LEN__, image ECR_REPOSITORY_URL:v0.8.4",
        "shutdown-timeout-vs-grace": "the vLLM container (args are vLLM flags) has no --shutdown-timeout",
        # --max-model-len is a placeholder, so the longest generation is unknown: grace 120 s is not judged.
        # Schema errors on placeholder-valued fields are the placeholder's, not reported twice.
    },
    "10-isrealei-vllm-mistral-prestop-sleep60-no-grace.yaml": {
        "short-grace": "grace unset (30 s), shorter even than its own preStop sleep 60, against 204.8 s",
        "shutdown-timeout-vs-grace": "no --shutdown-timeout; the preStop sleeps, it does not drain",
    },
    "11-drosalchemist-keda-two-redis-flowstyle-min0.yaml": {
        # Two redis triggers with maxReplicaCount 1: the HPA has nothing to choose between, activation is the
        # only decision, and KEDA activates on any trigger by design: no multi-trigger-or. Min 0 on a broker is fine.
    },
    "12-abdulfahad-kubectl-list-dump-scaledobjects-and-keda-hpas.yaml": {
        # A `kind: List` dump: its items are read. The keda-hpa-* HPAs are owned by the ScaledObjects
        # (ownerReferences), KEDA's own: not an HPA competing with a ScaledObject.
        "scale-target-not-found": "worker-autoscaler targets Deployment worker, in none of the files",
    },
    "13-exeller-kserve-isvc-keda-external-waiting.yaml": {
        "waiting-only-trigger": "the InferenceService's only autoscaling signal is sum(vllm:num_requests_waiting)",
        "short-grace": "no terminationGracePeriodSeconds (30 s) against --max-model-len=8192",
        "shutdown-timeout-vs-grace": "no --shutdown-timeout in the model args",
        # KServe's raw-deployment reconciler adds a TCP readiness probe to a container without one:
        # no missing-readiness-probe. {namespace="inference"} singles out the only vLLM workload there.
    },
    "14-energyczl-hpa-ollama-external-active-requests.yaml": {
        # An in-flight count (a recording rule) per replica on Ollama, windows 60 s / 300 s; target 15 present.
    },
    "15-energyczl-ollama-deployment-gpu.yaml": {
        # Ollama, not vLLM: the vLLM workload rules do not apply.
    },
    "16-kedagpu-keda-external-tgi-profile-min0.yaml": {
        # An external scaler whose profile's metrics cannot be read from the file: no signal rule is judged.
        "scale-target-not-found": "Deployment tgi-deployment is in none of the files",
    },
    "17-misohu-keda-running-kserve-llmisvc-deployment.yaml": {
        "ignore-null-values": 'no ignoreNullValues "false"',
        # Target mixtral-kserve is the Deployment KServe generates for the LLMInferenceService mixtral (18):
        # found. Scoped by k8s_pod_name=~"mixtral-kserve-.*"; threshold 1 is far below any batch limit.
    },
    "18-misohu-kserve-llminferenceservice-mixtral-tp2.yaml": {
        # An LLMInferenceService's template is merged over KServe's well-known config, which supplies the
        # grace period, probes, preStop and --shutdown-timeout; what this file leaves unset is inherited.
    },
    "19-lws-vllm-leaderworkerset-hpa-cpu.yaml": {
        "cpu-trigger": "a GPU vLLM LeaderWorkerSet scaled on CPU utilization",
        "unsubstituted-placeholder": "env value $HF_TOKEN is passed literally (Kubernetes expands only $(VAR))",
        "short-grace": "grace unset (30 s) for a 405B model's generations",
        "shutdown-timeout-vs-grace": "the leader's vllm serve has no --shutdown-timeout",
        # The --headless worker serves no HTTP: no missing-readiness-probe for it; the leader has a probe.
    },
    "20-lws-sglang-leaderworkerset-hpa-cpu.yaml": {
        "cpu-trigger": "a GPU SGLang LeaderWorkerSet scaled on CPU utilization",
        "unsubstituted-placeholder": "env value $HF_TOKEN is passed literally",
        # SGLang, not vLLM: no vLLM workload rules. Target present in the file.
    },
    "21-lws-keda-disaggregatedset-prefill-waiting.yaml": {
        "underscore-metric-name": "vllm_num_requests_waiting is not the name vLLM exports",
        "waiting-only-trigger": "the only signal is a waiting count",
        "ignore-null-values": 'no ignoreNullValues "false"',
        "scale-target-not-found": "DisaggregatedSetRoleScaler llm-serving-prefill is in none of the files",
        # {model="..."} names a model (target unknown), so the query is scoped: no unscoped-query.
    },
    "22-jaeveloper-hpa-ollama-cpu.yaml": {
        "cpu-trigger": "an LLM server scaled on CPU utilization (one request pegs llama.cpp's threads)",
        "scale-target-not-found": "Deployment ollama in namespace llm is in none of the files (15 is in llmops)",
    },
    "23-aabhimittal-llm-gateway-deployment-hpa-pods-queue.yaml": {
        "waiting-only-trigger": "the only signal is the gateway's queue depth per pod, zero whenever it keeps up",
        # The Deployment is a gateway in front of vLLM (LLM_VLLM_BASE_URL is a client setting), not vLLM.
    },
}

MANIFESTS_2 = ("real-world", "manifests-2")


def precision_recall(found: dict[str, set[str]], expected: dict[str, set[str]]) -> tuple[float, float]:
    """Over (file, rule) pairs: the share of raised pairs expected, and of expected pairs raised."""
    raised = {(name, rule) for name, rules in found.items() for rule in rules}
    wanted = {(name, rule) for name, rules in expected.items() for rule in rules}
    hits = len(raised & wanted)
    return (hits / len(raised) if raised else 1.0), (hits / len(wanted) if wanted else 1.0)


def _found_pairs(findings) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {name: set() for name in EXPECTED}
    for finding in findings:
        found.setdefault(Path(finding.file).name, set()).add(finding.rule)
    return found


def test_the_review_covers_the_23_files(shared_dir):
    names = sorted(p.name for p in (shared_dir.joinpath(*MANIFESTS_2)).glob("*.yaml"))
    assert names == sorted(EXPECTED)


def test_linter_agrees_with_the_expert_on_manifests_2(shared_dir):
    findings = lint(read_manifest_set([shared_dir.joinpath(*MANIFESTS_2)], strict=False))
    assert not [f for f in findings if f.rule == "unreadable-document"], "a valid manifest was refused"
    found = _found_pairs(findings)
    precision, recall = precision_recall(found, {name: set(rules) for name, rules in EXPECTED.items()})
    missed = sorted((n, r) for n, rules in EXPECTED.items() for r in rules if r not in found.get(n, ()))
    extra = sorted((n, r) for n, rules in found.items() for r in rules if r not in EXPECTED.get(n, {}))
    assert precision >= 0.95 and recall >= 0.95, (precision, recall, missed, extra)


def test_the_folder_linted_together_prints_json(shared_dir):
    folder = shared_dir.joinpath(*MANIFESTS_2)
    result = subprocess.run(
        [sys.executable, "-m", "planner.cli", "lint", str(folder), "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr
    report = json.loads(result.stdout)
    assert len(report["files"]) == 23 and report["exit_status"] == result.returncode
