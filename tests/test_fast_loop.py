"""The fast inner loop: markers by module, the dev profile's example cap, the shared execution cache."""

from __future__ import annotations

import re
import shutil
from types import SimpleNamespace

import nbformat
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tests import conftest
from tests import execution_cache as keying
from tests.conftest import REPO_ROOT
from tests.execution_cache import cell_errors, executed_notebook

TESTS = REPO_ROOT / "tests"
# Test modules, in the folders that mirror the package; their names are unique across folders.
MODULES = {path.stem: path for path in TESTS.rglob("test_*.py")}
# What makes a module start a kernel or a browser, as its source says it.
STARTS_A_KERNEL = re.compile(
    r"\brun_chapter\(|papermill\.execute_notebook|--nbval|\"jupyter-book\"|"
    r"\[\"report\"|NotebookClient|write_report\(|_strict_build\(|_tiny_book\("
)
STARTS_A_BROWSER = re.compile(r"\bchromium\(\)|sync_playwright|lab_check")


@pytest.mark.parametrize("path", sorted(MODULES.values()), ids=lambda p: p.stem)
def test_a_module_that_starts_a_kernel_or_a_browser_is_marked(path):
    if path.stem == "test_fast_loop":
        return
    source = path.read_text(encoding="utf-8")
    if STARTS_A_KERNEL.search(source):
        assert path.stem in conftest.NOTEBOOK_MODULES, f"add {path.stem} to NOTEBOOK_MODULES in tests/conftest.py"
    if STARTS_A_BROWSER.search(source):
        assert path.stem in conftest.BROWSER_MODULES, f"add {path.stem} to BROWSER_MODULES in tests/conftest.py"


def test_every_marked_module_and_test_exists():
    assert conftest.NOTEBOOK_MODULES | conftest.BROWSER_MODULES <= MODULES.keys()
    for test in conftest.SLOW_TESTS:
        module, name = test.split("::")
        assert f"def {name}(" in MODULES[module].read_text(encoding="utf-8"), test


def _marked(module: str, name: str) -> list[str]:
    item = SimpleNamespace(path=TESTS / f"{module}.py", name=f"{name}[x]", originalname=name, markers=[])
    item.add_marker = item.markers.append
    conftest.pytest_collection_modifyitems(None, [item])
    return [marker.name for marker in item.markers]


def test_the_markers_are_set_by_module_and_by_name(request):
    own = [item for item in request.session.items if item.path.stem == "test_fast_loop"]
    assert own and not [item for item in own if item.get_closest_marker("notebook")]
    assert _marked("test_book_backlog", "test_anything") == ["notebook"]
    assert _marked("test_cli_report", "test_anything") == ["notebook", "browser"]
    assert _marked("test_cli_sweep", "test_unreachable_scheduler_exits_2") == ["slow"]
    assert _marked("test_cli_sweep", "test_table_names_the_front_and_the_cheapest") == []


def test_slow_tests_are_run_first():
    names = ["test_a", "test_the_kernel_runs_inside_another_kernel", "test_b"]
    items = [
        SimpleNamespace(
            path=TESTS / "test_simulate_fast_decision.py", name=n, originalname=n, add_marker=lambda marker: None
        )
        for n in names
    ]
    conftest.pytest_collection_modifyitems(None, items)
    assert [item.name for item in items] == [names[1], names[0], names[2]]


def test_the_dev_profile_caps_what_a_test_asks_for():
    seen = []

    @settings(max_examples=3000, database=None)
    @given(st.integers())
    def asks_for_3000(x):
        seen.append(x)

    @settings(max_examples=5, database=None)
    @given(st.integers())
    def asks_for_5(x):
        pass

    conftest.cap_max_examples(
        [SimpleNamespace(obj=asks_for_3000), SimpleNamespace(obj=asks_for_5), SimpleNamespace(obj=len)], cap=7
    )
    assert asks_for_3000._hypothesis_internal_use_settings.max_examples == 7
    assert asks_for_3000._hypothesis_internal_use_settings.database is None
    assert asks_for_5._hypothesis_internal_use_settings.max_examples == 5
    asks_for_3000()
    assert 0 < len(seen) <= 7
    assert conftest.CAPPED_PROFILES["dev"] <= 10 and settings.get_profile("dev").max_examples <= 10
    # CI and `make test` lower the 3,000-example tests; `make test-thorough` does not.
    assert conftest.CAPPED_PROFILES["ci"] <= 200 and "thorough" not in conftest.CAPPED_PROFILES
    assert settings.get_profile("ci").derandomize


