import altair as alt
import pandas as pd
import pytest

import planner.charts.viz
from planner.charts.viz import enable, offline_renderer


def _chart():
    return (
        alt.Chart(pd.DataFrame({"x": [1, 2], "y": [3, 4]}))
        .mark_line()
        .encode(x="x", y="y")
        .properties(title="A </script> title")
    )


def test_renderer_is_deterministic_and_offline():
    spec = _chart().to_dict()
    first, second = offline_renderer(spec), offline_renderer(spec)
    assert first == second
    html = first["text/html"]
    assert "vegaEmbed" in html
    assert "cdn" not in html.lower()
    assert "</script> title" not in html  # escaped so it cannot end the script early
    assert first["text/plain"].startswith("<altair chart")


def test_enable_book_mode_selects_the_planner_renderer(monkeypatch):
    monkeypatch.delenv("PLANNER_ALTAIR", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    assert enable() == "book"
    assert alt.renderers.active == planner.charts.viz.RENDERER_NAME
    bundle = _chart()._repr_mimebundle_()
    bundle = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "vegaEmbed" in bundle["text/html"]


def test_enable_detects_jupyterlab(monkeypatch):
    monkeypatch.delenv("PLANNER_ALTAIR", raising=False)
    monkeypatch.setenv("JPY_SESSION_NAME", "/tmp/x.ipynb")
    monkeypatch.setattr(planner.charts.viz, "_has_lab_extras", lambda: False)
    assert enable() == "jupyter"
    assert alt.renderers.active == "default"
    enable("book")


def test_enable_rejects_unknown_mode():
    with pytest.raises(ValueError, match="mode"):
        enable("pdf")


def test_current_mode_is_the_last_enabled_or_the_detected_one(monkeypatch):
    monkeypatch.setattr(planner.charts.viz, "_mode", None)
    monkeypatch.delenv("PLANNER_ALTAIR", raising=False)
    monkeypatch.setenv("JPY_SESSION_NAME", "/tmp/x.ipynb")
    assert planner.charts.viz.current_mode() == "jupyter"
    monkeypatch.delenv("JPY_SESSION_NAME")
    assert planner.charts.viz.current_mode() == "book"
    monkeypatch.setattr(planner.charts.viz, "_has_lab_extras", lambda: False)
    enable("jupyter")
    assert planner.charts.viz.current_mode() == "jupyter"
    enable("book")
    assert planner.charts.viz.current_mode() == "book"


def test_the_snippet_draws_through_the_book_chart_fitting_when_the_page_has_it():
    html = offline_renderer(_chart().to_dict())["text/html"]
    assert "window.plannerCharts ? window.plannerCharts.embed : window.vegaEmbed" in html
