"""Read a chapter's executed notebook from the book build's jupyter-cache.

The book build (``execute_notebooks: cache``) runs every chapter with its default
parameters and stores the outputs in a folder keyed by a fingerprint of ``planner/``,
``data/`` and the pins (``book/_ext/execution_cache.py``). A test that wants the same
run reads it from there instead of starting a kernel again. A miss (no build yet, or
one made before the code changed, or a cell changed since) returns ``None`` and the
caller executes the chapter itself, so no test ever sees outputs of other code.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat

from tests.conftest import REPO_ROOT

BUILD_DIR = REPO_ROOT / "_build"

_spec = importlib.util.spec_from_file_location(
    "book_execution_cache", REPO_ROOT / "book" / "_ext" / "execution_cache.py")
keying = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(keying)


def executed_notebook(path: Path, build_dir: Path = BUILD_DIR, root: Path = REPO_ROOT):
    """The notebook at ``path`` with the outputs of the build's run, or ``None`` if it has none.

    The outputs are the cache's only if the fingerprint of ``root``'s inputs and the
    notebook's code cells both match the ones the build executed.
    """
    folder = keying.cache_dir(build_dir, root)
    if not (folder / "global.db").is_file():
        return None
    from jupyter_cache import get_cache

    cache = get_cache(folder)
    notebook = nbformat.read(path, as_version=4)
    try:
        _, merged = cache.merge_match_into_notebook(notebook)
    except KeyError:
        return None
    return merged


def cell_errors(notebook: nbformat.NotebookNode) -> list[str]:
    """What nbval-lax would fail on: a code cell that did not run, or one that raised."""
    problems = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        if cell.get("execution_count") is None:
            problems.append(f"cell {index} did not run")
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                problems.append(f"cell {index} raised {output.get('ename')}: {output.get('evalue')}")
    return problems
