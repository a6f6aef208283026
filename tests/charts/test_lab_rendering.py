"""The lab's charts and tables as a reader sees them, drawn in the system Chromium.

Count axes (waiting requests, replicas) read as whole numbers from 0, even when the queue stays
empty: the panels once showed a single tick "0.000000" and no baseline whenever nothing waited.
The configuration tables carry human headers with units and fit the book's text column at 1280 px.
"""

from __future__ import annotations

import os
import re

import pandas as pd
import pytest

from planner.charts.lab import (
    configuration_table_view,
    configuration_timeline_chart,
    configurations_long,
)
from planner.charts.simulation import fleet_timeline_chart
from planner.charts.viz import offline_renderer
from tests.check_built_book import browser_unavailable, chromium, serve
from tests.conftest import REPO_ROOT

VENDOR = REPO_ROOT / "book" / "_vendor" / "vega"


class _Run:
    def __init__(self, timeseries):
        self.timeseries = timeseries


def _empty_queue() -> pd.DataFrame:
    t = [float(i) for i in range(0, 120)]
    return pd.DataFrame(
        {
            "t_s": t,
            "demand_tps": [100.0] * 120,
            "ready_capacity_tps": [400.0] * 120,
            "running": [3] * 120,
            "waiting": [0] * 120,
            "replicas_requested": [2] * 120,
            "replicas_ready": [2] * 120,
            "replicas_live": [2] * 120,
        }
    )


def _charts():
    return {
        "lab": configuration_timeline_chart(configurations_long({"idle": _Run(_empty_queue())})),
        "simulation": fleet_timeline_chart(_empty_queue()),
    }


@pytest.mark.parametrize("name", ["lab", "simulation"])
def test_count_panels_have_integer_ticks_and_a_domain_from_0_to_at_least_1(name):
    spec = _charts()[name].to_dict()
    counts = [
        panel["encoding"]["y"]
        for panel in spec["vconcat"]
        if panel["encoding"]["y"]["title"] in ("Waiting requests", "Replicas")
    ]
    assert len(counts) == 2
    for y in counts:
        assert y["scale"]["domain"] == {"unionWith": [0, 1]}
        assert y["axis"]["format"] == "d" and y["axis"]["tickMinStep"] == 1


@pytest.fixture(scope="module")
def browser():
    missing = browser_unavailable()
    if missing:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"browser tests cannot run in CI: {missing}")
        pytest.skip(missing)
    if not VENDOR.is_dir():
        pytest.skip("book/_vendor not populated; run make setup")
    with chromium() as running:
        yield running


def test_an_empty_queue_is_drawn_with_ticks_0_and_1(browser, tmp_path):
    (tmp_path / "vega").mkdir()
    scripts = ""
    for name in ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js"):
        (tmp_path / "vega" / name).write_bytes((VENDOR / name).read_bytes())
        scripts += f'<script src="vega/{name}"></script>'
    html = offline_renderer(_charts()["lab"].to_dict())["text/html"]
    (tmp_path / "page.html").write_text(f"<html><head>{scripts}</head><body>{html}</body></html>")
    with serve(tmp_path) as base:
        page = browser.new_page()
        page.goto(base + "page.html")
        page.wait_for_selector("svg .role-axis-label text", timeout=20_000)
        # The y axes in panel order: throughput, waiting, replicas.
        labels = page.eval_on_selector_all(
            "svg g.role-axis",
            "axes => axes.map(a => [a.getAttribute('aria-label') || '', "
            "Array.from(a.querySelectorAll('.role-axis-label text')).map(t => t.textContent)])",
        )
        page.close()
    waiting = [ticks for aria, ticks in labels if "Waiting requests" in aria]
    assert waiting == [["0", "1"]], labels
    assert not [t for _, ticks in labels for t in ticks if re.fullmatch(r"-?\d+\.\d{4,}", t)]


TEXT_COLUMN_PX = 690  # the book's article column in a 1280 px window


def _table(window: bool = True) -> pd.DataFrame:
    row = {
        "configuration": "in flight 40, floor 3",
        "slo_attainment_frac": 0.768,
        "cost_usd": 1234.5,
        "gpu_hours": 308.6,
        "mean_replicas": 12.8,
        "peak_replicas": 16,
        "scale_events": 11,
        "flap_cycles": 3,
        "peak_waiting": 1482,
        "cut_generations": 120,
    }
    if window:
        row["window_attainment_frac"] = 0.406
    return pd.DataFrame([row, {**row, "configuration": "GPU utilization 70 %"}]).set_index("configuration")


def test_table_headers_are_words_with_units():
    html = configuration_table_view(_table()).to_html()
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", html)
    assert headers[0] == "Configuration" and len(headers) == 10 and "GPU-hours" not in headers
    assert not [h for h in headers if re.search(r"[a-z]_[a-z]", h)], headers
    assert {"Met the TTFT objective (%)", "Cost ($)", "Peak queue (req.)"} <= set(headers)
    assert ">76.8<" in html and ">1,234.50<" in html and ">1482<" in html


def test_table_fits_the_text_column(browser, tmp_path):
    html = configuration_table_view(_table()).to_html()
    (tmp_path / "table.html").write_text(
        f"<html><body style='margin:0'><article style='width: {TEXT_COLUMN_PX}px'>{html}</article></body></html>"
    )
    with serve(tmp_path) as base:
        page = browser.new_page()
        page.goto(base + "table.html")
        width = page.eval_on_selector("table", "t => t.getBoundingClientRect().width")
        page.close()
    assert width <= TEXT_COLUMN_PX
