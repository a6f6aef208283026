"""Tests for ``planner simulate`` (planner.cli.simulate and planner.readers.fleet)."""

from __future__ import annotations

import json
import re

import pytest

from planner.cli import main
from planner.errors import PlannerInputError
from tests.simulate_helpers import scaled_object

REQUIRED_KEYS = (
    "slo_attainment_frac",
    "cost_usd",
    "gpu_hours",
    "scale_events",
    "peak_replicas",
    "peak_waiting",
    "cut_generations",
    "flap_cycles",
)


@pytest.fixture
def files(tmp_path):
    trace = tmp_path / "trace.csv"
    rows = [f"{i * 0.5:.3f},200,240" for i in range(240)]
    trace.write_text("arrival_s,input_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    manifest = tmp_path / "so.yaml"
    manifest.write_text(
        scaled_object(
            "chat", "sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting)", 8, min_replicas=1, max_replicas=4
        )
    )
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "fixed_ms: 6\nper_sequence_ms: 0.25\nmax_num_seqs: 16\nwarmup_s: 30\nusd_per_gpu_hour: 2.5\nttft_slo_s: 1.0\n"
    )
    return tmp_path, trace, manifest, fleet


def _run(capsys, args):
    status = main(args)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_json_has_the_contract_keys_and_the_timeseries_is_written(capsys, files):
    folder, trace, manifest, fleet = files
    out_csv = folder / "series.csv"
    status, out, err = _run(
        capsys,
        [
            "simulate",
            "--trace",
            str(trace),
            "--manifest",
            str(manifest),
            "--fleet",
            str(fleet),
            "--timeseries",
            str(out_csv),
            "--json",
        ],
    )
    assert status == 0, err
    payload = json.loads(out)
    for key in REQUIRED_KEYS:
        assert key in payload
    assert payload["requests"] == 240
    assert payload["completed"] == 240
    assert 0.0 <= payload["slo_attainment_frac"] <= 1.0
    # Billing: $2.50 per GPU-hour from FLEET.yaml.
    assert payload["cost_usd"] == pytest.approx(2.5 * payload["gpu_hours"])
    header = out_csv.read_text().splitlines()[0].split(",")
    assert header[:3] == ["t_s", "demand_tps", "ready_capacity_tps"]
    assert "replicas_requested" in header and "replicas_ready" in header and "waiting" in header
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_same_inputs_give_the_same_json(capsys, files):
    _, trace, manifest, fleet = files
    args = ["simulate", "--trace", str(trace), "--manifest", str(manifest), "--fleet", str(fleet), "--json"]
    first = _run(capsys, args)[1]
    assert _run(capsys, args)[1] == first


@pytest.mark.parametrize(
    ("trace_text", "message"),
    [
        # Rows are counted from the first data row (row 1), as planner.readers.trace names them.
        ("arrival_s,input_tokens,output_tokens\n", "no data rows after the header"),
        ("arrival_s,input_tokens,output_tokens\n1,10,5\n0.5,10,5\n", "row 2: arrival_s goes back in time"),
        ("arrival_s,input_tokens,output_tokens\n0,-3,5\n", "row 1: input_tokens '-3'"),
        ("arrival_s,input_tokens,output_tokens\n0,abc,5\n", "row 1: input_tokens 'abc' is not a whole number"),
        ("time,in,out\n0,1,1\n", "expected a header of arrival_s,input_tokens,output_tokens"),
        ("arrival_s,input_tokens,output_tokens\n0,10,0\n", "row 1: output_tokens '0'"),
    ],
)
def test_bad_trace_exits_2_with_one_line_and_writes_nothing(capsys, files, trace_text, message):
    folder, trace, manifest, _ = files
    trace.write_text(trace_text)
    out_csv = folder / "series.csv"
    status, _out, err = _run(
        capsys, ["simulate", "--trace", str(trace), "--manifest", str(manifest), "--timeseries", str(out_csv)]
    )
    assert status == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert not out_csv.exists()


