"""Run a book chapter with papermill and read back the values it glued.

A run with the default parameters is the one the book build made: it is read from
the build's execution cache when that matches the current code and data
(tests/execution_cache.py), and executed here otherwise.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import papermill

from tests.conftest import REPO_ROOT
from tests.execution_cache import executed_notebook
from tests.kernel_fork import kernel_name

BOOK_DIR = REPO_ROOT / "book"


def run_chapter(name: str, output_dir: Path, **parameters) -> nbformat.NotebookNode:
    """Execute ``book/<name>.ipynb`` with ``parameters`` as papermill would for a user."""
    output = output_dir / f"{name}.ipynb"
    if not parameters:
        built = executed_notebook(BOOK_DIR / f"{name}.ipynb")
        if built is not None:
            nbformat.write(built, output)
            return built
    papermill.execute_notebook(
        str(BOOK_DIR / f"{name}.ipynb"),
        str(output),
        parameters=parameters,
        cwd=str(BOOK_DIR),
        kernel_name=kernel_name(),  # python3, forked from a process that has imported what chapters import
        progress_bar=False,
        request_save_on_cell_execute=False,  # written once at the end (or at an error), not per cell
    )
    return nbformat.read(output, as_version=4)


def glued(notebook: nbformat.NotebookNode) -> dict[str, object]:
    """Every value the notebook glued, by name, read back from its text/plain repr."""
    values: dict[str, object] = {}
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            scrap = output.get("metadata", {}).get("scrapbook", {})
            if "name" not in scrap:
                continue
            text = output.get("data", {}).get(scrap.get("mime_prefix", "") + "text/plain", "")
            try:
                values[scrap["name"]] = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                values[scrap["name"]] = text
    return values


def markdown_outputs(notebook: nbformat.NotebookNode) -> list[str]:
    """The text of every Markdown output of the notebook's code cells (glued tables, verdicts), in order."""
    return [
        "".join(output["data"]["text/markdown"])
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if "text/markdown" in output.get("data", {})
    ]
