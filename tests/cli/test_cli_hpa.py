"""Tests for ``planner hpa`` (planner.cli.hpa and planner.autoscaler.explain)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from planner.cli import main

QUEUE_SO = """\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: queue}
spec:
  scaleTargetRef: {name: vllm}
  minReplicaCount: 1
  maxReplicaCount: 40
  triggers:
  - type: prometheus
    name: waiting
    metadata:
      query: sum(vllm:num_requests_waiting)
      threshold: "2"
"""


@pytest.fixture
def queue_manifest(tmp_path) -> Path:
    path = tmp_path / "queue.yaml"
    path.write_text(QUEUE_SO)
    return path


def _json(capsys, args) -> dict:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(("total", "proposal"), [("20", 10), ("9", 5), ("8.6", 4)], ids=["W1", "W2", "W3"])
def test_queue_depth_worked_examples(capsys, queue_manifest, total, proposal):
    out = _json(
        capsys, ["hpa", "--manifest", str(queue_manifest), "--current-replicas", "4", "--metric", f"waiting={total}"]
    )
    (trigger,) = out["triggers"]
    assert trigger["proposal"] == proposal and out["max_proposal"] == proposal
    # no behavior: the legacy path limits a scale-up to max(2 x 4, 4) = 8
    assert out["desired_replicas"] == min(proposal, 8)


def test_index_names_and_text_output(capsys, queue_manifest):
    assert main(["hpa", "--manifest", str(queue_manifest), "--current-replicas", "4", "--metric", "0=20"]) == 0
    text = capsys.readouterr().out
    assert "ratio 2.5, outside the tolerance -> proposes 10" in text
    assert "Limits: 8 (ScaleUpLimit" in text
    assert "desired replicas  8" in text


def test_scale_down_reports_the_window(capsys, queue_manifest):
    out = _json(capsys, ["hpa", "--manifest", str(queue_manifest), "--current-replicas", "6", "--metric", "waiting=2"])
    assert out["desired_replicas"] == 6  # held by the 300 s window seeded with the current count
    assert out["after_window_replicas"] == 1
    assert out["conditions"]["AbleToScale"]["reason"] == "ScaleDownStabilized"


def test_ready_replicas_matter_for_value_targets(capsys, shared_dir):
    manifest = shared_dir / "real-world" / "manifests" / "90-seed000-llama-vllm.yaml"
    out = _json(
        capsys,
        [
            "hpa",
            "--manifest",
            str(manifest),
            "--current-replicas",
            "6",
            "--ready-replicas",
            "4",
            "--metric",
            "0=0",
            "--metric",
            "1=1.0",
        ],
    )
    kv = out["triggers"][1]
    assert kv["proposal"] == 5  # ceil(1.25 x 4 Ready), not x 6
    assert out["keda"]["active"] is True


def test_scale_from_zero_is_keda(capsys, tmp_path):
    path = tmp_path / "zero.yaml"
    path.write_text(QUEUE_SO.replace("minReplicaCount: 1", "minReplicaCount: 0"))
    out = _json(capsys, ["hpa", "--manifest", str(path), "--current-replicas", "0", "--metric", "waiting=3"])
    assert out["desired_replicas"] == 1 and out["keda"]["active"] is True
    out = _json(capsys, ["hpa", "--manifest", str(path), "--current-replicas", "0", "--metric", "waiting=0"])
    assert out["desired_replicas"] == 0 and out["keda"]["active"] is False


def test_empty_result_counts_as_zero(capsys, queue_manifest):
    out = _json(capsys, ["hpa", "--manifest", str(queue_manifest), "--current-replicas", "2", "--metric", "waiting="])
    assert out["triggers"][0]["value_to_hpa"] == 0.0 and out["triggers"][0]["error"] is None


def test_plain_hpa_manifest(capsys, shared_dir):
    manifest = shared_dir / "real-world" / "manifests" / "04-k8sexamples-hpa-running.yaml"
    out = _json(
        capsys,
        ["hpa", "--manifest", str(manifest), "--current-replicas", "2", "--metric", "vllm_num_requests_running=10"],
    )
    # scaleUp is defaulted (+4 pods or +100 % per 15 s): 2 -> 5 at once
    assert out["triggers"][0]["proposal"] == 5 and out["desired_replicas"] == 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--metric", "nope=3"], "no trigger named 'nope' (known: 0=waiting)"),
        (["--metric", "waiting=abc"], "must be a number"),
        (["--metric", "waiting"], "--metric expects NAME=VALUE"),
        (["--metric", "waiting=-1"], "finite number >= 0"),
        (["--metric", "waiting=1", "--ready-replicas", "9"], "ready replicas must be an integer between 0 and"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, queue_manifest, args, message):
    code = main(["hpa", "--manifest", str(queue_manifest), "--current-replicas", "4", *args])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_missing_file_and_non_autoscaler_exit_2(capsys, tmp_path):
    assert main(["hpa", "--manifest", str(tmp_path / "none.yaml"), "--current-replicas", "1", "--metric", "a=1"]) == 2
    assert "no such file" in capsys.readouterr().err
    deployment = tmp_path / "d.yaml"
    deployment.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n")
    assert main(["hpa", "--manifest", str(deployment), "--current-replicas", "1", "--metric", "a=1"]) == 2
    assert "no HorizontalPodAutoscaler" in capsys.readouterr().err


def test_formula_injection_exits_2(capsys, tmp_path):
    path = tmp_path / "evil.yaml"
    path.write_text(
        textwrap.dedent(QUEUE_SO)
        + textwrap.indent(
            textwrap.dedent("""\
        advanced:
          scalingModifiers:
            target: "1"
            formula: "__import__('os').system('touch pwned')"
        """),
            "  ",
        )
    )
    assert main(["hpa", "--manifest", str(path), "--current-replicas", "1", "--metric", "waiting=1"]) == 2
    assert "scalingModifiers.formula" in capsys.readouterr().err
    assert not (Path.cwd() / "pwned").exists()


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as excinfo:
        main(["hpa", "--current-replicas", "1"])
    assert excinfo.value.code == 2
    with pytest.raises(SystemExit) as excinfo:
        main(["hpa", "--manifest", "x.yaml", "--current-replicas", "-1", "--metric", "a=1"])
    assert excinfo.value.code == 2


def test_console_script(queue_manifest):
    planner = shutil.which("planner") or str(Path(sys.executable).parent / "planner")
    done = subprocess.run(
        [
            planner,
            "hpa",
            "--manifest",
            str(queue_manifest),
            "--current-replicas",
            "4",
            "--metric",
            "waiting=20",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["desired_replicas"] == 8
    done = subprocess.run(
        [planner, "hpa", "--manifest", str(queue_manifest), "--current-replicas", "4", "--metric", "x=1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "no trigger named 'x'" in done.stderr


def test_conditions_after_a_rescale_read_as_kubectl_shows_them(capsys, queue_manifest):
    """W1 scales 4 -> 8: AbleToScale is SucceededRescale (the text names the new count), and the
    stabilization verdict the rescale overwrote still explains the steps."""
    out = _json(capsys, ["hpa", "--manifest", str(queue_manifest), "--current-replicas", "4", "--metric", "waiting=20"])
    assert out["conditions"]["AbleToScale"] == {
        "status": True,
        "reason": "SucceededRescale",
        "message": "the HPA controller was able to update the target scale to 8",
    }
    assert out["conditions"]["ScalingLimited"]["reason"] == "ScaleUpLimit"
    assert any(step.startswith("Stabilization: 10 (ReadyForNewScale") for step in out["steps"])
