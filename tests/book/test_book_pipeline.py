"""The book's gates fail when they should: a raising cell, a build warning, an off-book script.

Each test builds a tiny book or notebook in a temporary folder with the same
configuration as the real one and runs the same commands `make test` runs.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests.conftest import REPO_ROOT

BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO_ROOT / "tests"))
from check_built_book import main as check_built_book  # noqa: E402


def _notebook(path: Path, *sources: str) -> Path:
    nb = new_notebook(cells=[new_markdown_cell("# A page"), *(new_code_cell(s) for s in sources)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"c{i}"
    nbformat.write(nb, path)
    return path


def _tiny_book(root: Path, page_source: str = "x = 1", intro_extra: str = "") -> Path:
    shutil.copy(REPO_ROOT / "_config.yml", root / "_config.yml")
    (root / "book").mkdir()
    shutil.copytree(REPO_ROOT / "book" / "_ext", root / "book" / "_ext")
    (root / "book" / "intro.md").write_text(f"# Intro\n\n{intro_extra}\n")
    _notebook(root / "book" / "page.ipynb", page_source)
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: book/page\n")
    vendor = REPO_ROOT / "book" / "_vendor"
    if vendor.is_dir():
        shutil.copytree(vendor, root / "book" / "_vendor")
    else:
        (root / "book" / "_vendor").mkdir()
    return root


def _strict_build(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "jupyter-book"), "build", str(root), "-W", "-n", "--keep-going"],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_nbval_fails_on_a_raising_cell(tmp_path):
    _notebook(tmp_path / "bad.ipynb", "assert 1 + 1 == 3, 'arithmetic is broken'")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval-lax", "-p", "no:cacheprovider", "-q", str(tmp_path / "bad.ipynb")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert result.returncode != 0
    assert "arithmetic is broken" in result.stdout


def test_strict_build_passes_on_a_clean_book(tmp_path):
    result = _strict_build(_tiny_book(tmp_path))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    page = (tmp_path / "_build" / "html" / "book" / "page.html").read_text(encoding="utf-8")
    # thebe is off: its config script (once declared twice, a console error) is gone.
    assert "THEBE_JS_URL" not in page and "x-thebe-config" not in page
    # An empty colour mode makes the theme log a console error.
    assert 'data-default-mode="light"' in page


def test_strict_build_fails_when_a_notebook_cell_raises(tmp_path):
    result = _strict_build(_tiny_book(tmp_path, page_source="raise RuntimeError('cell failed')"))
    assert result.returncode != 0


def test_strict_build_fails_on_a_warning(tmp_path):
    result = _strict_build(_tiny_book(tmp_path, intro_extra="See {doc}`no-such-page`."))
    assert result.returncode != 0
    assert "no-such-page" in result.stderr + result.stdout


def test_built_book_check_flags_an_off_book_script(tmp_path, capsys):
    (tmp_path / "index.html").write_text(
        '<html><head><script src="https://cdn.example.org/vega.js"></script></head></html>'
    )
    assert check_built_book(["check", "--static-only", str(tmp_path)]) == 1
    assert "cdn.example.org" in capsys.readouterr().err


def test_built_book_check_accepts_local_scripts_and_metadata_links(tmp_path):
    (tmp_path / "index.html").write_text(
        '<html><head><script src="_static/vega/vega.min.js"></script>'
        '<link rel="canonical" href="https://example.org/book/"></head>'
        '<body><a href="https://example.org">a link is not a fetch</a></body></html>'
    )
    assert check_built_book(["check", "--static-only", str(tmp_path)]) == 0


@pytest.mark.parametrize("tag", ["img", "iframe"])
def test_built_book_check_flags_remote_media(tmp_path, tag):
    (tmp_path / "page.html").write_text(f'<{tag} src="//example.org/x"></{tag}>')
    assert check_built_book(["check", "--static-only", str(tmp_path)]) == 1
