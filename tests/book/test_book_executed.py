"""Every cell of every book notebook runs without error: what `pytest --nbval-lax book` checked.

The asserts in the chapters' cells are the checks. `make test` runs this after the strict
build, so each chapter is read from the build's execution cache rather than run a
second time; without a matching cache it is executed here with papermill.
"""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.execution_cache import cell_errors
from tests.notebooks import BOOK_DIR, run_chapter

NOTEBOOKS = sorted(path.stem for path in BOOK_DIR.glob("*.ipynb"))


def _toc_files(entry) -> set[str]:
    if isinstance(entry, dict):
        return ({entry["file"]} if "file" in entry else set()).union(
            *(_toc_files(value) for key, value in entry.items() if key in ("parts", "chapters", "sections"))
        )
    return set().union(*(_toc_files(item) for item in entry)) if isinstance(entry, list) else set()


def test_the_build_executes_every_notebook_of_the_book_folder():
    # nbval ran every book/*.ipynb; the build runs only the pages in the table of contents.
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8"))
    assert NOTEBOOKS and {f"book/{name}" for name in NOTEBOOKS} <= _toc_files(toc) | {toc["root"]}


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_cell_runs_without_error(name, tmp_path):
    notebook = run_chapter(name, tmp_path)
    assert not cell_errors(notebook)
