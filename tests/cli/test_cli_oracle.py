"""Tests for ``planner oracle`` (planner.cli.oracle): the contract, the bounds it prints, and bad input."""

from __future__ import annotations

import json

import pytest

from planner.cli import main
from planner.readers.fleet import read_fleet
from planner.readers.trace import read_trace
from planner.simulate.oracle import oracle_bound
from planner.simulate.traffic import SECONDS_PER_DAY, stretch_trace
from tests.conftest import DATA_DIR, REPO_ROOT

TRACE = DATA_DIR / "traces" / "steady-0.6rps-12min.csv"
NODES_FLEET = REPO_ROOT / "tests" / "data" / "plan" / "slow-replica-nodes.yaml"


@pytest.fixture
def fleet(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text("max_num_seqs: 16\nwarmup_s: 30\nttft_slo_s: 1.0\nusd_per_gpu_hour: 2.5\n")
    return path


def _run(capsys, *argv: str):
    status = main(["oracle", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_json_prints_both_bounds_the_goal_and_how_they_were_computed(capsys, fleet):
    status, out, err = _run(capsys, "--trace", str(TRACE), "--fleet", str(fleet), "--attainment-goal", "0.95", "--json")
    assert status == 0, err
    data = json.loads(out)
    expected = oracle_bound(read_trace(TRACE), read_fleet(fleet), 0.95)
    assert data["attainment_goal_frac"] == 0.95 and data["requests"] == expected.requests
    assert data["missed_requests"] == expected.missed_requests and data["reachable"] is True
    for name, cost in (("instant", expected.instant), ("cold_start", expected.cold_start)):
        assert data[name]["gpu_hours"] == pytest.approx(cost.gpu_hours)
        assert data[name]["cost_usd"] == pytest.approx(cost.cost_usd)
        assert data[name]["peak_replicas"] == cost.peak_replicas
    assert data["cold_start"]["cost_usd"] >= data["instant"]["cost_usd"] > 0
    assert data["cold_start"]["cold_start_s"] == 30.0 and "node_cold_start_s" not in data["cold_start"]
    assert "shortest cold start (30 s)" in data["how_computed"] and "instant bound" in data["how_computed"]


def test_the_table_names_each_bound_and_explains_them(capsys, fleet):
    status, out, _ = _run(capsys, "--trace", str(TRACE), "--fleet", str(fleet))
    assert status == 0
    assert "Oracle for 0.9900 attainment" in out
    assert "instant scaling: cost [$]" in out and "cold start: GPU-hours" in out
    assert "no autoscaler, however quick or far-sighted" in out


def test_a_node_pool_prices_nodes_and_a_stretched_day_is_the_day(capsys):
    status, out, err = _run(capsys, "--trace", str(TRACE), "--fleet", str(NODES_FLEET), "--stretch-day", "--json")
    assert status == 0, err
    data = json.loads(out)
    day = stretch_trace(read_trace(TRACE), 0, duration_s=SECONDS_PER_DAY)
    expected = oracle_bound(day, read_fleet(NODES_FLEET), 0.99)
    assert data["requests"] == len(day)
    assert data["cold_start"]["cost_usd"] == pytest.approx(expected.cold_start.cost_usd)
    # 284 s provisioning + 126 s init + 101 s pull + 60 s weights + 120 s warmup.
    assert data["cold_start"]["node_cold_start_s"] == 691.0 and data["cold_start"]["cold_start_s"] == 180.0


def test_a_goal_no_run_can_reach_is_said_so(capsys, tmp_path):
    # A 1 ms step at batch 1 cannot meet an objective of 0.5 ms: every request must miss.
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("fixed_ms: 1.0\nttft_slo_s: 0.0005\n")
    status, out, _ = _run(capsys, "--trace", str(TRACE), "--fleet", str(fleet))
    assert status == 0 and "No configuration can reach this goal" in out
    status, out, _ = _run(capsys, "--trace", str(TRACE), "--fleet", str(fleet), "--json")
    data = json.loads(out)
    assert data["reachable"] is False and data["cold_start"]["cost_usd"] is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--attainment-goal", "1.5"], "--attainment-goal: expected a fraction between 0 and 1"),
        (["--duration-s", "-1"], "--duration-s: expected a number > 0"),
        (["--stretch-days", "0"], "--stretch-days: expected a number of days >= 1"),
    ],
)
def test_bad_flags_exit_2_with_one_line(capsys, argv, message):
    status, out, err = _run(capsys, "--trace", str(TRACE), *argv)
    assert status == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_run_that_ends_before_the_first_request_exits_2(capsys, tmp_path):
    late = tmp_path / "late.csv"
    late.write_text("arrival_s,input_tokens,output_tokens\n5.0,10,5\n")
    status, _, err = _run(capsys, "--trace", str(late), "--duration-s", "2")
    assert status == 2 and "no request of" in err and "before 2 s" in err


def test_bad_files_exit_2_naming_the_file_and_key(capsys, tmp_path):
    status, _, err = _run(capsys, "--trace", str(tmp_path / "missing.csv"))
    assert status == 2 and "missing.csv" in err and len(err.strip().splitlines()) == 1
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("max_num_seqs: many\n")
    status, _, err = _run(capsys, "--trace", str(TRACE), "--fleet", str(fleet))
    assert status == 2 and "fleet.yaml" in err and "max_num_seqs" in err and len(err.strip().splitlines()) == 1
    bad = tmp_path / "trace.csv"
    bad.write_text("arrival_s,input_tokens,output_tokens\n0.0,10,5\nsoon,10,5\n")
    status, _, err = _run(capsys, "--trace", str(bad))
    assert status == 2 and "trace.csv" in err and len(err.strip().splitlines()) == 1
