"""The command line's shared contract, and the `replicas` and `grace` subcommands."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from planner.cli import main


def run_json(capsys, *argv):
    status = main([*argv, "--json"])
    return status, json.loads(capsys.readouterr().out)


def test_replicas_reproduces_the_worked_example(capsys):
    status, out = run_json(
        capsys,
        "replicas",
        "--arrival-rate-rps",
        "10",
        "--duration-s",
        "12",
        "--knee",
        "48",
        "--target",
        "40",
        "--step-arrival-rate-rps",
        "16",
        "--warmup-s",
        "240",
    )
    assert status == 0
    assert out["in_flight_requests"] == 120.0 and out["replicas"] == 3  # W11
    assert out["drain_rate_rps"] == 4.0  # W13
    assert out["backlog_requests"] == 960.0  # W14
    assert out["step_headroom_frac"] == pytest.approx(0.2)  # W15
    assert out["target_for_step"] == pytest.approx(30.0) and out["replicas_for_step"] == 4  # W16


def test_replicas_table_output(capsys):
    assert main(["replicas", "--arrival-rate-rps", "16", "--duration-s", "12", "--knee", "48", "--target", "40"]) == 0
    out = capsys.readouterr().out
    assert "replicas" in out and "5" in out  # W12


def test_grace_flags_the_default_grace_period(capsys):
    status, out = run_json(capsys, "grace", "--max-tokens", "4096", "--itl-ms", "50")
    assert status == 1  # the defaults cut generations off
    assert out["drain_time_s"] == pytest.approx(204.8)  # W37
    assert out["current_ok"] is False and len(out["problems"]) == 2
    assert out["recommended_shutdown_timeout_s"] < out["recommended_termination_grace_period_s"]  # W38


def test_grace_accepts_good_settings(capsys):
    status, out = run_json(
        capsys,
        "grace",
        "--max-tokens",
        "4096",
        "--itl-ms",
        "50",
        "--pre-stop-s",
        "10",
        "--grace-period-s",
        "241",
        "--shutdown-timeout-s",
        "226",
    )
    assert status == 0 and out["current_ok"] is True and out["problems"] == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["grace", "--max-tokens", "4096", "--itl-ms", "-5"], "--itl-ms must be a finite number > 0"),
        (["replicas", "--arrival-rate-rps", "nan", "--duration-s", "12", "--knee", "48"], "--arrival-rate-rps must be"),
        # The maths calls it time_in_system_s; the user typed --duration-s.
        (["replicas", "--arrival-rate-rps", "10", "--duration-s", "0", "--knee", "48"], "--duration-s must be"),
        (
            [
                "replicas",
                "--arrival-rate-rps",
                "10",
                "--duration-s",
                "12",
                "--knee",
                "48",
                "--step-arrival-rate-rps",
                "16",
                "--warmup-s",
                "-3",
            ],
            "--warmup-s must be",
        ),
        (["grace", "--max-tokens", "-5", "--itl-ms", "50"], "--max-tokens must be"),
        (["grace", "--max-tokens", "5", "--itl-ms", "50", "--grace-period-s", "0"], "--grace-period-s must be"),
        # A target above the knee is a mistake, not a negative headroom.
        (
            ["replicas", "--arrival-rate-rps", "10", "--duration-s", "12", "--knee", "48", "--target", "60"],
            "--target 60 is above --knee 48",
        ),
    ],
)
def test_bad_values_exit_2_with_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err and err.count("\n") == 1
    assert "_s must" not in err and "_rps must" not in err  # no internal parameter names


def test_usage_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["replicas", "--arrival-rate-rps", "ten", "--duration-s", "12", "--knee", "48"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage:" not in err
    assert "--arrival-rate-rps" in err and "planner replicas --help" in err


def test_a_run_imports_only_its_own_subcommand():
    # `replicas` needs neither pandas (knee) nor PyYAML (hpa): a run must not import them.
    code = (
        "import sys; from planner.cli import main; "
        "main(['replicas', '--arrival-rate-rps', '10', '--duration-s', '12', '--knee', '48']); "
        "print(sorted(m for m in ('pandas', 'yaml', 'altair', 'importlib.metadata') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_help_and_version_still_list_everything(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in ("replicas", "grace", "kv", "knee", "metrics", "hpa"))
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.startswith("planner ")


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["replicas", "--arrival-rate-rps", "ten"])
    assert exit_info.value.code == 2


def test_console_script_is_installed_and_exits_2_on_bad_input():
    script = shutil.which("planner", path=str(Path(sys.executable).parent))
    assert script, "the planner console script is not installed in this environment"
    result = subprocess.run(
        [script, "grace", "--max-tokens", "-1", "--itl-ms", "50"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "--max-tokens" in result.stderr and "Traceback" not in result.stderr