def test_unknown_fleet_key_is_named(capsys, files):
    _folder, trace, manifest, fleet = files
    fleet.write_text("max_num_seq: 32\n")
    status, _, err = _run(
        capsys, ["simulate", "--trace", str(trace), "--manifest", str(manifest), "--fleet", str(fleet)]
    )
    assert status == 2
    assert "unknown key 'max_num_seq'" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("router: random\n", "router"),
        ("max_num_seqs: 0\n", "max_num_seqs"),
        ("warmup_s: -5\n", "warmup_s"),
        ("scrape_interval_s: 2.5\n", "scrape_interval_s"),
        ("fixed_ms: fast\n", "fixed_ms"),
        ("signals: [1, 2]\n", "signals"),
    ],
)
def test_bad_fleet_values_are_named(capsys, files, text, message):
    _, trace, manifest, fleet = files
    fleet.write_text(text)
    status, _, err = _run(
        capsys, ["simulate", "--trace", str(trace), "--manifest", str(manifest), "--fleet", str(fleet)]
    )
    assert status == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_uninterpretable_query_is_named_with_the_mapping_and_the_mapping_works(capsys, files):
    folder, trace, _, fleet = files
    manifest = folder / "custom.yaml"
    manifest.write_text(scaled_object("chat", "max(inferflow_inflight_requests)", 8, max_replicas=4))
    out_csv = folder / "series.csv"
    status, _, err = _run(
        capsys, ["simulate", "--trace", str(trace), "--manifest", str(manifest), "--timeseries", str(out_csv)]
    )
    assert status == 2
    assert "max(inferflow_inflight_requests)" in err and "signals" in err
    assert not out_csv.exists()
    fleet.write_text(
        "signals:\n  'max(inferflow_inflight_requests)': "
        "'max(vllm:num_requests_running) + max(vllm:num_requests_waiting)'\n"
    )
    status, _, err = _run(
        capsys, ["simulate", "--trace", str(trace), "--manifest", str(manifest), "--fleet", str(fleet), "--json"]
    )
    assert status == 0, err


def test_timeseries_never_overwrites_an_input(capsys, files):
    _, trace, manifest, _ = files
    before = trace.read_text()
    status, _, err = _run(
        capsys, ["simulate", "--trace", str(trace), "--manifest", str(manifest), "--timeseries", str(trace)]
    )
    assert status == 2 and "overwrite" in err
    assert trace.read_text() == before


def test_every_real_manifest_is_simulated_or_refused_by_name(capsys, files, shared_dir):
    _, trace, _, _ = files
    accepted = 0
    for path in sorted((shared_dir / "real-world" / "manifests").glob("*.yaml")):
        status, out, err = _run(
            capsys, ["simulate", "--trace", str(trace), "--manifest", str(path), "--duration-s", "30", "--json"]
        )
        assert status in (0, 2), path
        if status == 0:
            accepted += 1
            assert json.loads(out)["requests"] > 0
        else:
            assert len(err.strip().splitlines()) == 1, (path, err)
            assert "Traceback" not in err
    assert accepted >= 15


def test_bundled_fleet_samples_load_and_match_the_tests():
    from planner.readers.fleet import read_fleet
    from tests.conftest import DATA_DIR
    from tests.simulate.test_simulate_missions import LAB
    from tests.simulate.test_simulate_seed003 import RIG

    rig = read_fleet(DATA_DIR / "fleets" / "seed003-rig.yaml")
    assert (rig.replica, rig.warmup_s, rig.ttft_slo_s) == (RIG.replica, RIG.warmup_s, RIG.ttft_slo_s)
    lab = read_fleet(DATA_DIR / "fleets" / "lab-8b.yaml")
    assert (lab.replica, lab.warmup_s, lab.ttft_slo_s, lab.usd_per_gpu_hour) == (
        LAB.replica,
        LAB.warmup_s,
        LAB.ttft_slo_s,
        LAB.usd_per_gpu_hour,
    )


def test_a_bom_is_accepted_and_a_binary_file_is_refused(capsys, files):
    _folder, trace, manifest, _ = files
    trace.write_bytes(b"\xef\xbb\xbfarrival_s,input_tokens,output_tokens\n0,10,5\n")
    assert _run(capsys, ["simulate", "--trace", str(trace), "--manifest", str(manifest), "--json"])[0] == 0
    trace.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    status, _, err = _run(capsys, ["simulate", "--trace", str(trace), "--manifest", str(manifest)])
    assert status == 2 and "not a UTF-8 text file" in err


