"""Tests for ``planner lint`` (planner.cli.lint): output formats and exit status."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from planner.cli import main
from tests.conftest import DATA_DIR

CLEAN = """\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: llama}
spec:
  scaleTargetRef: {name: llama}
  minReplicaCount: 1
  maxReplicaCount: 8
  triggers:
    - type: prometheus
      metadata:
        query: sum(vllm:num_requests_running{model_name="llama"}) + sum(vllm:num_requests_waiting{model_name="llama"})
        threshold: "40"
        ignoreNullValues: "false"
"""
WARNING_ONLY = CLEAN.replace('        ignoreNullValues: "false"\n', "")
ERROR = CLEAN.replace("minReplicaCount: 1", "minReplicaCount: 0")


def lint_json(capsys, *args) -> tuple[int, dict]:
    status = main(["lint", *map(str, args), "--format", "json"])
    return status, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("text", "status"), [(CLEAN, 0), (WARNING_ONLY, 0), (ERROR, 1)], ids=["clean", "warning", "error"]
)
def test_exit_status(capsys, tmp_path, text, status):
    path = tmp_path / "so.yaml"
    path.write_text(text)
    got, out = lint_json(capsys, path)
    assert got == status and out["exit_status"] == status
    assert out["counts"]["error"] == (status == 1)


def test_json_finding_fields(capsys, tmp_path):
    path = tmp_path / "so.yaml"
    path.write_text(ERROR)
    _, out = lint_json(capsys, path)
    (finding,) = [f for f in out["findings"] if f["rule"] == "min-zero-pod-metric"]
    assert finding == {
        "rule": "min-zero-pod-metric",
        "severity": "error",
        "file": str(path),
        "document": 1,
        "path": "spec.minReplicaCount",
        "line": 6,
        "why": finding["why"],
        "fix": finding["fix"],
        "template": "",
    }


def test_json_flag_is_format_json(capsys, tmp_path):
    path = tmp_path / "so.yaml"
    path.write_text(ERROR)
    assert main(["lint", str(path), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["counts"]["error"] == 1


def test_text_output_points_at_the_rule_page(capsys, tmp_path):
    path = tmp_path / "so.yaml"
    path.write_text(WARNING_ONLY)
    assert main(["lint", str(path)]) == 0
    text = capsys.readouterr().out
    assert f"{path}:10: warning: ignore-null-values:" in text
    assert "see: book/lint_rules.md#ignore-null-values" in text
    assert "1 file(s), 1 finding(s): 0 error, 1 warning, 0 info" in text


def test_settings_reach_the_rules(capsys, tmp_path):
    path = tmp_path / "so.yaml"
    path.write_text(CLEAN)
    assert lint_json(capsys, path, "--max-num-seqs", "40")[1]["findings"][0]["rule"] == "threshold-at-batch-limit"


def test_folder_reads_yaml_files_only(capsys, tmp_path):
    (tmp_path / "a.yaml").write_text(CLEAN)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.yml").write_text(ERROR)
    (tmp_path / "README.md").write_text("# not a manifest\n")
    status, out = lint_json(capsys, tmp_path)
    assert status == 1 and [p.split("/")[-1] for p in out["files"]] == ["a.yaml", "b.yml"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not: yaml: at all\n", "not valid YAML"),
        ("just a string\n", "(document 1): not a Kubernetes object"),
        (
            "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: x}\nspec: {scaleTargetRef: "
            "{name: x}}\n",
            "(document 1): spec.triggers: at least one trigger is required",
        ),
    ],
)
def test_unreadable_input_is_a_finding_and_json_is_printed(capsys, tmp_path, text, message):
    # Issue 20: an unreadable document used to stop the run with exit 2 and no JSON at all.
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    (tmp_path / "good.yaml").write_text(WARNING_ONLY)
    status, out = lint_json(capsys, tmp_path)
    assert status == 1 and out["exit_status"] == 1 and len(out["files"]) == 2
    (unreadable,) = [f for f in out["findings"] if f["rule"] == "unreadable-document"]
    assert unreadable["file"] == str(path) and unreadable["line"] >= 1 and message in unreadable["why"]
    assert {f["rule"] for f in out["findings"]} == {"unreadable-document", "ignore-null-values"}


def test_missing_path_is_a_usage_error_with_a_json_object(capsys, tmp_path):
    assert main(["lint", str(tmp_path / "nowhere.yaml"), "--format", "json"]) == 2
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["exit_status"] == 2 and "nowhere.yaml" in out["error"] and "nowhere.yaml" in captured.err


def test_bad_flag_value_exits_2(capsys, tmp_path):
    path = tmp_path / "so.yaml"
    path.write_text(CLEAN)
    assert main(["lint", str(path), "--itl-ms", "0"]) == 2
    assert "--itl-ms must be a number above 0" in capsys.readouterr().err


def test_formula_that_runs_code_is_refused_without_traceback(tmp_path):
    path = tmp_path / "so.yaml"
    path.write_text(
        CLEAN.replace(
            "  triggers:",
            "  advanced:\n    scalingModifiers:\n"
            "      formula: \"__import__('os').system('touch /tmp/pwned')\"\n"
            "      target: '1'\n  triggers:",
        )
    )
    before = path.read_bytes()
    run = subprocess.run([sys.executable, "-m", "planner.cli", "lint", str(path)], capture_output=True, text=True)
    assert run.returncode == 1 and "Traceback" not in run.stderr + run.stdout
    assert "unreadable-document" in run.stdout and "(document 1): spec.advanced.scalingModifiers.formula" in run.stdout
    assert path.read_bytes() == before  # the input is never written


def test_corpus_exit_status_and_counts(capsys, shared_dir):
    status, out = lint_json(capsys, shared_dir / "real-world" / "manifests")
    assert status == 1 and len(out["files"]) == 33
    assert sum(out["counts"].values()) == len(out["findings"])


def test_scrape_option_reads_the_servers_metric_names(capsys, tmp_path, shared_dir):
    path = tmp_path / "so.yaml"
    path.write_text(CLEAN.replace("vllm:num_requests_running", "vllm:num_requests_swapped"))
    scrape = shared_dir / "real-world" / "metrics" / "vllm-0.25.1-opt125m-tp2-loaded.txt"
    status, out = lint_json(capsys, path, "--scrape", scrape)
    assert status == 1 and {f["rule"] for f in out["findings"]} >= {"metric-not-exported", "deprecated-metric"}
    assert main(["lint", str(path), "--scrape", str(tmp_path / "missing.txt")]) == 2


GENERATE = ["manifests", "--warmup-s", "240", "--max-tokens", "4096", "--itl-ms", "50", "--max-replicas", "12"]


@pytest.mark.parametrize(
    "signals",
    [
        ["--concurrency-target", "24"],
        ["--concurrency-target", "24", "--kv-target", "0.8"],
        ["--concurrency-target", "24", "--kv-target", "0.8", "--queue-threshold", "129"],
    ],
    ids=["in-flight", "in-flight+kv", "in-flight+kv+queue"],
)
def test_generated_manifests_lint_clean(capsys, tmp_path, signals):
    user = tmp_path / "chat.yaml"
    user.write_text((DATA_DIR / "manifests" / "review" / "chat-deployment.yaml").read_text())
    out = tmp_path / "out"
    assert main([*GENERATE, *signals, "--target", "chat", "--patch", str(user), "--out", str(out)]) == 0
    capsys.readouterr()
    for settings in ([], ["--warmup-s", "240", "--max-tokens", "4096", "--itl-ms", "50"]):
        status, report = lint_json(capsys, out, *settings)
        assert (status, report["findings"]) == (0, [])
        assert len(report["files"]) == 5  # ScaledObject, HPA, patch, patched copy, adapter rules (skipped)
    # the user's own file, unpatched, is what the review chapter flags
    assert {f["rule"] for f in lint_json(capsys, user)[1]["findings"]} == {"short-grace", "shutdown-timeout-vs-grace"}


TOLERANCE = CLEAN.replace(
    "  triggers:\n",
    "  advanced:\n    horizontalPodAutoscalerConfig:\n      behavior:\n"
    '        scaleUp:\n          tolerance: "0"\n  triggers:\n',
)


@pytest.mark.parametrize(
    ("flags", "dropped"),
    [
        ((), False),
        (("--keda-version", "2.17"), True),
        (("--kubernetes-version", "1.34"), True),
        (("--kubernetes-version", "1.35", "--keda-version", "2.18"), False),
    ],
)
def test_version_flags_give_an_info_finding_where_tolerance_is_dropped(capsys, tmp_path, flags, dropped):
    path = tmp_path / "so.yaml"
    path.write_text(TOLERANCE)
    status, out = lint_json(capsys, path, *flags)
    hits = [f for f in out["findings"] if f["rule"] == "tolerance-dropped"]
    assert bool(hits) is dropped and status == 0
    assert all(f["severity"] == "info" and f["path"].endswith("scaleUp.tolerance") for f in hits)
