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

from planner.charts.viz import offline_renderer
from tests import check_built_book
from tests.check_built_book import PHONE, browser_unavailable, check_page, chromium, serve
from tests.conftest import REPO_ROOT

VENDOR = REPO_ROOT / "book" / "_vendor" / "vega"
BOOK_JS = REPO_ROOT / "book" / "_js"


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


def _scripts(folder: Path, fit: bool = False) -> str:
    """Copy the vendored vega (and with ``fit`` the book's charts.js) beside the page, as the book serves it."""
    (folder / "vega").mkdir(exist_ok=True)
    tags = []
    for name in ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js"):
        (folder / "vega" / name).write_bytes((VENDOR / name).read_bytes())
        tags.append(f'<script src="vega/{name}"></script>')
    if fit:
        (folder / "charts.js").write_bytes((BOOK_JS / "charts.js").read_bytes())
        tags.append('<script src="charts.js"></script>')
    return "".join(tags)


def _chart(width: int = 300, slider_used: bool = True) -> str:
    factor = alt.param(name="factor", value=1, bind=alt.binding_range(min=1, max=4, step=1))
    data = pd.DataFrame({"x": ["a", "b"], "y": [1.0, 2.0]})
    y = alt.Y("scaled:Q", scale=alt.Scale(domain=[0, 8])) if slider_used else alt.Y("y:Q")
    chart = (
        alt.Chart(data, title="test chart", width=width)
        .mark_bar()
        .encode(x="x:N", y=y)
        .add_params(factor)
        .transform_calculate(scaled="datum.y * factor")
    )
    return offline_renderer(chart.to_dict())["text/html"]


def _open(
    browser,
    folder: Path,
    body: str,
    with_vega: bool = True,
    name: str = "page.html",
    fit: bool = False,
    head: str = "",
    column: str = "width: 600px",
    **options,
):
    head = (_scripts(folder, fit) if with_vega else "") + head
    (folder / name).write_text(
        "<html><head><meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"{head}</head><body style='margin: 0'><main><article class='bd-article' style='{column}'>"
        f"{body}</article></main></body></html>"
    )
    with serve(folder) as base:
        return check_page(
            browser, base + name, name, screenshot=folder / "shot.png", allowed_origin=base.rstrip("/"), **options
        )


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
    assert report.problems == ['page.html: chart 1 "test chart": moving slider 1 from 1 to 4 did not change the chart']


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


def test_every_page_of_a_folder_is_opened_at_both_widths_with_screenshots(browser, tmp_path, capsys):
    (tmp_path / "html" / "book").mkdir(parents=True)
    (tmp_path / "html" / "index.html").write_text('<meta http-equiv="Refresh" content="0; url=book/page.html" />')
    (tmp_path / "html" / "book" / "page.html").write_text(
        "<html><body><main><script>console.error('bad page')</script></main></body></html>"
    )
    assert check_built_book.main(["check", str(tmp_path / "html")], browser) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "console error" in line]
    # The redirect page is checked where it lands, so the bad page is reported for both, at each width.
    assert [line.split(": console error: bad page (")[0] for line in err] == [
        "book/page.html at 1280 px",
        "index.html at 1280 px",
        "book/page.html at 390 px",
        "index.html at 390 px",
    ]
    for width in ("1280", "390"):
        assert (tmp_path / "screenshots" / width / "index.png").is_file()
        assert (tmp_path / "screenshots" / width / "book" / "page.png").is_file()


def test_without_a_browser_given_each_width_runs_in_its_own_process_with_the_same_findings(browser, tmp_path, capsys):
    (tmp_path / "html" / "book").mkdir(parents=True)
    (tmp_path / "html" / "book" / "page.html").write_text(
        "<html><body><main><script>console.error('bad page')</script></main></body></html>"
    )
    stale = tmp_path / "screenshots" / "1280" / "book" / "gone.png"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"")
    assert check_built_book.main(["check", str(tmp_path / "html")]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "console error" in line]
    assert [line.split(": console error: bad page (")[0] for line in err] == [
        "book/page.html at 1280 px",
        "book/page.html at 390 px",
    ]
    assert not stale.exists()  # the last run's screenshots go, each width's by its own process
    for width in ("1280", "390"):
        assert (tmp_path / "screenshots" / width / "book" / "page.png").is_file()


# --------------------------------------------------------------------------- phone width