def _tiny_root(tmp_path):
    root = tmp_path / "repo"
    for name in ("planner", "data"):
        (root / name).mkdir(parents=True)
    (root / "planner" / "m.py").write_text("X = 1\n")
    (root / "data" / "d.csv").write_text("a\n1\n")
    (root / "requirements.txt").write_text("numpy==2.4.6\n")
    (root / "pyproject.toml").write_text("[project]\n")
    return root


def test_a_stamped_build_is_current_until_any_input_of_its_pages_changes(tmp_path):
    root = _tiny_root(tmp_path)
    (root / "book" / "_js").mkdir(parents=True)
    (root / "book" / "page.md").write_text("# A page\n")
    (root / "_toc.yml").write_text("root: book/page\n")
    html = tmp_path / "html"
    html.mkdir()
    assert not keying.build_is_current(html, root)  # never stamped
    keying.stamp_build(html, root)
    assert keying.build_is_current(html, root)
    (root / "book" / ".ipynb_checkpoints").mkdir()
    (root / "book" / ".ipynb_checkpoints" / "page-checkpoint.ipynb").write_text("{}")
    assert keying.build_is_current(html, root)  # JupyterLab's checkpoints are not built
    for path, text in [
        (root / "book" / "page.md", "# Another title\n"),
        (root / "_toc.yml", "root: book/other\n"),
        (root / "_config.yml", "title: x\n"),
        (root / "planner" / "m.py", "X = 2\n"),
        (root / "Makefile", "book:\n"),
    ]:
        path.write_text(text)
        assert not keying.build_is_current(html, root), path
        keying.stamp_build(html, root)
        assert keying.build_is_current(html, root)


def test_the_fingerprint_follows_code_data_and_pins_but_not_bytecode(tmp_path):
    root = _tiny_root(tmp_path)
    first = keying.fingerprint(root)
    assert re.fullmatch(r"[0-9a-f]{16}", first)
    (root / "planner" / "__pycache__").mkdir()
    (root / "planner" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"\0")
    assert keying.fingerprint(root) == first
    for path, text in (("planner/m.py", "X = 2\n"), ("data/d.csv", "a\n2\n"), ("requirements.txt", "numpy==2.4.7\n")):
        before = keying.fingerprint(root)
        (root / path).write_text(text)
        assert keying.fingerprint(root) != before, path


