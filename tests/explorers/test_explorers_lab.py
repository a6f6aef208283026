"""Tests for planner.explorers.lab and planner.explorers.flapping: a change re-runs the planner."""

from __future__ import annotations

import html
import re

from planner.explorers.flapping import FLAPPING_SIGNALS, flapping_explorer
from planner.explorers.lab import lab_explorer, simulate_setting
from planner.readers.fleet import read_fleet
from tests.conftest import DATA_DIR
from tests.simulate_helpers import steady_trace

TRACE = steady_trace(0.6, 240.0, 100, 900)
RIG = read_fleet(DATA_DIR / "fleets" / "seed003-rig.yaml")


def _text(widget) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", widget.value)).split())


def _controls(box):
    signal, target, low, high, window, button, summary, chart = box.children
    return {
        "signal": signal,
        "target": target,
        "min": low,
        "max": high,
        "window": window,
        "button": button,
        "summary": summary,
        "chart": chart,
    }


def test_summary_is_the_simulators_outcome_for_the_chosen_setting():
    box = _controls(
        lab_explorer(
            TRACE,
            RIG,
            signal="waiting requests",
            target=7.0,
            min_replicas=1,
            max_replicas=3,
            scale_down_window_s=0,
            duration_s=300.0,
        )
    )
    expected = simulate_setting(
        TRACE, RIG, "waiting requests", 7.0, min_replicas=1, max_replicas=3, scale_down_window_s=0, duration_s=300.0
    )
    text = _text(box["summary"])
    assert f"SLO attainment {expected.slo_attainment_frac:.1%}" in text
    assert f"{expected.flap_cycles} flap cycles" in text and f"peak {expected.peak_replicas} replicas" in text


def test_changing_a_control_and_pressing_simulate_re_runs():
    box = _controls(
        lab_explorer(
            TRACE,
            RIG,
            signal="waiting requests",
            target=7.0,
            min_replicas=1,
            max_replicas=3,
            scale_down_window_s=0,
            duration_s=300.0,
        )
    )
    box["min"].value = 3
    box["button"].click()
    floored = simulate_setting(
        TRACE, RIG, "waiting requests", 7.0, min_replicas=3, max_replicas=3, scale_down_window_s=0, duration_s=300.0
    )
    assert floored.peak_replicas == 3
    assert f"${floored.cost_usd:,.2f}" in _text(box["summary"])


def test_moving_a_slider_re_runs_without_the_button():
    box = _controls(
        lab_explorer(
            TRACE,
            RIG,
            signal="waiting requests",
            target=7.0,
            min_replicas=1,
            max_replicas=3,
            scale_down_window_s=0,
            duration_s=300.0,
            run_now=False,
        )
    )
    assert box["summary"].value == ""  # nothing simulated before the first change
    box["min"].value = 3
    floored = simulate_setting(
        TRACE, RIG, "waiting requests", 7.0, min_replicas=3, max_replicas=3, scale_down_window_s=0, duration_s=300.0
    )
    assert f"${floored.cost_usd:,.2f}" in _text(box["summary"])


def test_a_bad_setting_is_reported_in_the_widget_not_raised():
    box = _controls(lab_explorer(TRACE, RIG, min_replicas=1, max_replicas=3, duration_s=120.0, run_now=False))
    box["min"].value, box["max"].value = 3, 2
    assert "Not simulated: min_replicas 3, max_replicas 2" in _text(box["summary"])


def test_flapping_explorer_offers_only_the_experiments_signals():
    box = _controls(flapping_explorer(TRACE, RIG, duration_s=120.0, run_now=False))
    assert box["signal"].options == FLAPPING_SIGNALS
    assert (box["signal"].value, box["target"].value, box["window"].value, box["max"].value) == (
        "waiting requests",
        7.0,
        0,
        3,
    )


def test_summary_counts_one_of_a_thing_in_the_singular(monkeypatch):
    import dataclasses

    import planner.explorers.lab as lab

    real = simulate_setting(
        TRACE, RIG, "waiting requests", 7.0, min_replicas=1, max_replicas=3, scale_down_window_s=0, duration_s=120.0
    )
    single = dataclasses.replace(real, peak_replicas=1, scale_events=1, flap_cycles=1, peak_waiting=1)
    monkeypatch.setattr(lab, "simulate_setting", lambda *args, **kwargs: single)
    text = _text(_controls(lab_explorer(TRACE, RIG, duration_s=120.0))["summary"])
    assert "peak 1 replica, 1 scale event, 1 flap cycle, peak queue 1 request." in text