def _concat_chart(width: int = 260) -> str:
    data = pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [1.0, 3.0, 2.0]})
    factor = alt.param(name="factor", value=1, bind=alt.binding_range(min=1, max=4, step=1))
    base = alt.Chart(data).mark_line().encode(x="x:Q", y=alt.Y("scaled:Q", scale=alt.Scale(domain=[0, 12])))
    left = base.properties(width=width, height=120, title="left").transform_calculate(scaled="datum.y * factor")
    right = base.properties(width=width, height=120, title="right").transform_calculate(scaled="datum.y")
    chart = alt.vconcat(
        alt.hconcat(left, right),
        base.properties(width=2 * width, height=80).transform_calculate(scaled="datum.y"),
        title="concat chart",
    ).add_params(factor)
    return offline_renderer(chart.to_dict())["text/html"]


def _legend_chart() -> str:
    """A long title, a legend on the right with long labels, a long x-axis title: none shrinks with the plot."""
    data = pd.DataFrame(
        {
            "x": [1.0, 2.0, 1.0, 2.0],
            "y": [1.0, 2.0, 2.0, 1.0],
            "series": ["requests in flight per replica, summed"] * 2 + ["KV cache usage, averaged"] * 2,
        }
    )
    factor = alt.param(name="factor", value=1, bind=alt.binding_range(min=1, max=4, step=1))
    chart = (
        alt.Chart(
            data,
            title="A title far longer than a phone is wide, as chart titles in the book are",
            width=500,
            height=200,
        )
        .mark_line()
        .encode(
            x=alt.X("x:Q", title="Seconds after the step, until the fleet has caught up"),
            y=alt.Y("scaled:Q", scale=alt.Scale(domain=[0, 8])),
            color=alt.Color("series:N", legend=alt.Legend(labelLimit=0)),
        )
        .add_params(factor)
        .transform_calculate(scaled="datum.y * factor")
    )
    return offline_renderer(chart.to_dict())["text/html"]


_FULL_COLUMN = "width: auto; padding: 0 16px"


def test_at_phone_width_a_chart_too_wide_for_the_column_is_reported(browser, tmp_path):
    problems = _open(browser, tmp_path, _chart(width=560), column=_FULL_COLUMN, viewport=PHONE).problems
    assert problems and all('in chart 1 "test chart"' in p for p in problems)


@pytest.mark.parametrize("chart", ["single", "concat", "legend"])
def test_charts_js_fits_every_kind_of_chart_into_a_phone_column_and_keeps_its_slider(browser, tmp_path, chart):
    body = {"single": _chart(width=560), "concat": _concat_chart(), "legend": _legend_chart()}[chart]
    report = _open(browser, tmp_path, body, fit=True, column=_FULL_COLUMN, viewport=PHONE)
    assert report.problems == []
    assert (report.charts, report.sliders) == (1, 1)


def _drawn_layout(browser, folder: Path, body: str, viewport) -> dict:
    """How charts.js drew the page's one chart: its layout mark, its scale and its width in px."""
    (folder / "layout.html").write_text(
        f"<html><head>{_scripts(folder, fit=True)}</head><body><main><article class='bd-article'>"
        f"{body}</article></main></body></html>"
    )
    context = browser.new_context(viewport={"width": viewport.width, "height": viewport.height})
    try:
        with serve(folder) as base:
            page = context.new_page()
            page.goto(base + "layout.html")
            page.wait_for_function(
                "() => ['fits', 'too-wide'].includes(document.querySelector('.planner-altair').dataset.layout)"
            )
            return page.evaluate(
                "() => { const el = document.querySelector('.planner-altair');"
                " return {layout: el.dataset.layout, scale: el.dataset.scale || null,"
                " width: el.querySelector('svg, canvas').getBoundingClientRect().width,"
                " panels: el.querySelectorAll('.mark-line').length}; }"
            )
    finally:
        context.close()


def test_charts_js_leaves_a_chart_that_fits_as_its_author_drew_it(browser, tmp_path):
    drawn = _drawn_layout(browser, tmp_path, _chart(width=300), check_built_book.DESKTOP)
    assert drawn["layout"] == "fits" and drawn["scale"] is None
    assert 300 < drawn["width"] < 420  # the plot's 300 px and its axes


def test_charts_js_stacks_side_by_side_panels_on_a_phone(browser, tmp_path):
    drawn = _drawn_layout(browser, tmp_path, _concat_chart(), PHONE)
    assert drawn["layout"] == "fits" and float(drawn["scale"]) < 1
    assert drawn["width"] <= PHONE.width
    desktop = _drawn_layout(browser, tmp_path, _concat_chart(), check_built_book.DESKTOP)
    assert desktop["layout"] == "fits" and desktop["scale"] is None and desktop["width"] > 520


