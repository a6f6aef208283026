"""Tests for ``planner sweep`` (planner.cli.sweep): the CLI contract, and the sweep on a Dask cluster."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import signal

import pytest

from planner.cli import main
from planner.cli.sweep import read_grid
from planner.readers.fleet import read_fleet
from planner.readers.manifest import load_autoscaler
from planner.readers.trace import read_trace
from planner.simulate.fleet import FleetSpec
from planner.simulate.oracle import oracle_bound, oracle_curve
from planner.simulate.sweep import run_sweep, summarize
from tests.conftest import DATA_DIR
from tests.simulate_helpers import poisson_trace, scaled_object

IN_FLIGHT = "sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting)"
GRID = "target: [4, 8, 16]\nmin_replicas: [1, 2]\nscale_down_window_s: [0, 60]\n"


@pytest.fixture
def files(tmp_path):
    trace = tmp_path / "trace.csv"
    rows = [f"{i * 0.25:.3f},200,240" for i in range(480)]
    trace.write_text("arrival_s,input_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    manifest = tmp_path / "so.yaml"
    manifest.write_text(scaled_object("chat", IN_FLIGHT, 8, min_replicas=1, max_replicas=4))
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("max_num_seqs: 16\nwarmup_s: 30\nttft_slo_s: 1.0\n")
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    return tmp_path, trace, manifest, fleet, grid


def _run(capsys, args):
    status = main(args)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_json_has_front_cheapest_and_every_result(capsys, files):
    _, trace, manifest, fleet, grid = files
    args = [
        "sweep",
        "--trace",
        str(trace),
        "--manifest",
        str(manifest),
        "--fleet",
        str(fleet),
        "--grid",
        str(grid),
        "--attainment-goal",
        "0.9",
        "--json",
    ]
    status, out, err = _run(capsys, args)
    assert status == 0, err
    payload = json.loads(out)
    assert payload["configurations"] == 12 and len(payload["results"]) == 12
    assert [r["index"] for r in payload["results"]] == list(range(12))
    front = payload["pareto_front"]
    assert front and all(
        a["cost_usd"] < b["cost_usd"] and a["slo_attainment_frac"] < b["slo_attainment_frac"]
        for a, b in itertools.pairwise(front)
    )
    best = payload["cheapest_meeting_goal"]
    assert best["slo_attainment_frac"] >= 0.9
    assert best["cost_usd"] == min(r["cost_usd"] for r in payload["results"] if r["slo_attainment_frac"] >= 0.9)
    assert _run(capsys, args)[1] == out  # deterministic


def test_json_reports_the_oracle_and_each_configurations_regret(capsys, files):
    _, trace_path, manifest, fleet_path, grid = files
    base = ["sweep", "--trace", str(trace_path), "--manifest", str(manifest), "--fleet", str(fleet_path)]
    status, out, err = _run(capsys, [*base, "--grid", str(grid), "--attainment-goal", "0.9", "--json"])
    assert status == 0, err
    payload = json.loads(out)
    trace, fleet = read_trace(trace_path), read_fleet(fleet_path)
    assert payload["oracle_cost_usd"] == pytest.approx(oracle_bound(trace, fleet, 0.9).cold_start.cost_usd)
    curve = oracle_curve(trace, fleet)
    for r in payload["results"]:
        # Its cost less the oracle's at its own attainment, never below 0; the front's rows carry it too.
        assert r["regret_usd"] == pytest.approx(r["cost_usd"] - curve.cold_start_cost_usd_at(r["slo_attainment_frac"]))
        assert r["regret_usd"] >= -1e-9
        if r["slo_attainment_frac"] >= 0.9:
            assert r["cost_usd"] >= payload["oracle_cost_usd"]
    assert all("regret_usd" in r for r in payload["pareto_front"])


def test_a_grid_of_cold_starts_holds_each_setting_to_its_own_oracle(capsys, files):
    folder, _, manifest, fleet_path, _ = files
    # A request every 20 s: a replica kept through the lulls costs more the longer its cold start.
    trace_path = folder / "sparse.csv"
    trace_path.write_text("arrival_s,input_tokens,output_tokens\n" + "".join(f"{20 * i},200,240\n" for i in range(30)))
    grid = folder / "warmups.yaml"
    grid.write_text("target: [8]\nwarmup_s: [0, 120]\n")
    argv = ["sweep", "--trace", str(trace_path), "--manifest", str(manifest), "--fleet", str(fleet_path)]
    status, out, err = _run(capsys, [*argv, "--grid", str(grid), "--attainment-goal", "0.9", "--json"])
    assert status == 0, err
    payload = json.loads(out)
    trace, fleet = read_trace(trace_path), read_fleet(fleet_path)
    bounds = [oracle_bound(trace, dataclasses.replace(fleet, warmup_s=w), 0.9).cold_start.cost_usd for w in (0, 120)]
    assert bounds[0] < bounds[1]
    assert payload["oracle_cost_usd"] == pytest.approx(bounds[0])  # below every setting's own
    for r, warmup in zip(payload["results"], (0.0, 120.0), strict=True):
        own = oracle_curve(trace, dataclasses.replace(fleet, warmup_s=warmup))
        assert r["regret_usd"] == pytest.approx(r["cost_usd"] - own.cold_start_cost_usd_at(r["slo_attainment_frac"]))
        assert r["regret_usd"] >= 0


def test_table_names_the_front_and_the_cheapest(capsys, files):
    _, trace, manifest, fleet, grid = files
    status, out, err = _run(
        capsys,
        [
            "sweep",
            "--trace",
            str(trace),
            "--manifest",
            str(manifest),
            "--fleet",
            str(fleet),
            "--grid",
            str(grid),
            "--attainment-goal",
            "0.5",
        ],
    )
    assert status == 0
    assert "Pareto front of 12 configurations" in out and "Cheapest meeting 0.5000: #" in out
    assert "over the oracle)" in out and "No setting can cost less than $" in out
    assert "sweep" in err  # the progress bar goes to stderr


@pytest.mark.parametrize(
    ("grid_text", "message"),
    [
        ("target: [4]\nwarmup: [30]\n", "unknown grid key 'warmup'"),
        ("target: [four]\n", "target: expected a number"),
        ("target: [4\n", "not valid YAML"),
        ("min_replicas: [3]\nmax_replicas: [2]\n", "grid point 0 (min_replicas=3, max_replicas=2)"),
        ("signal: ['histogram_quantile(0.9, foo)']\n", "cannot be simulated"),
    ],
)
def test_bad_grid_exits_2_with_one_line(capsys, files, grid_text, message):
    folder, trace, manifest, _, grid = files
    grid.write_text(grid_text)
    before = sorted(p.name for p in folder.iterdir())
    status, out, err = _run(capsys, ["sweep", "--trace", str(trace), "--manifest", str(manifest), "--grid", str(grid)])
    assert status == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in folder.iterdir()) == before


def test_a_flap_limit_changes_the_cheapest_and_is_reported(capsys, files):
    # A quarter hour of growing Poisson traffic; with no scale-down window the cheapest setting flaps.
    folder, _, manifest, _, grid = files
    # The scenario was chosen for a replica whose prefill is folded into its step time.
    fleet = folder / "fleet-no-prefill.yaml"
    fleet.write_text("max_num_seqs: 16\nwarmup_s: 30\nttft_slo_s: 1.0\nprefill_ms_per_token: 0.0\n")
    scenario = DATA_DIR / "scenarios" / "plan_half_hour.yaml"
    grid.write_text("target: [16, 32]\nmin_replicas: [1, 2]\nscale_down_window_s: [0, 300]\n")
    base = [
        "sweep",
        "--trace",
        str(scenario),
        "--manifest",
        str(manifest),
        "--fleet",
        str(fleet),
        "--grid",
        str(grid),
        "--duration-s",
        "900",
        "--attainment-goal",
        "0.5",
        "--json",
    ]
    free = json.loads(_run(capsys, base)[1])
    limit = free["cheapest_meeting_goal"]["flap_cycles"] - 1
    assert limit >= 0, "the cheapest configuration must flap on this trace"
    limited = json.loads(_run(capsys, [*base, "--max-flap-cycles", str(limit)])[1])
    assert limited["max_flap_cycles"] == limit and free["max_flap_cycles"] is None
    best = limited["cheapest_meeting_goal"]
    assert best is None or (
        best["flap_cycles"] <= limit and best["cost_usd"] >= free["cheapest_meeting_goal"]["cost_usd"]
    )
    table = _run(capsys, [arg for arg in base if arg != "--json"] + ["--max-flap-cycles", str(limit)])[1]
    assert f"Cheapest meeting 0.5000 within {limit} flap cycles: #" in table and "flap cycles" in table
    status, _, err = _run(capsys, [*base, "--max-flap-cycles", "-1"])
    assert status == 2 and err.count("\n") == 1 and "--max-flap-cycles" in err


def test_stretch_day_sweeps_a_day_of_the_trace(capsys, files):
    _, trace, manifest, fleet, _ = files
    grid = trace.parent / "one.yaml"
    grid.write_text("min_replicas: [1]\n")
    args = [
        "sweep",
        "--trace",
        str(trace),
        "--manifest",
        str(manifest),
        "--fleet",
        str(fleet),
        "--grid",
        str(grid),
        "--stretch-day",
        "--json",
    ]
    day = json.loads(_run(capsys, args)[1])["results"][0]
    assert day["gpu_hours"] >= 24.0  # one pod at least, all day
    assert json.loads(_run(capsys, [*args, "--seed", "1"])[1])["results"][0] != day


def test_bad_goal_and_trace_exit_2(capsys, files):
    _, trace, manifest, _, grid = files
    status, _, err = _run(
        capsys,
        ["sweep", "--trace", str(trace), "--manifest", str(manifest), "--grid", str(grid), "--attainment-goal", "99"],
    )
    assert status == 2 and "--attainment-goal" in err
    trace.write_text("arrival_s,input_tokens,output_tokens\n2,10,10\n1,10,10\n")
    status, _, err = _run(capsys, ["sweep", "--trace", str(trace), "--manifest", str(manifest), "--grid", str(grid)])
    assert status == 2 and "row 2: arrival_s goes back in time" in err  # the shared trace reader numbers data rows


@pytest.mark.parametrize("timeout", ["0", "-1", "nan"])
def test_a_connect_timeout_that_is_not_a_positive_number_exits_2(capsys, files, timeout):
    _, trace, manifest, _, grid = files
    argv = ["sweep", "--trace", str(trace), "--manifest", str(manifest), "--grid", str(grid)]
    status, out, err = _run(capsys, [*argv, "--connect-timeout-s", timeout])
    assert status == 2 and out == ""
    assert f"--connect-timeout-s: expected a number of seconds > 0, got {float(timeout)}" in err
    assert err.count("\n") == 1


def test_unreachable_scheduler_exits_2(capsys, files):
    _, trace, manifest, _, grid = files
    status, _, err = _run(
        capsys,
        [
            "sweep",
            "--trace",
            str(trace),
            "--manifest",
            str(manifest),
            "--grid",
            str(grid),
            "--scheduler",
            "tcp://127.0.0.1:9",
            "--connect-timeout-s",
            "0.5",
        ],
    )
    assert status == 2 and "cannot reach the Dask scheduler" in err
    assert "within 0.5 s" in err and err.count("\n") == 1


def test_dask_cluster_gives_the_local_results_even_when_a_worker_is_killed(files):
    distributed = pytest.importorskip("distributed")
    _, _, manifest_path, _, grid = files
    trace = poisson_trace(lambda t: 2.0 if t < 60 else 12.0, 150.0, 200, 240, seed=2)
    autoscaler = load_autoscaler(manifest_path)
    fleet = FleetSpec(warmup_s=20.0, warmup_distribution="lognormal", warmup_spread_s=10.0, seed=5)
    points = read_grid(grid)
    local = run_sweep(trace, autoscaler, fleet, points, chunk_size=1, progress=False)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=50
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        remote = run_sweep(trace, autoscaler, fleet, points, client=client, chunk_size=1, progress=False)
        assert remote == local
        # Kill one worker's process (SIGKILL, no goodbye) as soon as the first chunk is in.
        pids = client.run(os.getpid)
        arrived = []

        def kill_once(number):
            arrived.append(number)
            if len(arrived) == 1:
                os.kill(next(iter(pids.values())), signal.SIGKILL)

        survived = run_sweep(
            trace, autoscaler, fleet, points, client=client, chunk_size=1, progress=False, on_chunk=kill_once
        )
        assert len(arrived) == len(points) and sorted(arrived) == list(range(len(points)))
        assert survived == local
        assert next(iter(pids.values())) not in client.run(os.getpid).values()  # that worker really died
        assert summarize(survived, 0.9) == summarize(local, 0.9)


def test_start_reaches_every_configuration(capsys, files):
    from tests.simulate_helpers import cron_scaled_object

    tmp_path, trace, _, fleet, _ = files
    manifest = tmp_path / "cron.yaml"
    manifest.write_text(
        cron_scaled_object("chat", IN_FLIGHT, 8, [("0 9 * * *", "0 10 * * *", "UTC", 3)], max_replicas=4)
    )
    grid = tmp_path / "cron-grid.yaml"
    grid.write_text("min_replicas: [1, 2]\n")
    args = ["sweep", "--trace", str(trace), "--manifest", str(manifest), "--fleet", str(fleet), "--grid", str(grid)]
    peaks = {}
    for start in ("2024-01-01T08:00Z", "2024-01-01T09:00Z"):
        status, out, err = _run(capsys, [*args, "--start", start, "--json"])
        assert status == 0, err
        peaks[start] = [result["peak_replicas"] for result in json.loads(out)["results"]]
    assert peaks == {"2024-01-01T08:00Z": [1, 2], "2024-01-01T09:00Z": [3, 3]}


def test_signal_and_target_refuse_a_cron_first_trigger(capsys, files):
    tmp_path, trace, _, fleet, _ = files
    manifest = tmp_path / "cron-first.yaml"
    manifest.write_text(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: chat}\nspec:\n"
        "  scaleTargetRef: {name: chat}\n  minReplicaCount: 1\n  pollingInterval: 15\n  triggers:\n"
        "  - type: cron\n    metadata: {start: 0 9 * * *, end: 0 10 * * *, timezone: UTC, desiredReplicas: '3'}\n"
        f"  - type: prometheus\n    metadata: {{query: '{IN_FLIGHT}', threshold: '8'}}\n"
    )
    grid = tmp_path / "target-grid.yaml"
    grid.write_text("target: [4, 8]\n")
    status, _, err = _run(
        capsys,
        ["sweep", "--trace", str(trace), "--manifest", str(manifest), "--fleet", str(fleet), "--grid", str(grid)],
    )
    assert status == 2 and "the first trigger is a cron trigger" in err
