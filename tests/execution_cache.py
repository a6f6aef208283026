"""The strict book build's execution cache, keyed by what the notebooks run on, and read back by the tests.

`make build-strict` builds with a copy of ``_config.yml`` written by this module
(``python -m tests.execution_cache _build/_config.cache.yml``) that sets
``execute_notebooks: cache``. myst-nb then reuses a notebook's stored outputs while its
code cells are unchanged. jupyter-cache compares the cells only, so the cache folder
is named by a fingerprint of everything else the chapters read: ``planner/``,
``data/``, the JavaScript pins the status page reports, and the pinned requirements.
A change to any of them starts an empty cache; older folders are removed.

The notebook tests read the same folder: a chapter run with its default parameters is
the build's run (:func:`executed_notebook`). A miss (no build yet, a build of other code,
a cell changed since) returns ``None`` and the caller executes the chapter itself, so no
test sees outputs of other code. ``_config.yml`` itself keeps ``force``: `make book`
and any direct ``jupyter-book build`` execute every page.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import yaml

from tests.conftest import REPO_ROOT

BUILD_DIR = REPO_ROOT / "_build"
# What a chapter's outputs depend on besides its own code cells.
FINGERPRINTED = ("planner", "data", "book/_js", "requirements.txt", "pyproject.toml")
# Build products, not inputs (bytecode, numba's on-disk cache, npm's download folder).
_SKIPPED_DIRS = {"__pycache__", "node_modules", ".ipynb_checkpoints"}
_SKIPPED_SUFFIXES = {".pyc", ".pyo", ".nbi", ".nbc"}
_FINGERPRINT = re.compile(r"[0-9a-f]{16}")
# What the HTML depends on besides FINGERPRINTED. A strict build (-W -n) of the same inputs builds
# the same pages, so `make build-strict` after `make book` checks the pages without building them again.
BOOK_SOURCES = ("book", "_config.yml", "_toc.yml", "tests/execution_cache.py", "Makefile")
STAMP_NAME = ".strict-build"
# tests/warm_kernels.py's parts the chapters call, in two processes; "loose" compiles the engine's decision
# kernel before the engine's part needs it.
WARM_PROCESSES = (("engine",), ("loose", "lockstep"))


def fingerprint(root: Path = REPO_ROOT, names: tuple[str, ...] = FINGERPRINTED) -> str:
    """A 16-hex-digit hash of every file of ``names`` under ``root``, and the Python version."""
    digest = hashlib.sha256(sys.version.encode())
    for name in names:
        top = root / name
        files = (
            ([top] if top.exists() else [])
            if not top.is_dir()
            else sorted(
                path
                for path in top.rglob("*")
                if path.is_file()
                and path.suffix not in _SKIPPED_SUFFIXES
                and not _SKIPPED_DIRS.intersection(path.relative_to(top).parts)
            )
        )
        for path in files:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def cache_dir(build_dir: Path = BUILD_DIR, root: Path = REPO_ROOT) -> Path:
    """The jupyter-cache folder for the current inputs of the book at ``root``."""
    return build_dir / ".jupyter_cache" / fingerprint(root)


def write_cached_config(target: Path, build_dir: Path = BUILD_DIR, root: Path = REPO_ROOT) -> Path:
    """Write ``root/_config.yml`` with cache-mode execution into ``target``; drop caches of older inputs."""
    folder = cache_dir(build_dir, root)
    for old in folder.parent.glob("*"):
        if old != folder and old.is_dir() and _FINGERPRINT.fullmatch(old.name):
            shutil.rmtree(old)
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    config["execute"] = {**config.get("execute", {}), "execute_notebooks": "cache", "cache": str(folder.resolve())}
    # jupyter-book takes local extension folders relative to the config file.
    sphinx = config.get("sphinx", {})
    sphinx["local_extensions"] = {
        name: str((root / folder).resolve()) for name, folder in (sphinx.get("local_extensions") or {}).items()
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(
        "# Written by tests/execution_cache.py from _config.yml for make build-strict.\n"
        + yaml.safe_dump(config, sort_keys=False, allow_unicode=True),
        encoding="utf-8",
    )
    return folder


def build_fingerprint(root: Path = REPO_ROOT) -> str:
    """What the built HTML depends on: the notebooks' inputs, the pages, the book's config and this module."""
    return fingerprint(root, (*FINGERPRINTED, *BOOK_SOURCES))


def stamp_build(html_dir: Path, root: Path = REPO_ROOT) -> None:
    """Record, after a strict build that passed, the inputs it was built from."""
    (html_dir / STAMP_NAME).write_text(build_fingerprint(root) + "\n", encoding="utf-8")


def build_is_current(html_dir: Path, root: Path = REPO_ROOT) -> bool:
    """Whether ``html_dir`` holds a passed strict build of exactly the current inputs."""
    stamp = html_dir / STAMP_NAME
    return stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == build_fingerprint(root)


def executed_notebook(path: Path, build_dir: Path = BUILD_DIR, root: Path = REPO_ROOT):
    """The notebook at ``path`` with the outputs of the build's run, or ``None`` if there is none.

    The outputs are the cache's only if the fingerprint of ``root``'s inputs and the
    notebook's code cells both match the ones the build executed.
    """
    folder = cache_dir(build_dir, root)
    if not (folder / "global.db").is_file():
        return None
    from jupyter_cache import get_cache

    notebook = nbformat.read(path, as_version=4)
    try:
        _, merged = get_cache(folder).merge_match_into_notebook(notebook)
    except KeyError:
        return None
    return merged


def execution_seconds(path: Path, build_dir: Path = BUILD_DIR, root: Path = REPO_ROOT) -> float | None:
    """How long the build's run of the notebook at ``path`` took, or ``None`` if the cache has no run of it."""
    folder = cache_dir(build_dir, root)
    if not (folder / "global.db").is_file():
        return None
    from jupyter_cache import get_cache

    try:
        record = get_cache(folder).match_cache_notebook(nbformat.read(path, as_version=4))
    except KeyError:
        return None
    seconds = record.data.get("execution_seconds")
    return float(seconds) if seconds is not None else None