def test_charts_js_refits_when_the_window_widens_and_keeps_the_slider_where_it_was(browser, tmp_path):
    (tmp_path / "resize.html").write_text(
        f"<html><head>{_scripts(tmp_path, fit=True)}</head><body><main><article class='bd-article'>"
        f"{_chart(width=560)}</article></main></body></html>"
    )
    context = browser.new_context(viewport={"width": PHONE.width, "height": PHONE.height})
    state = (
        "() => { const el = document.querySelector('.planner-altair');"
        " return [el.dataset.layout, el.dataset.scale || null, el.querySelector('input[type=range]').value]; }"
    )
    settled = "() => ['fits', 'too-wide'].includes(document.querySelector('.planner-altair').dataset.layout)"
    try:
        with serve(tmp_path) as base:
            page = context.new_page()
            page.goto(base + "resize.html")
            page.wait_for_function(settled)
            layout, scale, _ = page.evaluate(state)
            assert layout == "fits" and float(scale) < 1
            page.evaluate(
                "() => { const input = document.querySelector('input[type=range]'); input.value = '3';"
                " input.dispatchEvent(new Event('input', {bubbles: true})); }"
            )
            page.set_viewport_size({"width": 1280, "height": 900})
            page.wait_for_function("() => !document.querySelector('.planner-altair').dataset.scale", timeout=5_000)
            page.wait_for_function(settled)
            assert page.evaluate(state) == ["fits", None, "3"]
    finally:
        context.close()


def test_long_inline_code_widens_a_phone_page_unless_the_book_css_wraps_it(browser, tmp_path):
    body = (
        "<p>Set <code class='docutils literal notranslate'><span class='pre long'>"
        "--horizontal-pod-autoscaler-downscale-stabilization-window-duration</span></code> first.</p>"
    )
    _copy_book_css(tmp_path)
    sphinx = "<style>span.pre { hyphens: none; white-space: nowrap; }</style>"  # Sphinx's basic.css
    bare = _open(browser, tmp_path, body, with_vega=False, column=_FULL_COLUMN, viewport=PHONE, head=sphinx).problems
    assert any("wider than the content column: code.docutils.literal" in p for p in bare), bare
    styled = _open(
        browser,
        tmp_path,
        body,
        with_vega=False,
        column=_FULL_COLUMN,
        viewport=PHONE,
        head=sphinx + "<link rel='stylesheet' href='book.css'>",
        name="styled.html",
    )
    assert styled.problems == []


def test_a_parameters_cell_wraps_its_unit_comments_and_other_code_keeps_its_lines(browser, tmp_path):
    _copy_book_css(tmp_path)
    line = 'trace_path: str = "../data/traces/steady.csv"  # ' + "a request trace, a rate trace or a scenario " * 4
    cells = "".join(
        f"<div class='cell{tag}'><div class='cell_input'><pre>{line}</pre></div></div>"
        for tag in (" tag_parameters", "")
    )
    (tmp_path / "page.html").write_text(
        "<html><head><link rel='stylesheet' href='book.css'></head><body><main>"
        f"<article class='bd-article' style='width: 600px'>{cells}</article></main></body></html>"
    )
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto((tmp_path / "page.html").as_uri())
        overflow = page.evaluate("() => [...document.querySelectorAll('pre')].map(p => p.scrollWidth > p.clientWidth)")
    finally:
        page.close()
    assert overflow == [False, True]


def _copy_book_css(folder: Path) -> None:
    (folder / "book.css").write_bytes((BOOK_JS / "book.css").read_bytes())


def test_a_wide_output_table_scrolls_in_its_own_box_with_the_book_css(browser, tmp_path):
    _copy_book_css(tmp_path)
    body = (
        "<div class='cell_output'><div class='output text_html'><table><tr>"
        + "<td>snake_case_column_name</td>" * 20
        + "</tr></table></div></div>"
    )
    bare = _open(browser, tmp_path, body, with_vega=False, column=_FULL_COLUMN, viewport=PHONE).problems
    assert any("wider than the content column: table" in p for p in bare), bare
    styled = _open(
        browser,
        tmp_path,
        body,
        with_vega=False,
        column=_FULL_COLUMN,
        viewport=PHONE,
        head="<link rel='stylesheet' href='book.css'>",
        name="styled.html",
    )
    assert styled.problems == []


def test_an_element_wider_than_the_window_outside_the_column_is_reported(browser, tmp_path):
    body = "<p>fits</p>"
    (tmp_path / "page.html").write_text(
        "<html><head><meta name='viewport' content='width=device-width, initial-scale=1'></head><body>"
        "<header style='width: 600px'>wide header</header><main><article class='bd-article'>"
        f"{body}</article></main></body></html>"
    )
    with serve(tmp_path) as base:
        report = check_page(browser, base + "page.html", "page.html", allowed_origin=base.rstrip("/"), viewport=PHONE)
    assert any(p.startswith("page.html: wider than the window: header") for p in report.problems), report.problems


