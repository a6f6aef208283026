"""``planner schedule`` (planner.cli.schedule): what it prints and writes, a week of real traffic, and bad input."""

from __future__ import annotations

import json

import pytest
import yaml

from planner.cli import main
from tests.conftest import REPO_ROOT
from tests.workflows.test_schedule import TINY_FLEET, _surge

SLOW_FLEET = REPO_ROOT / "tests" / "data" / "plan" / "slow-replica.yaml"


@pytest.fixture(scope="module")
def surge_csv(tmp_path_factory):
    trace = _surge()
    path = tmp_path_factory.mktemp("schedule") / "surge.csv"
    rows = (
        f"{a:.6f},{i},{o}" for a, i, o in zip(trace.arrival_s, trace.input_tokens, trace.output_tokens, strict=True)
    )
    path.write_text("arrival_s,input_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    return path


def _run(capsys, *argv: str):
    status = main(["schedule", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _team_manifest(capsys, folder, max_replicas: int) -> str:
    # The ScaledObject a team gets from planner manifests, scoped to its model's series.
    status = main(
        [
            "manifests",
            "--target",
            "chat",
            "--match",
            'model_name="chat"',
            "--concurrency-target",
            "3.333",
            "--warmup-s",
            "120",
            "--max-tokens",
            "4096",
            "--itl-ms",
            "50",
            "--max-replicas",
            str(max_replicas),
            "--out",
            str(folder),
        ]
    )
    capsys.readouterr()
    assert status == 0
    return str(folder / "scaledobject.yaml")


def test_the_output_is_the_scaled_object_with_the_table_as_comments(capsys, surge_csv):
    status, out, err = _run(capsys, "--trace", str(surge_csv), "--fleet", str(TINY_FLEET), "--goal", "0.99")
    assert status == 0, err
    document = yaml.safe_load(out)  # the table and the lint line are comments: the output applies as is
    assert document["kind"] == "ScaledObject"
    assert [t["type"] for t in document["spec"]["triggers"]][:2] == ["prometheus", "cron"]
    assert document["spec"]["triggers"][1]["metadata"]["start"] == "57 6 * * *"
    comments = [line for line in out.splitlines() if line.startswith("# ")]
    assert any(line.startswith("# schedule + metric") for line in comments)
    assert any(line.startswith("# reactive only") for line in comments)
    assert any(line.startswith("# oracle (bound, at the goal)") for line in comments)
    assert "# planner lint: 0 error(s) or warning(s), clean" in comments
    assert "minimums by hour of the day in UTC, each rise 3 min early" in out


def test_json_and_out_carry_the_same_scaled_object(capsys, surge_csv, tmp_path):
    out_file = tmp_path / "so.yaml"
    argv = ["--trace", str(surge_csv), "--fleet", str(TINY_FLEET), "--goal", "0.99", "--timezone", "Europe/Dublin"]
    status, out, err = _run(capsys, *argv, "--json", "--out", str(out_file))
    assert status == 0, err
    data = json.loads(out)
    assert out_file.read_text() == data["scaled_object"] and data["written"] == str(out_file)
    assert data["met"] is True and data["timezone"] == "Europe/Dublin" and data["buckets"] == "hour of day"
    assert data["scheduled"]["slo_attainment_frac"] >= 0.99 > data["reactive"]["slo_attainment_frac"]
    assert data["oracle"]["cost_usd"] <= data["scheduled"]["cost_usd"]
    assert {t["timezone"] for t in data["triggers"]} == {"Europe/Dublin"} and len(data["floors"]) == 24
    assert [f for f in data["findings"] if f["severity"] in ("error", "warning")] == []
    assert not list(tmp_path.glob(".so.yaml.*"))  # written through a temporary file, nothing left over


def test_a_team_scaled_object_keeps_its_own_trigger(capsys, surge_csv, tmp_path):
    manifest = _team_manifest(capsys, tmp_path / "team", 12)
    status, out, err = _run(
        capsys, "--trace", str(surge_csv), "--fleet", str(TINY_FLEET), "--manifest", manifest, "--goal", "0.99"
    )
    assert status == 0, err
    document = yaml.safe_load(out)
    assert document["metadata"]["name"] == "chat" and document["spec"]["maxReplicaCount"] == 12
    query = document["spec"]["triggers"][0]["metadata"]["query"]
    assert 'model_name="chat"' in query and document["spec"]["triggers"][-1]["type"] == "cron"
    assert f"from {manifest}" in out.splitlines()[0]


# -- a week of real traffic ------------------------------------------------------------------------------------


def _week_argv(shared_dir, capsys, tmp_path, case):
    name, fleet, manifest_max = case
    argv = ["--trace", str(shared_dir / "traces" / name), "--stretch-days", "7", "--fleet", str(fleet)]
    if manifest_max:
        argv += ["--manifest", _team_manifest(capsys, tmp_path / "team", manifest_max)]
    return argv


@pytest.mark.parametrize(
    "case",
    [
        # The conversation trace on the slow replica, under the generated ScaledObject.
        ("AzureLLMInferenceTrace_conv.csv", SLOW_FLEET, 0),
        # The code trace (bursts four times its mean rate within a minute) on the small replica, under a team's.
        ("AzureLLMInferenceTrace_code.csv", TINY_FLEET, 40),
    ],
    ids=["azure-conv", "azure-code"],
)
def test_a_week_of_real_traffic_lints_clean_and_meets_the_goal_in_replay(capsys, shared_dir, tmp_path, case):
    out_file = tmp_path / "scaledobject.yaml"
    argv = _week_argv(shared_dir, capsys, tmp_path, case)
    status, out, err = _run(capsys, *argv, "--goal", "0.99", "--json", "--out", str(out_file))
    assert status == 0, err
    data = json.loads(out)
    assert data["met"] is True and data["buckets"] == "weekday x hour", data["reason"]
    floors = data["floors"]
    assert max(floors[:120]) > max(floors[120:])  # weekdays (Monday to Friday) peak above the weekend
    # planner lint on the written file, with the fleet's cold start: no error and no warning.
    assert main(["lint", str(out_file), "--fleet", str(case[1]), "--format", "json"]) == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [f for f in findings if f["severity"] in ("error", "warning")] == []
    # planner simulate replays the file as written: the goal is met, and no cheaper than the oracle.
    simulate_argv = [a for a in argv if a not in ("--manifest",) and not a.endswith("team/scaledobject.yaml")]
    assert main(["simulate", *simulate_argv, "--manifest", str(out_file), "--json"]) == 0
    replay = json.loads(capsys.readouterr().out)
    assert replay["slo_attainment_frac"] >= 0.99
    assert replay["slo_attainment_frac"] == pytest.approx(data["scheduled"]["slo_attainment_frac"])
    assert replay["cost_usd"] >= data["oracle"]["cost_usd"] > 0


# -- bad input ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--goal", "1.5"], "--goal: expected a fraction between 0 and 1"),
        (["--max-rounds", "0"], "--max-rounds: expected a whole number >= 1"),
        (["--timezone", "Mars/Olympus"], "unknown time zone Mars/Olympus"),
        (["--start", "next monday"], "--start: expected an ISO date"),
        (["--name", "chat"], "--name: picks a ScaledObject of --manifest"),
        (["--manifest", "missing.yaml"], "missing.yaml"),
        (["--stretch-days", "0"], "--stretch-days: expected a number of days >= 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, surge_csv, extra, message):
    status, out, err = _run(capsys, "--trace", str(surge_csv), "--fleet", str(TINY_FLEET), *extra)
    assert status == 2 and out == ""
    assert message in err and err.count("\n") == 1, err


def test_an_hpa_cannot_hold_the_schedule(capsys, surge_csv, tmp_path):
    hpa = tmp_path / "hpa.yaml"
    hpa.write_text(
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: chat}\nspec:\n"
        "  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: chat}\n  maxReplicas: 4\n"
    )
    status, _, err = _run(capsys, "--trace", str(surge_csv), "--fleet", str(TINY_FLEET), "--manifest", str(hpa))
    assert status == 2 and "cannot hold cron triggers (an HPA has no schedule)" in err and err.count("\n") == 1


def test_out_never_overwrites_an_input_nor_a_folder(capsys, surge_csv, tmp_path):
    before = surge_csv.read_text()
    for target, message in ((surge_csv, "would overwrite the input"), (tmp_path, "is a directory")):
        status, _, err = _run(capsys, "--trace", str(surge_csv), "--fleet", str(TINY_FLEET), "--out", str(target))
        assert status == 2 and message in err and err.count("\n") == 1
    status, _, err = _run(
        capsys, "--trace", str(surge_csv), "--fleet", str(TINY_FLEET), "--out", str(tmp_path / "no" / "so.yaml")
    )
    assert status == 2 and "does not exist" in err
    assert surge_csv.read_text() == before
