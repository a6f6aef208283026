"""``planner manifests``: files written, schemas passed, and the decisions the thresholds promise."""

from __future__ import annotations

import json
import math
from decimal import ROUND_HALF_EVEN, Decimal

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from planner.autoscaler.explain import evaluate_decision
from planner.cli import main
from planner.manifests.schema import schema_errors
from planner.readers.manifest import load_autoscaler
from tests.conftest import DATA_DIR

BASE = ["manifests", "--warmup-s", "240", "--max-tokens", "4096", "--itl-ms", "50", "--max-replicas", "12"]
T, KV, Q = 40, 0.8, 129


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("generated")
    status = main(
        [
            *BASE,
            "--target",
            "llama-vllm",
            "--concurrency-target",
            str(T),
            "--kv-target",
            str(KV),
            "--queue-threshold",
            str(Q),
            "--namespace",
            "llm",
            "--model-name",
            "llama",
            "--out",
            str(out),
        ]
    )
    assert status == 0
    return out


@pytest.fixture(scope="module")
def cluster_tolerance(tmp_path_factory):
    out = tmp_path_factory.mktemp("cluster-tolerance")
    assert (
        main(
            [
                *BASE,
                "--target",
                "llama-vllm",
                "--concurrency-target",
                str(T),
                "--kv-target",
                str(KV),
                "--scale-up-tolerance",
                "cluster",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    return out


def test_writes_four_files_that_pass_both_schemas(generated):
    names = sorted(p.name for p in generated.iterdir())
    assert names == ["adapter-rules.yaml", "deployment-patch.yaml", "hpa.yaml", "scaledobject.yaml"]
    for name in ("scaledobject.yaml", "hpa.yaml"):
        [document] = yaml.safe_load_all((generated / name).read_text())
        assert schema_errors(document, source=name) == []
    patch = yaml.safe_load((generated / "deployment-patch.yaml").read_text())
    assert schema_errors(patch, partial=True) == []
    assert not list(generated.glob(".*"))  # no temporary files left behind


def test_generated_files_follow_the_lint_rules(generated):
    so = yaml.safe_load((generated / "scaledobject.yaml").read_text())
    spec = so["spec"]
    queries = [t["metadata"]["query"] for t in spec["triggers"]]
    assert all(t["metadata"]["ignoreNullValues"] == "false" for t in spec["triggers"])  # ignore-null-values
    assert not any("avg(" in q for q in queries)  # avg-with-averagevalue
    assert any("num_requests_running" in q for q in queries)  # waiting-only-trigger
    assert not any(
        old in q for q in queries for old in ("gpu_cache_usage_perc", "num_requests_swapped", "cpu_cache_usage_perc")
    )  # deprecated-metric
    assert "scalingModifiers" in spec["advanced"]  # multi-trigger-or
    assert spec["maxReplicaCount"] == 12 and spec["minReplicaCount"] >= 1  # no-max, min-zero-pod-metric
    down = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
    assert down["stabilizationWindowSeconds"] >= 240  # short-scale-down-window
    pod = yaml.safe_load((generated / "deployment-patch.yaml").read_text())["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] >= 4096 * 0.05 + 10  # short-grace
    header = (generated / "deployment-patch.yaml").read_text().splitlines()[1]
    assert "--shutdown-timeout=226" in header and 226 < pod["terminationGracePeriodSeconds"]


def _composite_replicas(inflight, kv, waiting):
    """What the thresholds promise: replicas for the most demanding signal, at KEDA's milli precision."""
    value = max(inflight / T, kv / KV, waiting / Q)
    return math.ceil(Decimal(f"{value:.3f}").quantize(Decimal("0.001"), rounding=ROUND_HALF_EVEN))


def _expected(current, needed, tolerance_frac=0.0):
    if needed <= current * (1 + tolerance_frac) + 1e-9:
        return current  # inside the tolerance, or a scale-down held by the window
    return min(12, needed, max(2 * current, current + 4))


def test_hpa_on_the_scaled_object_gives_the_promised_decisions(generated):
    autoscaler = load_autoscaler(generated / "scaledobject.yaml")
    # the brief's cases: in-flight 3T+1 with 3 replicas -> 4; KV sum 2.5 at 0.8 -> 4
    decision = evaluate_decision(autoscaler, 3, {"inflight": str(3 * T + 1), "kv": "0", "waiting": "0"})
    assert decision.desired_replicas == 4
    decision = evaluate_decision(autoscaler, 3, {"inflight": "0", "kv": "2.5", "waiting": "0"})
    assert decision.desired_replicas == 4
    # a deep queue adds replicas beyond what in-flight asks for
    decision = evaluate_decision(autoscaler, 3, {"inflight": "100", "kv": "1", "waiting": str(5 * Q)})
    assert decision.desired_replicas == 5


def test_the_cli_reads_the_generated_scaled_object(generated, capsys):
    status = main(
        [
            "hpa",
            "--manifest",
            str(generated / "scaledobject.yaml"),
            "--current-replicas",
            "3",
            "--metric",
            f"inflight={3 * T + 1}",
            "--metric",
            "kv=0",
            "--metric",
            "waiting=0",
            "--json",
        ]
    )
    assert status == 0
    assert json.loads(capsys.readouterr().out)["desired_replicas"] == 4


@pytest.fixture(scope="module")
def loaded(generated):
    return load_autoscaler(generated / "scaledobject.yaml"), load_autoscaler(generated / "hpa.yaml")


@given(
    current=st.integers(2, 12),
    inflight=st.integers(0, 800),
    kv=st.floats(0, 12, allow_nan=False).map(lambda x: round(x, 2)),
    waiting=st.integers(0, 600),
)
def test_scaled_object_and_hpa_decide_as_promised(loaded, current, inflight, kv, waiting):
    needed = _composite_replicas(inflight, kv, waiting)
    so, hpa = loaded
    values = {"inflight": str(inflight), "kv": str(kv), "waiting": str(waiting)}
    assert evaluate_decision(so, current, values).desired_replicas == _expected(current, needed)
    per_metric = max(math.ceil(round(inflight / T, 9)), math.ceil(round(kv / KV, 9)), math.ceil(round(waiting / Q, 9)))
    decision = evaluate_decision(hpa, current, {"0": str(inflight), "1": str(kv), "2": str(waiting)})
    assert decision.desired_replicas == _expected(current, per_metric)


def test_with_the_cluster_tolerance_small_excesses_are_ignored(cluster_tolerance):
    autoscaler = load_autoscaler(cluster_tolerance / "scaledobject.yaml")
    assert evaluate_decision(autoscaler, 3, {"inflight": str(3 * T + 1), "kv": "0"}).desired_replicas == 3
    assert evaluate_decision(autoscaler, 3, {"inflight": str(133), "kv": "0"}).desired_replicas == 4


def test_thresholds_from_a_knee_file_and_from_the_load_test_agree(tmp_path, capsys):
    loadtest = str(DATA_DIR / "loadtests" / "llama-3.1-8b_canonical.csv")
    assert (
        main(
            [
                "knee",
                loadtest,
                "--ttft-p99-ms",
                "2000",
                "--itl-p99-ms",
                "50",
                "--warmup-s",
                "240",
                "--wait-budget-s",
                "5",
                "--json",
            ]
        )
        == 0
    )
    knee = json.loads(capsys.readouterr().out)
    knee_file = tmp_path / "knee.json"
    knee_file.write_text(json.dumps(knee))
    from_knee = _summary(
        capsys,
        [
            "manifests",
            "--knee-json",
            str(knee_file),
            "--max-tokens",
            "4096",
            "--itl-ms",
            "50",
            "--max-replicas",
            "8",
            "--target",
            "llama",
            "--json",
        ],
    )
    from_test = _summary(
        capsys,
        [
            "manifests",
            "--loadtest",
            loadtest,
            "--ttft-p99-ms",
            "2000",
            "--itl-p99-ms",
            "50",
            "--wait-budget-s",
            "5",
            "--warmup-s",
            "240",
            "--max-tokens",
            "4096",
            "--itl-ms",
            "50",
            "--max-replicas",
            "8",
            "--target",
            "llama",
            "--json",
        ],
    )
    for key in (
        "concurrency_target",
        "kv_usage_target",
        "queue_threshold_requests",
        "formula",
        "scale_down_window_s",
        "termination_grace_period_s",
    ):
        assert from_knee[key] == from_test[key], key
    assert from_knee["concurrency_target"] == pytest.approx(knee["concurrency_target"])
    assert from_knee["warmup_s"] == 240  # taken from the knee file
    overridden = _summary(
        capsys,
        [
            "manifests",
            "--knee-json",
            str(knee_file),
            "--concurrency-target",
            "30",
            "--max-tokens",
            "4096",
            "--itl-ms",
            "50",
            "--max-replicas",
            "8",
            "--target",
            "llama",
            "--json",
        ],
    )
    assert overridden["concurrency_target"] == 30


def _summary(capsys, args):
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def test_stdout_without_out(capsys):
    assert main([*BASE, "--target", "x", "--concurrency-target", "40"]) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d.get("kind") for d in documents] == ["ScaledObject", "HorizontalPodAutoscaler", "Deployment", None]


def test_patch_writes_a_copy_and_never_touches_the_input(shared_dir, tmp_path, capsys):
    [source] = (shared_dir / "real-world" / "manifests").glob("55-*.yaml")
    before = source.read_bytes()
    summary = _summary(
        capsys, [*BASE, "--concurrency-target", "40", "--patch", str(source), "--out", str(tmp_path / "out"), "--json"]
    )
    assert source.read_bytes() == before
    assert summary["target"]["name"] == "vllm-gemma-deployment"  # taken from the file
    patched = (tmp_path / "out" / source.name).read_text()
    [document] = yaml.safe_load_all(patched)
    assert schema_errors(document) == []
    assert summary["patch"]["changes"][-1] == "spec.template.spec.containers[0].args: + --shutdown-timeout=226"


def test_refuses_to_write_over_its_input(tmp_path, shared_dir, capsys):
    [source] = (shared_dir / "real-world" / "manifests").glob("55-*.yaml")
    copy = tmp_path / source.name
    copy.write_bytes(source.read_bytes())
    status = main([*BASE, "--concurrency-target", "40", "--patch", str(copy), "--out", str(tmp_path)])
    assert status == 2
    assert "would overwrite the input" in capsys.readouterr().err
    assert copy.read_bytes() == source.read_bytes()


def test_target_at_the_batch_limit_is_refused(shared_dir, tmp_path, capsys):
    [source] = (shared_dir / "real-world" / "manifests").glob("55-*.yaml")  # --max-num-seqs=64
    status = main([*BASE, "--concurrency-target", "64", "--patch", str(source), "--out", str(tmp_path)])
    assert status == 2 and "at or above --max-num-seqs 64" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
    assert main([*BASE, "--target", "x", "--concurrency-target", "40", "--max-num-seqs", "32"]) == 2


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        ("not json {", [], "knee.txt: not JSON"),
        ('{"knee_step": 3}', [], "knee.txt: expected the output of `planner knee --json`"),
        ('{"concurrency_target": "forty"}', [], "knee.txt: concurrency_target: expected a number"),
    ],
)
def test_bad_knee_file_exits_2_naming_it(tmp_path, capsys, content, extra, message):
    path = tmp_path / "knee.txt"
    path.write_text(content)
    status = main([*BASE, "--target", "x", "--knee-json", str(path), *extra])
    err = capsys.readouterr().err
    assert status == 2 and message in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a: [1, 2\n", "deploy.yaml: not valid YAML at line"),
        ("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", "deploy.yaml: holds 0 Deployments"),
        ("- just\n- a list\n", "deploy.yaml: holds 0 Deployments"),
    ],
)
def test_bad_patch_file_exits_2_naming_it(tmp_path, capsys, content, message):
    path = tmp_path / "deploy.yaml"
    path.write_text(content)
    status = main([*BASE, "--concurrency-target", "40", "--patch", str(path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert status == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--target", "x"], "no concurrency target"),
        (["--target", "x", "--concurrency-target", "40", "--min-replicas", "0"], "min_replicas must be at least 1"),
        (["--concurrency-target", "40"], "--target NAME is required"),
        (["--target", "x", "--concurrency-target", "40", "--scale-up-tolerance", "lots"], "--scale-up-tolerance"),
        (["--target", "x", "--loadtest", "missing.csv"], "needs --ttft-p99-ms"),
        (["--target", "x", "--knee-json", "missing.json"], "no such file: missing.json"),
    ],
)
def test_bad_arguments_exit_2(capsys, args, message):
    assert main([*BASE, *args]) == 2
    assert message in capsys.readouterr().err


def test_a_load_test_without_a_target_says_why(tmp_path, capsys, shared_dir):
    # One step is too few for a knee, so `planner knee` withholds the target; manifests say so.
    one_step = str(shared_dir / "real-world/vllm_bench/er0080-opt125m-vllm0.25.1/bench_serve_v0.25.1.json")
    args = [
        "manifests",
        "--target",
        "vllm",
        "--warmup-s",
        "240",
        "--max-tokens",
        "4096",
        "--itl-ms",
        "50",
        "--max-replicas",
        "12",
        "--out",
        str(tmp_path / "out"),
    ]
    assert main([*args, "--loadtest", one_step, "--ttft-p99-ms", "2000", "--itl-p99-ms", "50"]) == 2
    assert "--loadtest gives no concurrency target: " in capsys.readouterr().err
    assert main(["knee", one_step, "--ttft-p99-ms", "2000", "--itl-p99-ms", "50", "--json"]) == 0
    knee_json = tmp_path / "knee.json"
    knee_json.write_text(capsys.readouterr().out)
    assert main([*args, "--knee-json", str(knee_json)]) == 2
    assert "a knee needs at least 3" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_version_flags_decide_whether_tolerance_is_written(tmp_path, capsys):
    # Defaults (Kubernetes 1.37, KEDA 2.20) keep it; KEDA 2.17 drops it from the ScaledObject only;
    # Kubernetes 1.34 (gate off by default) from both, with a comment instead.
    def run(*flags):
        out = tmp_path / "-".join(flags or ("default",))
        assert main([*BASE, "--target", "llama-vllm", "--concurrency-target", str(T), *flags, "--out", str(out)]) == 0
        so = yaml.safe_load((out / "scaledobject.yaml").read_text())["spec"]["advanced"]
        hpa = yaml.safe_load((out / "hpa.yaml").read_text())["spec"]
        return (
            hpa["behavior"]["scaleUp"].get("tolerance"),
            so["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"].get("tolerance"),
            (out / "hpa.yaml").read_text(),
            capsys.readouterr().out,
        )

    assert run()[:2] == ("0", "0")
    hpa_t, so_t, _, printed = run("--keda-version", "2.17")
    assert (hpa_t, so_t) == ("0", None) and "note: scaledobject.yaml leaves behavior.scaleUp.tolerance out" in printed
    hpa_t, so_t, hpa_text, _ = run("--kubernetes-version", "v1.34.3")
    assert (hpa_t, so_t) == (None, None) and "# no tolerance written: on Kubernetes 1.34" in hpa_text


def test_a_bad_version_is_a_one_line_error(tmp_path, capsys):
    status = main([*BASE, "--target", "x", "--concurrency-target", "40", "--kubernetes-version", "one.37"])
    assert status == 2 and "--kubernetes-version: expected MAJOR.MINOR" in capsys.readouterr().err


def test_the_teams_matcher_and_the_patched_workloads_namespace_scope_the_queries(tmp_path, capsys):
    # Issue 20: the review chapter's chat model keeps {model_name="chat"}; the Deployment adds namespace="llm".
    deployment = DATA_DIR / "manifests" / "review" / "chat-deployment.yaml"
    assert (
        main(
            [
                *BASE,
                "--target",
                "chat",
                "--concurrency-target",
                "24",
                "--match",
                'model_name="chat"',
                "--patch",
                str(deployment),
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    capsys.readouterr()
    so = yaml.safe_load((tmp_path / "scaledobject.yaml").read_text(encoding="utf-8"))
    query = so["spec"]["triggers"][0]["metadata"]["query"]
    assert query == (
        'sum(vllm:num_requests_running{model_name="chat",namespace="llm"}) + '
        'sum(vllm:num_requests_waiting{model_name="chat",namespace="llm"})'
    )
