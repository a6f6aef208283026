"""Explorers in the static book are snapshots: values, results and where to run them live; never dead controls."""

from __future__ import annotations

import ipywidgets as widgets
import pytest
from IPython.core.formatters import DisplayFormatter

import planner.charts.viz
from planner.explorers import LIVE_NOTE, SETTINGS_NOTE, register_static_display, static_html
from planner.explorers.drain import drain_explorer
from planner.explorers.kv_bounded_ratio import kv_bounded_ratio_explorer
from planner.explorers.lab import lab_explorer
from planner.readers.fleet import read_fleet
from tests.conftest import DATA_DIR
from tests.simulate_helpers import steady_trace

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


class _Shell:
    """The part of an IPython shell that displays objects."""

    def __init__(self):
        self.display_formatter = DisplayFormatter()


def test_a_snapshot_lists_the_controls_as_shown_and_keeps_the_outputs():
    out = widgets.Output()
    out.outputs = (
        {"output_type": "display_data", "data": {"text/html": "<b>chart</b>", "text/plain": "c"}, "metadata": {}},
    )
    box = widgets.VBox(
        [
            widgets.FloatSlider(value=30.0, min=0, max=900, description="grace (s)"),
            widgets.FloatSlider(value=0.125, readout_format=".1%", description="growth"),
            widgets.IntSlider(value=4096, min=16, max=32768, description="max tokens"),
            widgets.Dropdown(
                options=[("requests in flight", "rif"), ("KV usage", "kv")], value="kv", description="signal"
            ),
            widgets.Checkbox(value=True, description="interpolate <knee>"),
            widgets.Button(description="Simulate"),
            widgets.HTML("<p>cuts <b>12.0%</b></p>"),
            widgets.Label("a < b"),
            out,
        ]
    )
    page = static_html(box)
    assert page.startswith('<div class="planner-explorer-static">') and LIVE_NOTE in page
    assert "<dt>grace (s)</dt><dd>30</dd>" in page  # not ipywidgets' default "30.00"
    assert "<dt>growth</dt><dd>12.5%</dd>" in page  # the explorer's own format
    assert "<dt>max tokens</dt><dd>4096</dd>" in page
    assert "<dt>signal</dt><dd>KV usage</dd>" in page  # the option's label, not its value
    assert "<dt>interpolate &lt;knee&gt;</dt><dd>on</dd>" in page
    assert "Simulate" not in page  # an action, not a value
    assert "<p>cuts <b>12.0%</b></p>" in page and "<p>a &lt; b</p>" in page and "<b>chart</b>" in page
    # Controls come first, then the results, as in the widget.
    assert page.index("max tokens") < page.index("cuts") < page.index("chart")


def test_a_chapter_explorer_snapshot_holds_its_first_state():
    page = static_html(drain_explorer(output_length_shape="max"))
    assert "<dt>grace (s)</dt><dd>30</dd>" in page and "<dt>max tokens</dt><dd>4096</dd>" in page
    assert "needs <b>204.8 s</b>" in page and "cuts <b>100.0%</b>" in page


def test_an_explorer_that_has_computed_nothing_says_so():
    box = widgets.VBox([widgets.BoundedFloatText(value=40.0, description="target"), widgets.HTML(), widgets.Output()])
    page = static_html(box)
    assert SETTINGS_NOTE in page and LIVE_NOTE not in page
    assert "<dt>target</dt><dd>40</dd>" in page


def test_the_lab_explorer_left_to_run_lists_its_settings_without_a_button():
    trace, fleet = steady_trace(0.6, 240.0, 100, 900), read_fleet(DATA_DIR / "fleets" / "seed003-rig.yaml")
    page = static_html(lab_explorer(trace, fleet, run_now=False))
    assert SETTINGS_NOTE in page and "<dt>signal</dt><dd>requests in flight</dd>" in page
    assert "Simulate" not in page


@pytest.mark.parametrize("mode", ["book", "jupyter"])
def test_widgets_display_as_snapshots_only_where_no_jupyter_server_runs(monkeypatch, mode):
    monkeypatch.setattr(planner.charts.viz, "_mode", mode)
    shell = _Shell()
    assert register_static_display(shell) is True
    data, _ = shell.display_formatter.format(kv_bounded_ratio_explorer())
    if mode == "book":
        assert WIDGET_VIEW not in data
        assert 'class="planner-explorer-static"' in data["text/html"] and LIVE_NOTE in data["text/html"]
    else:
        assert WIDGET_VIEW in data


def test_registering_outside_ipython_does_nothing():
    assert register_static_display() is False  # pytest runs no IPython shell
