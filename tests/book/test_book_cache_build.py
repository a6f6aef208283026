"""The strict build in cache mode (make build-strict) stays strict, and the tests read what it ran."""

from __future__ import annotations

import subprocess

from tests.book.test_book_pipeline import BIN, _notebook, _tiny_book
from tests.execution_cache import executed_notebook, write_cached_config


def _cached_strict_build(root) -> subprocess.CompletedProcess:
    config = root / "_build" / "_config.cache.yml"
    write_cached_config(config, root / "_build", root)
    return subprocess.run(
        [str(BIN / "jupyter-book"), "build", str(root), "--config", str(config), "-W", "-n", "--keep-going"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
    )


def test_a_run_is_cached_for_the_tests_and_a_raising_cell_still_fails_the_build(tmp_path):
    root = _tiny_book(tmp_path, page_source="x = 6 * 7\nprint(x)")
    page = root / "book" / "page.ipynb"
    first = _cached_strict_build(root)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    assert "Executed notebook" in first.stdout + first.stderr
    run = executed_notebook(page, root / "_build", root)
    assert run is not None and run.cells[1].outputs[0].text == "42\n"
    # Built again unchanged: the page is read from the cache, not run.
    again = _cached_strict_build(root)
    assert again.returncode == 0 and "Executed notebook" not in again.stdout + again.stderr
    # A cell that raises is not in the cache, so it runs, and the strict build fails.
    _notebook(page, "assert 6 * 7 == 41, 'arithmetic is broken'")
    assert executed_notebook(page, root / "_build", root) is None
    failed = _cached_strict_build(root)
    assert failed.returncode != 0
    assert "Executing notebook failed" in failed.stdout + failed.stderr