# --------------------------------------------------------------------------- what a page loads


def test_vega_on_a_page_without_a_chart_is_reported(browser, tmp_path):
    problems = _open(browser, tmp_path, "<p>text only</p>").problems
    assert len(problems) == 1
    assert "loads vega (vega.min.js, vega-lite.min.js, vega-embed.min.js" in problems[0]
    assert "but has no charts" in problems[0]


def test_the_widget_manager_without_a_widget_and_fontawesome_js_are_reported(browser, tmp_path):
    (tmp_path / "widgets").mkdir()
    (tmp_path / "widgets" / "embed-amd.js").write_text("var manager = 1;")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "fontawesome.js").write_text("var icons = 1;")
    head = "<script src='widgets/embed-amd.js'></script><script src='scripts/fontawesome.js'></script>"
    problems = _open(browser, tmp_path, "<p>text</p>", with_vega=False, head=head).problems
    assert len(problems) == 2, problems
    assert "loads the ipywidgets manager (embed-amd.js" in problems[0] and "has no widgets" in problems[0]
    assert "loads scripts/fontawesome.js" in problems[1]
    view = "<script type='application/vnd.jupyter.widget-view+json'>{}</script>"
    problems = _open(browser, tmp_path, view, with_vega=False, head=head, name="widget.html").problems
    assert [p for p in problems if "ipywidgets manager" in p] == []


def test_a_page_over_its_budget_names_its_heaviest_files(browser, tmp_path):
    report = _open(browser, tmp_path, _chart(), budget_bytes=100_000)
    assert report.loaded_bytes > 800_000  # vega alone
    assert len(report.problems) == 1
    assert "over the 0.1 MB budget; heaviest: vega.min.js 0.52 MB" in report.problems[0]


def test_a_text_page_has_a_smaller_budget_than_a_chart_page(browser, tmp_path):
    (tmp_path / "big.js").write_text("var x = 1;" + " " * 1_600_000)
    report = _open(
        browser,
        tmp_path,
        "<p>text</p>",
        with_vega=False,
        head="<script src='big.js'></script>",
        budget_bytes=check_built_book.PAGE_BUDGET_BYTES,
    )
    assert len(report.problems) == 1 and "over the 1.5 MB budget; heaviest: big.js 1.60 MB" in report.problems[0]


def test_a_missing_favicon_is_reported_and_a_present_one_accepted(browser, tmp_path):
    problems = _open(browser, tmp_path, "<p>x</p>", with_vega=False, require_favicon=True).problems
    assert problems == ["page.html: declares no favicon, so browsers ask for /favicon.ico and get a 404"]
    (tmp_path / "icon.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    assert (
        _open(
            browser,
            tmp_path,
            "<p>x</p>",
            with_vega=False,
            require_favicon=True,
            name="icon.html",
            head="<link rel='icon' href='icon.svg'>",
        ).problems
        == []
    )
    problems = _open(
        browser,
        tmp_path,
        "<p>x</p>",
        with_vega=False,
        require_favicon=True,
        name="gone.html",
        head="<link rel='icon' href='gone.svg'>",
    ).problems
    assert "gone.html: favicon http://127.0.0.1" in problems[-1] and problems[-1].endswith("gone.svg answers HTTP 404")


def test_icons_without_their_font_are_reported(browser, tmp_path):
    head = (
        "<style>@font-face { font-family: 'Font Awesome 6 Free'; font-weight: 900;"
        " src: url(missing.woff2) format('woff2'); }"
        " .fa-solid { font-family: 'Font Awesome 6 Free'; font-weight: 900; }"
        " .fa-bars::before { content: '\\f0c9'; }</style>"
    )
    problems = _open(browser, tmp_path, "<i class='fa-solid fa-bars'></i>", with_vega=False, head=head).problems
    assert any("1 icon(s) drawn without their font" in p for p in problems), problems


def test_without_a_browser_ci_fails_and_a_laptop_skips(tmp_path, monkeypatch, capsys):
    (tmp_path / "index.html").write_text("<html><body>home</body></html>")
    monkeypatch.setattr(check_built_book, "find_chromium", lambda: None)
    monkeypatch.setenv("CI", "true")
    assert check_built_book.main(["check", str(tmp_path)]) == 1
    assert "browser checks cannot run in CI: chromium not found" in capsys.readouterr().err
    monkeypatch.setenv("CI", "")
    assert check_built_book.main(["check", str(tmp_path)]) == 0
    assert "browser checks skipped: chromium not found" in capsys.readouterr().out