def test_timeseries_into_a_directory_is_refused_before_running(capsys, files):
    folder, trace, manifest, _ = files
    status, _, err = _run(
        capsys, ["simulate", "--trace", str(trace), "--manifest", str(manifest), "--timeseries", str(folder)]
    )
    assert status == 2 and "is a directory" in err


@pytest.fixture
def cron_files(files):
    from tests.simulate_helpers import cron_scaled_object

    tmp_path, trace, _, fleet = files
    manifest = tmp_path / "cron.yaml"
    window = ("0 9 * * MON-FRI", "0 17 * * MON-FRI", "America/New_York", 3)
    manifest.write_text(cron_scaled_object("chat", "sum(vllm:num_requests_waiting)", 8, [window], max_replicas=4))
    return trace, manifest, fleet


def _simulate(capsys, trace, manifest, fleet, *extra):
    status = main(["simulate", "--trace", str(trace), "--manifest", str(manifest), "--fleet", str(fleet), *extra])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    return json.loads(captured.out)


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_start_puts_the_trace_on_the_calendar(capsys, cron_files, engine):
    trace, manifest, fleet = cron_files
    default = _simulate(capsys, trace, manifest, fleet, "--engine", engine, "--json")
    assert default["start"] == "2024-01-01T00:00:00+00:00" and default["peak_replicas"] == 1  # Monday 00:00 UTC
    # 09:00 in New York in June is 13:00 UTC: a trace starting at 12:59:30 UTC meets the window 30 s in.
    opened = _simulate(capsys, trace, manifest, fleet, "--engine", engine, "--start", "2024-06-03T12:59:30Z", "--json")
    assert opened["start"] == "2024-06-03T12:59:30+00:00"
    assert opened["peak_replicas"] == 3 and opened["events"][0] == {"t_s": 30.0, "from": 1, "to": 3}
    local = _simulate(
        capsys, trace, manifest, fleet, "--engine", engine, "--start", "2024-06-03T08:59:30-04:00", "--json"
    )
    assert local["events"] == opened["events"]
    saturday = _simulate(capsys, trace, manifest, fleet, "--start", "2024-06-08T12:59:30", "--json")
    assert saturday["peak_replicas"] == 1


@pytest.mark.parametrize("text", ["monday", "2024-13-01", "12:00"])
def test_a_bad_start_exits_2_with_one_line(capsys, cron_files, text):
    trace, manifest, _ = cron_files
    status = main(["simulate", "--trace", str(trace), "--manifest", str(manifest), "--start", text])
    err = capsys.readouterr().err
    assert status == 2 and "--start: expected an ISO date and time" in err and len(err.strip().splitlines()) == 1


def test_the_token_budget_is_read_null_or_whole_and_refused_below_max_num_seqs(tmp_path):
    from planner.readers.fleet import fleet_mapping, fleet_spec_from_mapping, read_fleet

    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("max_num_batched_tokens: 8192\nprefill_ms_per_token: 0.03\n")
    spec = read_fleet(fleet)
    assert (spec.replica.max_num_batched_tokens, spec.replica.chunked_prefill) == (8192, True)
    fleet.write_text("max_num_batched_tokens: null\n")
    assert read_fleet(fleet).replica.max_num_batched_tokens is None
    assert fleet_spec_from_mapping(fleet_mapping(read_fleet(fleet))).replica == read_fleet(fleet).replica
    for text, message in (
        (
            "max_num_batched_tokens: 32\nmax_num_seqs: 64\n",
            "max_num_batched_tokens: got 32; expected a whole number of at least max_num_seqs (64)",
        ),
        ("max_num_batched_tokens: 2048.5\n", "max_num_batched_tokens: expected a whole number"),
    ):
        fleet.write_text(text)
        with pytest.raises(PlannerInputError, match=re.escape(message)):
            read_fleet(fleet)
