"""The browser check of the built book fails when it should, page by page.

Each test writes a small page with one defect into a temporary folder, serves
it as the real check does, and opens it in the system Chromium.
"""

from __future__ import annotations

import os
from pathlib import Path

import altair as alt
import pandas as pd
import pytest

from planner.viz import offline_renderer
from tests import check_built_book
from tests.check_built_book import browser_unavailable, check_page, chromium, serve
from tests.conftest import REPO_ROOT

VENDOR = REPO_ROOT / "book" / "_vendor" / "vega"


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


def _scripts(folder: Path) -> str:
    """Copy the vendored vega beside the page, as the book serves it."""
    (folder / "vega").mkdir(exist_ok=True)
    tags = []
    for name in ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js"):
        (folder / "vega" / name).write_bytes((VENDOR / name).read_bytes())
        tags.append(f'<script src="vega/{name}"></script>')
    return "".join(tags)


def _chart(width: int = 300, slider_used: bool = True) -> str:
    factor = alt.param(name="factor", value=1, bind=alt.binding_range(min=1, max=4, step=1))
    data = pd.DataFrame({"x": ["a", "b"], "y": [1.0, 2.0]})
    y = alt.Y("scaled:Q", scale=alt.Scale(domain=[0, 8])) if slider_used else alt.Y("y:Q")
    chart = (alt.Chart(data, title="test chart", width=width).mark_bar()
             .encode(x="x:N", y=y).add_params(factor)
             .transform_calculate(scaled="datum.y * factor"))
    return offline_renderer(chart.to_dict())["text/html"]


def _open(browser, folder: Path, body: str, with_vega: bool = True, name: str = "page.html"):
    head = _scripts(folder) if with_vega else ""
    (folder / name).write_text(
        f"<html><head>{head}</head><body><main><article class='bd-article' style='width: 600px'>"
        f"{body}</article></main></body></html>")
    with serve(folder) as base:
        return check_page(browser, base + name, name, screenshot=folder / "shot.png",
                          allowed_origin=base.rstrip("/"))


def test_a_clean_page_passes_and_its_slider_is_moved(browser, tmp_path):
    report = _open(browser, tmp_path, _chart())
    assert report.problems == []
    assert (report.charts, report.sliders) == (1, 1)
    assert (tmp_path / "shot.png").stat().st_size > 0


def test_a_chart_that_is_not_drawn_is_named(browser, tmp_path):
    report = _open(browser, tmp_path, _chart(), with_vega=False)
    assert len(report.problems) == 1
    assert 'chart 1 "test chart" drew no SVG or canvas' in report.problems[0]
    assert "vega-embed is not loaded" in report.problems[0]


def test_a_slider_that_changes_nothing_is_reported(browser, tmp_path):
    report = _open(browser, tmp_path, _chart(slider_used=False))
    assert report.problems == [
        'page.html: chart 1 "test chart": moving slider 1 from 1 to 4 did not change the chart']


def test_a_console_error_and_an_uncaught_exception_are_reported(browser, tmp_path):
    body = "<script>console.error('broken widget');</script><script>undefinedFunction();</script>"
    problems = _open(browser, tmp_path, body, with_vega=False).problems
    assert any("console error: broken widget" in p for p in problems)
    assert any("uncaught error" in p and "undefinedFunction" in p for p in problems)


def test_a_missing_local_file_is_reported(browser, tmp_path):
    problems = _open(browser, tmp_path, '<img src="missing.png">', with_vega=False).problems
    assert any("404" in p for p in problems), problems


def test_a_remote_request_is_blocked_and_reported(browser, tmp_path):
    body = '<img src="https://example.org/logo.png"><script>fetch("https://cdn.example.net/x.js")</script>'
    problems = _open(browser, tmp_path, body, with_vega=False).problems
    remote = [p for p in problems if "requests a non-local URL" in p]
    assert any("https://example.org/logo.png" in p for p in remote)
    assert any("https://cdn.example.net/x.js" in p for p in remote)


def test_an_element_wider_than_the_column_is_named(browser, tmp_path):
    body = "<p>fits</p><table class='steps'><tr><td style='min-width: 900px'>too wide</td></tr></table>"
    problems = _open(browser, tmp_path, body, with_vega=False).problems
    assert len(problems) == 1
    assert "wider than the content column: table.steps" in problems[0]
    assert "column ends at" in problems[0]


def test_a_wide_table_in_its_own_scroller_is_accepted(browser, tmp_path):
    body = "<div style='overflow-x: auto'><table><tr><td style='min-width: 900px'>scrolls</td></tr></table></div>"
    assert _open(browser, tmp_path, body, with_vega=False).problems == []


def test_a_chart_wider_than_the_column_is_reported_even_in_a_scroller(browser, tmp_path):
    # book.css gives charts overflow-x: auto; a chart that needs it is still clipped.
    body = f"<style>.planner-altair {{ overflow-x: auto; }}</style>{_chart(width=900)}"
    problems = _open(browser, tmp_path, body).problems
    assert len(problems) == 1
    assert 'in chart 1 "test chart"' in problems[0]


def test_every_page_of_a_folder_is_opened_with_a_screenshot(browser, tmp_path, capsys):
    (tmp_path / "html" / "book").mkdir(parents=True)
    (tmp_path / "html" / "index.html").write_text(
        '<meta http-equiv="Refresh" content="0; url=book/page.html" />')
    (tmp_path / "html" / "book" / "page.html").write_text(
        "<html><body><main><script>console.error('bad page')</script></main></body></html>")
    assert check_built_book.main(["check", str(tmp_path / "html")], browser) == 1
    err = capsys.readouterr().err.splitlines()
    # The redirect page is checked where it lands, so the bad page is reported for both.
    assert err[0].startswith("book/page.html: console error: bad page (http://127.0.0.1:")
    assert err[1].startswith("index.html: console error: bad page (http://127.0.0.1:")
    assert (tmp_path / "screenshots" / "index.png").is_file()
    assert (tmp_path / "screenshots" / "book" / "page.png").is_file()


def test_without_a_browser_ci_fails_and_a_laptop_skips(tmp_path, monkeypatch, capsys):
    (tmp_path / "index.html").write_text("<html><body>home</body></html>")
    monkeypatch.setattr(check_built_book, "find_chromium", lambda: None)
    monkeypatch.setenv("CI", "true")
    assert check_built_book.main(["check", str(tmp_path)]) == 1
    assert "browser checks cannot run in CI: chromium not found" in capsys.readouterr().err
    monkeypatch.setenv("CI", "")
    assert check_built_book.main(["check", str(tmp_path)]) == 0
    assert "browser checks skipped: chromium not found" in capsys.readouterr().out
