"""Tests for planner.cli.traffic: every trace format and the stretched replays through simulate, sweep and plan."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from planner.cli import main
from planner.cli.traffic import add_traffic_arguments
from planner.readers.trace import TRACE_FORMATS
from tests.conftest import DATA_DIR, REPO_ROOT, TEST_DATA_DIR
from tests.simulate_helpers import scaled_object

BURSTGPT = TEST_DATA_DIR / "traces" / "burstgpt-head.csv"
PROMETHEUS = TEST_DATA_DIR / "traces" / "prometheus-request-rate.json"
PLAN_CURRENT = DATA_DIR / "manifests" / "plan_current" / "llama.yaml"


@pytest.fixture
def files(tmp_path):
    trace = tmp_path / "sparse.csv"  # one request every 10 s for 10 minutes: a week of it is about 60,000 requests
    trace.write_text("arrival_s,input_tokens,output_tokens\n" + "".join(f"{i * 10.0},300,120\n" for i in range(60)))
    manifest = tmp_path / "so.yaml"
    manifest.write_text(
        scaled_object(
            "chat", "sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting)", 8, min_replicas=1, max_replicas=4
        )
    )
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("max_num_seqs: 16\nwarmup_s: 30\nusd_per_gpu_hour: 2.5\nttft_slo_s: 1.0\n")
    return tmp_path, trace, manifest, fleet


def _run(capsys, args):
    status = main(args)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _simulate(capsys, trace, manifest, fleet, *extra):
    args = ["simulate", "--trace", str(trace), "--manifest", str(manifest), "--fleet", str(fleet)]
    status, out, err = _run(capsys, [*args, *extra, "--json"])
    assert status == 0, err
    return json.loads(out)


def test_each_new_format_replays_through_simulate(capsys, files, shared_dir):
    _, _, manifest, fleet = files
    burst = _simulate(capsys, BURSTGPT, manifest, fleet, "--trace-model", "GPT-4")
    assert burst["requests"] == 8 and burst["completed"] == 8
    assert _simulate(capsys, BURSTGPT, manifest, fleet)["requests"] == 32  # the failed request is not replayed
    mooncake = shared_dir / "traces" / "mooncake_conversation_trace.jsonl"
    moon = _simulate(capsys, mooncake, manifest, fleet, "--duration-s", "120")
    assert moon["requests"] == sum(1 for line in mooncake.open() if json.loads(line)["timestamp"] < 120_000)
    code = _simulate(capsys, PROMETHEUS, manifest, fleet, "--trace-series", "model_name=code", "--duration-s", "600")
    assert code == _simulate(capsys, PROMETHEUS, manifest, fleet, "--trace-series", "1", "--duration-s", "600")
    assert code != _simulate(
        capsys, PROMETHEUS, manifest, fleet, "--trace-series", "1", "--duration-s", "600", "--seed", "1"
    )
    named = _simulate(
        capsys, PROMETHEUS, manifest, fleet, "--trace-format", "prometheus", "--trace-series", "1", "--duration-s=600"
    )
    assert named == code


def test_stretch_days_1_is_stretch_day_in_simulate_sweep_and_plan(capsys, files):
    folder, trace, manifest, fleet = files
    one = _simulate(capsys, trace, manifest, fleet, "--stretch-days", "1")
    day = _simulate(capsys, trace, manifest, fleet, "--stretch-day")
    assert one == day and one["requests"] > 5000
    grid = folder / "grid.yaml"
    grid.write_text("target: [4, 8]\n")
    sweep = ["sweep", "--trace", str(trace), "--manifest", str(manifest), "--fleet", str(fleet), "--grid", str(grid)]
    outputs = [_run(capsys, [*sweep, *flag, "--json"]) for flag in (["--stretch-days", "1"], ["--stretch-day"])]
    assert outputs[0][0] == 0 and outputs[0][1] == outputs[1][1]
    plan = ["plan", "--trace", str(trace), "--manifest", str(PLAN_CURRENT), "--concurrency-target", "8"]
    plans = [_run(capsys, [*plan, *flag, "--json"]) for flag in (["--stretch-days", "1"], ["--stretch-day"])]
    assert plans[0][0] == 0, plans[0][2]
    assert plans[0][1] == plans[1][1] and json.loads(plans[0][1])["weeks_per_trace"] == 7.0


def test_a_week_in_simulate_and_plan(capsys, files):
    _, trace, manifest, fleet = files
    week = _simulate(capsys, trace, manifest, fleet, "--stretch-days", "7")
    day = _simulate(capsys, trace, manifest, fleet, "--stretch-day")
    assert week["gpu_hours"] >= 7 * 24 and week["requests"] > 5 * day["requests"]
    flat = _simulate(capsys, trace, manifest, fleet, "--stretch-days", "7", "--weekend-drop-frac", "0")
    assert flat["requests"] > week["requests"] * 1.05  # the weekend no longer drops by 30 %
    status, out, err = _run(
        capsys,
        [
            "plan",
            "--trace",
            str(trace),
            "--manifest",
            str(PLAN_CURRENT),
            "--concurrency-target",
            "8",
            "--stretch-days",
            "7",
            "--json",
        ],
    )
    assert status == 0, err
    plan = json.loads(out)
    assert plan["weeks_per_trace"] == 1.0  # seven days replayed are the week itself, not a day repeated
    assert plan["current"]["gpu_hours_per_week"] >= 7 * 24


BAD = [
    pytest.param(
        "trace.jsonl",
        '{"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": [0]}\n{"timestamp": 1}\n',
        [],
        "trace.jsonl: line 2: missing key 'input_length'",
        id="mooncake-missing-key",
    ),
    pytest.param(
        "trace.jsonl",
        '{"timestamp": 5, "input_length": 5, "output_length": 2, "hash_ids": [0]}\n'
        '{"timestamp": 1, "input_length": 5, "output_length": 2, "hash_ids": [0]}\n',
        [],
        "trace.jsonl: line 2: timestamp 1 goes back in time",
        id="mooncake-unsorted",
    ),
    pytest.param(
        "trace.jsonl",
        '{"timestamp": 0, "input_length": 5, "output_length": 0, "hash_ids": [0]}\n',
        [],
        "trace.jsonl: line 1: output_length 0 is not a whole number of tokens >= 1",
        id="mooncake-zero-output",
    ),
    pytest.param(
        "burst.csv",
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,4,x,4,API log\n",
        [],
        "burst.csv: row 1: Response tokens 'x' is not a whole number",
        id="burstgpt-bad-tokens",
    ),
    pytest.param(
        "burst.csv",
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "9,GPT-4,4,1,5,API log\n2,GPT-4,4,1,5,API log\n",
        [],
        "burst.csv: row 2: Timestamp goes back in time",
        id="burstgpt-unsorted",
    ),
    pytest.param(
        "burst.csv",
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n9,GPT-4,4,1,5,API log\n",
        ["--trace-model", "Claude"],
        "burst.csv: Model: no row is 'Claude'; the file has 'GPT-4'",
        id="burstgpt-unknown-model",
    ),
    pytest.param(
        "rate.json",
        '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[0,"1"],[60,"NaN"]]}]}}',
        [],
        "rate.json: data.result[0].values[1]: value 'NaN' is not a rate",
        id="prometheus-nan",
    ),
    pytest.param(
        "rate.json",
        '{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[0,"1"]}]}}',
        [],
        'rate.json: data.resultType: expected "matrix"',
        id="prometheus-vector",
    ),
    pytest.param(
        "rate.json",
        '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[60,"1"],[0,"1"]]}]}}',
        [],
        "rate.json: data.result[0].values[1]: timestamp 0.000 is not after the previous sample's 60.000",
        id="prometheus-unsorted",
    ),
    pytest.param(
        "rate.json",
        '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"pod":"a"},"values":[[0,"1"]]},'
        '{"metric":{"pod":"b"},"values":[[0,"1"]]}]}}',
        [],
        "rate.json: data.result: 2 series",
        id="prometheus-several-series",
    ),
    pytest.param(
        "rate.json",
        '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[0,"1"],[60,"-2"]]}]}}',
        [],
        "rate.json: data.result[0].values[1]: value '-2' is not a request rate",
        id="prometheus-negative",
    ),
    pytest.param(
        "plain.csv",
        "arrival_s,input_tokens,output_tokens\n0,1,2\n",
        ["--trace-model", "GPT-4"],
        "--trace-model: applies to a BurstGPT trace",
        id="model-on-a-canonical-trace",
    ),
    pytest.param(
        "plain.csv",
        "arrival_s,input_tokens,output_tokens\n0,1,2\n",
        ["--trace-series", "0"],
        "--trace-series: applies to a Prometheus export",
        id="series-on-a-canonical-trace",
    ),
    pytest.param(
        "plain.csv",
        "arrival_s,input_tokens,output_tokens\n0,1,2\n",
        ["--mean-output-tokens", "100"],
        "--mean-output-tokens: applies to a rate trace or a Prometheus export",
        id="mean-on-a-canonical-trace",
    ),
    pytest.param(
        "plain.csv",
        "arrival_s,input_tokens,output_tokens\n0,1,2\n",
        ["--trace-format", "burstgpt"],
        "plain.csv: not a BurstGPT trace: it reads as a canonical request trace",
        id="named-format-mismatch",
    ),
    pytest.param(
        "plain.csv",
        "arrival_s,input_tokens,output_tokens\n0,1,2\n1,1,2\n",
        ["--stretch-days", "0"],
        "--stretch-days: expected a number of days >= 1, got 0",
        id="zero-days",
    ),
    pytest.param(
        "plain.csv",
        "arrival_s,input_tokens,output_tokens\n0,1,2\n1,1,2\n",
        ["--stretch-days", "2", "--weekend-drop-frac", "1"],
        "--weekend-drop-frac must be a fraction in [0, 1), got 1.0",
        id="weekend-without-traffic",
    ),
    pytest.param(
        "plain.csv",
        "arrival_s,input_tokens,output_tokens\n0,1,2\n1,1,2\n",
        ["--weekend-drop-frac", "0.2"],
        "--weekend-drop-frac: applies to a replay of --stretch-days N",
        id="weekend-without-days",
    ),
    pytest.param(
        "plain.csv",
        "arrival_s,input_tokens,output_tokens\n0,1,2\n1,1,2\n",
        ["--stretch-day", "--stretch-days", "2"],
        "argument --stretch-days: not allowed with argument --stretch-day",
        id="day-and-days",
    ),
]


@pytest.mark.parametrize(("name", "text", "extra", "message"), BAD)
@pytest.mark.parametrize("command", ["simulate", "sweep", "plan"])
def test_bad_traffic_exits_2_with_one_line(capsys, files, command, name, text, extra, message):
    folder, _, manifest, fleet = files
    trace = folder / name
    trace.write_text(text)
    before = trace.read_bytes()
    grid = folder / "grid.yaml"
    grid.write_text("target: [4, 8]\n")
    args = {
        "simulate": ["simulate", "--manifest", str(manifest), "--fleet", str(fleet)],
        "sweep": ["sweep", "--manifest", str(manifest), "--fleet", str(fleet), "--grid", str(grid)],
        "plan": ["plan", "--manifest", str(PLAN_CURRENT), "--concurrency-target", "8"],
    }[command]
    if message.startswith("argument "):  # argparse's own usage error, also one line and status 2
        with pytest.raises(SystemExit) as info:
            main([*args, "--trace", str(trace), *extra])
        status, err = info.value.code, capsys.readouterr().err
    else:
        status, _, err = _run(capsys, [*args, "--trace", str(trace), *extra])
    assert status == 2
    assert message in err and len(err.strip().splitlines()) == 1
    assert trace.read_bytes() == before


def test_the_readme_documents_every_traffic_flag_and_format():
    parser = argparse.ArgumentParser()
    add_traffic_arguments(parser)
    flags = [a.option_strings[-1] for a in parser._actions if a.option_strings and a.dest != "help"]
    assert len(flags) == 11
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("`planner simulate` replays") : readme.index("`planner plan` is the chapter")]
    missing = [flag for flag in flags if not re.search(re.escape(flag) + r"(?![\w-])", section)]
    assert missing == [], f"README's simulate section does not mention {missing}"
    assert all(f"`{kind}`" in section for kind in TRACE_FORMATS)