def cell_errors(notebook: nbformat.NotebookNode) -> list[str]:
    """What nbval-lax fails on: a code cell that did not run, or one that raised."""
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


def book_notebooks(root: Path = REPO_ROOT) -> list[Path]:
    """Every notebook page of the table of contents, in its order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    entries = [toc.get("root")] + [entry.get("file") for part in toc.get("parts", []) for entry in part["chapters"]]
    return [root / f"{name}.ipynb" for name in entries if name and (root / f"{name}.ipynb").is_file()]


def _execute(path_text: str, timeout_s: int) -> tuple[str, str | None, float]:
    # In a worker process: the run myst-nb's cache mode makes (single_nb_execution in the notebook's
    # folder), returned as JSON for the parent to store; None if a cell raised.
    from jupyter_cache.executors.utils import single_nb_execution

    path = Path(path_text)
    notebook = nbformat.read(path, as_version=4)
    result = single_nb_execution(notebook, cwd=str(path.parent), timeout=timeout_s, allow_errors=False)
    return path_text, None if result.err is not None else nbformat.writes(result.nb), result.time


def execute_missing(workers: int = 2, build_dir: Path = BUILD_DIR, root: Path = REPO_ROOT) -> list[Path]:
    """Run the book's notebooks that the current cache lacks, ``workers`` at a time; return them.

    myst-nb's cache mode executes the pages one after the other as Sphinx reads them. Run here
    first, in parallel, the same way, each run is stored as myst-nb stores it, and the build
    then finds it. A notebook that fails is not stored: the build runs it again and reports the
    error as it always does. The fast engine's kernels are compiled first, in one process, so
    that two notebooks do not compile them at once.
    """
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    from jupyter_cache.cache.db import NbProjectRecord

    cache = get_cache(cache_dir(build_dir, root))
    missing = []
    for path in book_notebooks(root):
        try:
            cache.match_cache_notebook(nbformat.read(path, as_version=4))
        except KeyError:
            missing.append(path)
    if not missing:
        return []
    # The longest first, by the last run's seconds (kept across fingerprints), so no worker is left with
    # a long notebook when the other is done; never run ones after those, from the end of the table of
    # contents, where the chapters that replay the most traffic are.
    timings_path = build_dir / "notebook_seconds.json"
    try:
        timings = json.loads(timings_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        timings = {}
    missing.reverse()
    missing.sort(key=lambda path: -float(timings.get(path.relative_to(root).as_posix(), 0.0)))

    # The engine's kernels beside the decision and replica kernels (WARM_PROCESSES), one process per core.
    warming = [
        subprocess.Popen([sys.executable, "-m", "tests.warm_kernels", *parts], cwd=root) for parts in WARM_PROCESSES
    ]
    for parts, process in zip(WARM_PROCESSES, warming, strict=True):
        if process.wait() != 0:
            raise subprocess.CalledProcessError(process.returncode, f"python -m tests.warm_kernels {' '.join(parts)}")
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    timeout_s = int(config.get("execute", {}).get("timeout", 300))
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        runs = [pool.submit(_execute, str(path), timeout_s) for path in missing]
        for run in as_completed(runs):
            path_text, executed, seconds = run.result()
            name = Path(path_text).relative_to(root)
            if executed is None:
                print(f"execution cache: {name} raised; the build runs it again and reports the error")
                continue
            stage_record = cache.add_nb_to_project(path_text)
            NbProjectRecord.remove_tracebacks([stage_record.pk], cache.db)
            cache.cache_notebook_bundle(
                CacheBundleIn(
                    nbformat.reads(executed, as_version=4), stage_record.uri, data={"execution_seconds": seconds}
                ),
                check_validity=False,
                overwrite=True,
            )
            print(f"execution cache: {name} executed in {seconds:.1f} s")
            timings[name.as_posix()] = round(seconds, 1)
    build_dir.mkdir(parents=True, exist_ok=True)
    partial = timings_path.with_suffix(".json.partial")
    partial.write_text(json.dumps(timings, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(partial, timings_path)
    return missing


def main(argv: list[str]) -> int:
    """``config TARGET`` writes the cached config; ``execute WORKERS`` runs the notebooks the cache
    lacks; ``stamp HTML`` records a passed build; ``current HTML`` exits 0 if that build is of the
    current inputs, else 1."""
    command, path = argv
    if command == "execute":
        missing = execute_missing(int(path))
        print(f"execution cache: {len(missing)} notebook(s) executed, {path} at a time")
    elif command == "config":
        print(f"execution cache: {write_cached_config(Path(path)).relative_to(REPO_ROOT)}")
    elif command == "stamp":
        stamp_build(Path(path))
    elif command == "current":
        current = build_is_current(Path(path))
        print(f"{path}: {'a' if current else 'no'} strict build of the current inputs")
        return 0 if current else 1
    else:
        raise SystemExit(f"unknown command {command!r}: expected config, execute, stamp or current")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
