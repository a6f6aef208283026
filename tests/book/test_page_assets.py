"""book/_ext/page_assets.py: each page loads vega and the widget manager only where it uses them."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from sphinx.builders.html._assets import _JavaScript

from tests.conftest import REPO_ROOT

_spec = importlib.util.spec_from_file_location("page_assets", REPO_ROOT / "book" / "_ext" / "page_assets.py")
page_assets = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(page_assets)

BIN = Path(sys.executable).parent
# The line pydata-sphinx-theme 0.17 writes into every page's head.
THEME_HEAD = (
    '  <link href="../_static/styles/pydata-sphinx-theme.css?digest=55c26ed414f5f8a31ebb" rel="stylesheet" />\n'
    '  <script defer src="../_static/scripts/fontawesome.js?digest=55c26ed414f5f8a31ebb"></script>\n'
    '  <link rel="preload" as="script" href="../_static/scripts/bootstrap.js?digest=55c26ed414f5f8a31ebb" />\n'
)


def test_a_page_needs_vega_for_a_chart_and_the_manager_for_a_widget_view():
    assert page_assets.page_libraries("<p>text</p>") == {"charts": False, "widgets": False}
    chart = '<div class="planner-altair" role="figure"></div>'
    assert page_assets.page_libraries(chart) == {"charts": True, "widgets": False}
    view = '<script type="application/vnd.jupyter.widget-view+json">{"model_id": "x"}</script>'
    assert page_assets.page_libraries(view) == {"charts": False, "widgets": True}


def test_the_theme_fontawesome_script_is_the_only_thing_removed():
    out = page_assets.without_fontawesome_js(THEME_HEAD)
    assert "fontawesome.js" not in out
    assert out == THEME_HEAD.replace(THEME_HEAD.splitlines(keepends=True)[1], "")


def test_only_long_inline_code_words_may_break():
    body = (
        '<code class="docutils literal notranslate"><span class="pre">--max-num-seqs</span></code> '
        '<code class="docutils literal notranslate"><span '
        'class="pre">planner.autoscaler.replica_calculator.DEFAULT_TOLERANCE&amp;x</span>'
        "</code>"
    )
    marked = page_assets.mark_long_code(body)
    assert '<span class="pre">--max-num-seqs</span>' in marked
    assert '<span class="pre long">planner.autoscaler.replica_calculator.DEFAULT_TOLERANCE&amp;x</span>' in marked
    assert page_assets.mark_long_code("x" * 28) == "x" * 28
    exact = '<span class="pre">' + "y" * 28 + "</span>"
    assert page_assets.mark_long_code(exact) == exact  # 28 characters still fit a phone's line


def test_widget_scripts_are_the_configured_files_and_the_state():
    files = {"widgets/require.js", "widgets/embed-amd.js"}
    assert page_assets.is_widget_script(_JavaScript("widgets/embed-amd.js"), files)
    assert page_assets.is_widget_script(_JavaScript("_static/widgets/require.js"), files)
    assert page_assets.is_widget_script(
        _JavaScript(None, type="application/vnd.jupyter.widget-state+json", body="{}"), files
    )
    assert not page_assets.is_widget_script(_JavaScript("vega/vega.min.js", priority=300), files)
    assert not page_assets.is_widget_script(_JavaScript("doctools.js"), files)


def _notebook(path: Path, title: str, *sources: str) -> None:
    nb = new_notebook(cells=[new_markdown_cell(f"# {title}"), *(new_code_cell(s) for s in sources)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"c{i}"
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def tiny_book(tmp_path_factory):
    """A three-page book built with the real configuration: a chart, an explorer, text."""
    vendor = REPO_ROOT / "book" / "_vendor"
    if not (vendor / "charts.js").is_file():
        pytest.skip("book/_vendor not populated; run make setup")
    root = tmp_path_factory.mktemp("book")
    shutil.copy(REPO_ROOT / "_config.yml", root / "_config.yml")
    (root / "book").mkdir()
    shutil.copytree(REPO_ROOT / "book" / "_ext", root / "book" / "_ext")
    shutil.copytree(vendor, root / "book" / "_vendor")
    (root / "book" / "intro.md").write_text(
        "# Intro\n\nText only: `--max-num-seqs` and `planner.explorers.drain.drain_explorer`.\n"
    )
    _notebook(
        root / "book" / "chart.ipynb",
        "Chart",
        "import altair as alt, pandas as pd\nimport planner.charts.viz\nplanner.charts.viz.enable()",
        "alt.Chart(pd.DataFrame({'x': [1, 2]}), title='c').mark_bar().encode(x='x:Q')",
    )
    _notebook(
        root / "book" / "explorer.ipynb",
        "Explorer",
        "import planner.charts.viz\nplanner.charts.viz.enable()\nfrom planner.explorers.drain import drain_explorer",
        "drain_explorer()",
    )
    (root / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nchapters:\n  - file: book/chart\n  - file: book/explorer\n"
    )
    env = {"PYTHONPATH": str(REPO_ROOT), "PATH": f"{BIN}:/usr/bin:/bin"}
    result = subprocess.run(
        [str(BIN / "jupyter-book"), "build", str(root), "-W", "-n", "--keep-going"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root / "_build" / "html"


def _page(html: Path, name: str) -> str:
    return (html / "book" / f"{name}.html").read_text(encoding="utf-8")


def test_only_the_chart_page_loads_vega_and_no_page_loads_the_widget_manager(tiny_book):
    chart, explorer, intro = (_page(tiny_book, n) for n in ("chart", "explorer", "intro"))
    for script in page_assets.CHART_SCRIPTS:
        assert f'src="../_static/{script}' in chart
        assert script not in explorer and script not in intro
    # vega before everything of priority 500 and up (myst-nb's require.js among them).
    assert chart.index("vega/vega.min.js") < chart.index("charts.js") < chart.index("clipboard.min.js")
    for page in (chart, explorer, intro):
        assert "embed-amd.js" not in page and "widgets/require.js" not in page
        assert "application/vnd.jupyter.widget-state+json" not in page
        assert "fontawesome.js" not in page
        assert '<link rel="icon" href="../_static/favicon.svg"/>' in page
    assert '<span class="pre">--max-num-seqs</span>' in intro
    assert '<span class="pre long">planner.explorers.drain.drain_explorer</span>' in intro
    assert (tiny_book / "_static" / "favicon.svg").is_file()


def test_the_explorer_is_a_snapshot_in_the_static_page(tiny_book):
    explorer = _page(tiny_book, "explorer")
    assert 'class="planner-explorer-static"' in explorer and "make lab" in explorer
    assert "<dt>grace (s)</dt><dd>30</dd>" in explorer
    assert "application/vnd.jupyter.widget-view+json" not in explorer
