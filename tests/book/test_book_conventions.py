"""The book's house conventions, read from the notebooks and the table of contents.

The book reads as a course (chapter titles in the order a reader needs them),
every chart has a caption, and plotting code is hidden by default.
"""

from __future__ import annotations

import ast
import re

import nbformat
import pytest
import yaml

from tests.conftest import REPO_ROOT

TOC = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8"))
PAGES = [chapter["file"] for part in TOC["parts"] for chapter in part["chapters"]]
NOTEBOOKS = [page for page in PAGES if (REPO_ROOT / f"{page}.ipynb").exists()]
# What the course covers, in order: each is in the title of a later page than the one before it.
COURSE = (
    "GPU utilization",
    "Little's law",
    "KV",
    "load test",
    "HPA",
    "bounded",
    "backlog",
    "drain",
    "flap",
    "lab",
    "manifests",
    "plan",
    "glossary",
)
CAPTION_MIN_CHARS = 40


def title(page: str) -> str:
    path = REPO_ROOT / f"{page}.ipynb"
    if path.exists():
        text = nbformat.read(path, as_version=4).cells[0].source
    else:
        text = (REPO_ROOT / f"{page}.md").read_text(encoding="utf-8")
    first = text.splitlines()[0]
    assert first.startswith("# "), f"{page}: the first line must be the page's title, got {first!r}"
    return first[2:]


def test_the_titles_read_as_a_course():
    titles = [title(page) for page in PAGES]
    position = -1
    for topic in COURSE:
        later = [i for i, t in enumerate(titles) if i > position and topic.lower() in t.lower()]
        assert later, f"no title after {titles[position]!r} mentions {topic!r}: {titles}"
        position = later[0]


def test_the_book_starts_with_the_introduction_and_parts_are_captioned():
    assert TOC["root"] == "book/intro"
    assert all(part.get("caption") for part in TOC["parts"])


def _called(cell) -> str:
    """The function a code cell's last statement calls ("" if it is not a call)."""
    body = ast.parse(cell.source).body
    if not body or not isinstance(body[-1], ast.Expr):
        return ""
    value = body[-1].value
    if isinstance(value, ast.IfExp):  # chart(frame) if there is something to draw else print(...)
        value = value.body
    if not isinstance(value, ast.Call):
        return ""
    func = value.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _glued_charts(cell) -> list[str]:
    """Names under which a code cell glues a chart: ``glue("name", something_chart(...), ...)``."""
    names = []
    for node in ast.walk(ast.parse(cell.source)):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", "") == "glue"
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[1], ast.Call)
            and getattr(node.args[1].func, "id", "").endswith("_chart")
        ):
            names.append(node.args[0].value)
    return names


def chart_cells(notebook: str):
    nb = nbformat.read(REPO_ROOT / f"{notebook}.ipynb", as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and cell.source.strip():
            name = _called(cell)
            if re.search(r"_chart(_for)?$", name) or _glued_charts(cell):
                yield nb, i, cell


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_chart_has_a_caption_and_its_code_is_hidden(notebook):
    for nb, i, cell in chart_cells(notebook):
        assert "hide-input" in cell.metadata.get("tags", []), f"{notebook} cell {i}: tag the chart's cell hide-input"
        glued = _glued_charts(cell)
        if glued:
            text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
            for name in glued:
                block = re.search(r"```\{glue:figure\} " + re.escape(name) + r"\n(.*?)```", text, re.S)
                assert block, f"{notebook}: chart {name!r} is glued but no glue:figure shows it"
                caption = "\n".join(line for line in block.group(1).splitlines() if not line.startswith(":"))
                assert len(caption.strip()) >= CAPTION_MIN_CHARS, f"{notebook}: figure {name!r} has no caption"
        else:
            after = nb.cells[i + 1] if i + 1 < len(nb.cells) else None
            assert after is not None and after.cell_type == "markdown" and after.source.startswith("Figure: "), (
                f"{notebook} cell {i}: a chart must be followed by a markdown cell 'Figure: ...'"
            )
            assert len(after.source) >= CAPTION_MIN_CHARS, f"{notebook} cell {i + 1}: the caption says too little"


def test_the_caption_check_finds_charts():
    # Guards the test above against finding nothing to check.
    found = {notebook: sum(1 for _ in chart_cells(notebook)) for notebook in NOTEBOOKS}
    assert sum(found.values()) >= 20 and found["book/your_plan"] == 2 and found["book/lab"] >= 5