def _chapter(path, *sources):
    nb = new_notebook(cells=[new_markdown_cell("# A page"), *(new_code_cell(s) for s in sources)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"c{i}"
    nbformat.write(nb, path)
    return nb


def _store(build, root, path, nb):
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    executed = nbformat.from_dict(nb)
    for i, cell in enumerate(c for c in executed.cells if c.cell_type == "code"):
        cell.execution_count = i + 1
        cell.outputs = [new_output("stream", name="stdout", text="ran\n")]
    cache = get_cache(keying.cache_dir(build, root))
    cache.cache_notebook_bundle(CacheBundleIn(executed, str(path)), check_validity=False, overwrite=True)


def test_a_cached_run_is_read_only_while_code_cells_and_fingerprint_match(tmp_path):
    root, build = _tiny_root(tmp_path), tmp_path / "_build"
    path = root / "page.ipynb"
    assert executed_notebook(path, build, root) is None  # no build yet
    nb = _chapter(path, "x = 1", "print(x)")
    _store(build, root, path, nb)
    read = executed_notebook(path, build, root)
    assert read is not None and [c.outputs[0].text for c in read.cells if c.cell_type == "code"] == ["ran\n"] * 2
    # A markdown edit keeps the run; a code edit or a planner edit drops it.
    nb.cells[0].source = "# Another title"
    nbformat.write(nb, path)
    assert executed_notebook(path, build, root) is not None
    nb.cells[1].source = "x = 2"
    nbformat.write(nb, path)
    assert executed_notebook(path, build, root) is None
    nb.cells[1].source = "x = 1"
    nbformat.write(nb, path)
    (root / "planner" / "m.py").write_text("X = 3\n")
    assert executed_notebook(path, build, root) is None


def test_the_strict_builds_config_is_the_books_with_a_keyed_cache(tmp_path):
    root, build = _tiny_root(tmp_path), tmp_path / "_build"
    shutil.copy(REPO_ROOT / "_config.yml", root / "_config.yml")
    stale = build / ".jupyter_cache" / "0123456789abcdef"
    stale.mkdir(parents=True)
    folder = keying.write_cached_config(build / "_config.cache.yml", build, root)
    assert folder == keying.cache_dir(build, root) and not stale.exists()
    book = yaml.safe_load((REPO_ROOT / "_config.yml").read_text(encoding="utf-8"))
    written = yaml.safe_load((build / "_config.cache.yml").read_text(encoding="utf-8"))
    assert book["execute"]["execute_notebooks"] == "force"  # make book, and the tests' tiny books
    assert written["execute"] == {**book["execute"], "execute_notebooks": "cache", "cache": str(folder.resolve())}
    assert written["sphinx"]["local_extensions"] == {
        name: str((root / folder).resolve()) for name, folder in book["sphinx"]["local_extensions"].items()
    }
    del written["sphinx"]["local_extensions"], book["sphinx"]["local_extensions"]
    assert {k: v for k, v in written.items() if k != "execute"} == {k: v for k, v in book.items() if k != "execute"}


def test_a_cell_that_raised_or_did_not_run_is_reported():
    nb = new_notebook(
        cells=[
            new_code_cell("x = 1", execution_count=1),
            new_code_cell("1 / 0", execution_count=2),
            new_code_cell("y = 2"),
            new_code_cell("  "),
        ]
    )
    nb.cells[1].outputs = [new_output("error", ename="ZeroDivisionError", evalue="division by zero", traceback=[])]
    assert cell_errors(nb) == ["cell 1 raised ZeroDivisionError: division by zero", "cell 2 did not run"]


def test_the_lab_check_takes_every_chapter_or_those_named(monkeypatch):
    from tests import lab_check

    monkeypatch.delenv("LAB_CHAPTERS", raising=False)
    every = lab_check.chapters()
    assert "book/best_possible" in every and "book/lab" in every and "book/defaults" not in every  # Reference
    monkeypatch.setenv("LAB_CHAPTERS", "forecasts, lab")
    assert lab_check.chapters() == ["book/lab", "book/forecasts"]  # in the table of contents' order


def test_a_lab_worker_stops_only_its_own_chapters_kernel():
    from tests import lab_check

    sessions = [
        {"path": "book/lab.ipynb", "kernel": {"id": "k-lab"}},
        {"path": "book/forecasts.ipynb", "kernel": {"id": "k-forecasts"}},  # the other worker's chapter
        {"path": "book/lab.ipynb", "kernel": None},  # a session whose kernel is already gone
    ]
    assert lab_check.chapter_kernel_ids(sessions, "book/lab") == {"k-lab"}
    assert lab_check.chapter_kernel_ids(sessions, "book/kv_capacity") == set()


def test_the_lab_check_runs_two_chapters_at_once_unless_told(monkeypatch):
    from tests import lab_check

    monkeypatch.delenv("LAB_WORKERS", raising=False)
    assert lab_check.workers() == 2
    monkeypatch.setenv("LAB_WORKERS", "1")
    assert lab_check.workers() == 1
    for bad in ("two", "0"):
        monkeypatch.setenv("LAB_WORKERS", bad)
        with pytest.raises(SystemExit, match="LAB_WORKERS"):
            lab_check.workers()


def test_the_lab_check_starts_the_chapters_the_build_ran_longest():
    from tests import lab_check

    seconds = {"book/a": 3.0, "book/b": None, "book/c": 30.0, "book/d": 12.0}
    assert lab_check.longest_first(["book/a", "book/b", "book/c", "book/d"], seconds) == [
        "book/c",
        "book/d",
        "book/a",
        "book/b",
    ]


def test_the_cache_tells_how_long_the_build_ran_a_notebook(tmp_path):
    from tests.execution_cache import execution_seconds

    assert execution_seconds(REPO_ROOT / "book" / "kv_capacity.ipynb", build_dir=tmp_path) is None  # no cache there


def test_test_modules_have_unique_names_and_sit_in_folders_that_mirror_the_package():
    paths = sorted(TESTS.rglob("test_*.py"))
    assert len({path.stem for path in paths}) == len(paths)  # markers and slow tests are named by module
    package = REPO_ROOT / "planner"
    for path in paths:
        folder = path.parent.relative_to(TESTS)
        if folder.parts and folder.parts[0] != "book":
            assert (package / folder).is_dir(), f"{path.relative_to(REPO_ROOT)}: no planner/{folder} to mirror"
        assert (path.parent / "__init__.py").is_file(), f"{path.parent.relative_to(REPO_ROOT)} needs an __init__.py"
