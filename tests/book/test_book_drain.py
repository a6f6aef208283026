"""The drain chapter uses its parameters: a papermill run on other numbers agrees with `planner grace`."""

import dataclasses
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from planner.dynamics.drain import (
    cut_frac,
    drain_window_s,
    empirical_output_lengths,
    output_lengths,
)
from planner.readers.fleet import read_fleet
from planner.readers.manifest import load_autoscaler
from planner.readers.trace import read_trace
from planner.simulate.reference import simulate
from tests.conftest import DATA_DIR
from tests.notebooks import glued, run_chapter

OTHER = dict(
    max_output_tokens=8192,
    itl_ms=35.0,
    ttft_ms=800.0,
    output_length_shape="uniform",
    in_flight_requests=24.0,
    termination_grace_period_s=120.0,
    shutdown_timeout_s=90.0,
    pre_stop_s=15.0,
    planned_pre_stop_s=15.0,
    margin_frac=0.2,
)


def _pasted_as_text(notebook) -> set[str]:
    """Keys the page's prose pastes with ``{glue:text}`` (Sphinx's smart quotes apply to those)."""
    return {
        key
        for cell in notebook.cells
        if cell.cell_type == "markdown"
        for key in re.findall(r"\{glue:text\}`([^`:]+)", cell.source)
    }


def _glued_markdown(notebook, name: str) -> str:
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            scrap = output.get("metadata", {}).get("scrapbook", {})
            if scrap.get("name") == name:
                return output["data"][scrap.get("mime_prefix", "") + "text/markdown"]
    raise AssertionError(f"{name} was not glued")


def test_default_run_is_w37(tmp_path):
    notebook = run_chapter("drain", tmp_path)
    values = glued(notebook)
    # A flag pasted as text renders with an en dash ("--" -> "\u2013"); the page pastes it as inline code.
    assert not [key for key in _pasted_as_text(notebook) if "--" in str(values[key])]
    assert _glued_markdown(notebook, "shutdown_flag_md") == "`--shutdown-timeout=226`"
    assert "{glue:md}`shutdown_flag_md`" in "".join(c.source for c in notebook.cells)
    # The chart's curves follow the planned 10 s preStop, and the text says what that costs at 30 s.
    assert values["planned_pre_stop_s"] == "10" and values["abort_planned_pct"] == "67.6%"
    assert values["longest_s"] == "204.8" and values["window_s"] == "0"
    assert values["cut_now_pct"] == "100.0%" and values["cut_now"] == "40.0"
    assert (values["rec_shutdown_s"], values["rec_grace_s"]) == ("226", "241")  # W38 with a 10 s preStop
    assert values["shutdown_flag"] == "--shutdown-timeout=226"
    # The bundled flapping fleet: untouched defaults cut generations, its own plan (62.5 s) cuts none.
    assert values["sim_current_cut"] > 0 and values["sim_recommended_cut"] == 0
    assert (values["sim_longest_s"], values["sim_rec_shutdown_s"], values["sim_rec_grace_s"]) == ("62.5", 69, 84)


def test_other_inputs_match_the_command_line(tmp_path):
    values = glued(run_chapter("drain", tmp_path, **OTHER))
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "planner.cli",
            "grace",
            "--json",
            "--max-tokens",
            "8192",
            "--itl-ms",
            "35",
            "--ttft-ms",
            "800",
            "--pre-stop-s",
            "15",
            "--margin-frac",
            "0.2",
            "--grace-period-s",
            "120",
            "--shutdown-timeout-s",
            "90",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert cli.returncode == 1, cli.stderr  # the current settings cut generations off
    expected = json.loads(cli.stdout)
    assert values["longest_s"] == f"{expected['drain_time_s']:g}" == "287.52"
    assert values["rec_shutdown_s"] == str(expected["recommended_shutdown_timeout_s"])
    assert values["rec_grace_s"] == str(expected["recommended_termination_grace_period_s"])
    assert values["rec_pre_stop_s"] == str(expected["pre_stop_s"])
    assert values["current_problems"] == len(expected["problems"]) > 0
    assert values["current_verdict"] == "cut generations off"
    # 15 s preStop + 90 s drain, inside the 120 s grace period.
    assert values["window_s"] == "105"
    frac = cut_frac(105.0, output_lengths(8192, "uniform"), 35.0, 800.0)
    assert values["cut_now_pct"] == f"{frac:.1%}" and values["cut_now"] == f"{24 * frac:.1f}"
    # The simulated fleet runs with the page's current settings: the same replay done here agrees.
    rig = dataclasses.replace(
        read_fleet(DATA_DIR / "fleets" / "seed003-rig.yaml"),
        termination_grace_period_s=120.0,
        shutdown_timeout_s=90.0,
        pre_stop_s=15.0,
    )
    run = simulate(
        read_trace(DATA_DIR / "traces" / "steady-0.6rps-12min.csv"),
        load_autoscaler(DATA_DIR / "manifests" / "flapping-waiting.yaml"),
        rig,
        duration_s=900.0,
    )
    assert values["sim_current_cut"] == run.cut_generations
    assert values["sim_current_cost"] == f"{run.cost_usd:.2f}"


def test_a_real_trace_supplies_the_lengths(tmp_path, shared_dir):
    path = shared_dir / "traces" / "AzureLLMInferenceTrace_code.csv"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    values = glued(run_chapter("drain", tmp_path, output_tokens_trace=str(path), pre_stop_s=5.0))
    tokens = read_trace(path).output_tokens
    lengths = empirical_output_lengths(tokens, 4096)
    assert values["lengths_source"] == f"the {tokens.size:,} answers of {path}"
    assert values["mean_tokens"] == f"{np.minimum(tokens, 4096).mean():,.0f}"
    frac = cut_frac(drain_window_s(30.0, 0.0, 5.0), lengths, 50.0)
    assert 0 < frac < 1 and values["cut_now_pct"] == f"{frac:.1%}"
