"""Key the book's jupyter-cache by the code, the data and the pins the notebooks run on.

With ``execute_notebooks: cache`` myst-nb reuses a notebook's stored outputs when its
code cells are unchanged. jupyter-cache looks at the cells only, so a change in
``planner/``, ``data/`` or the pinned requirements would otherwise serve outputs the
old code computed. This extension gives each fingerprint of those inputs its own cache
folder, ``<build>/.jupyter_cache/<fingerprint>``, and removes the folders of older
fingerprints. The tests read the same folder (``tests/execution_cache.py``), so a
chapter run with its default parameters is executed once per change, by the build.

It acts only on the book itself (a source folder with ``planner/`` beside it) in
``cache`` mode; the tests' tiny books and ``planner report`` pages are left alone.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
from pathlib import Path

# What a chapter's outputs depend on besides its own code cells.
FINGERPRINTED = ("planner", "data", "requirements.txt", "pyproject.toml")
# Build products that are not inputs (bytecode, numba's on-disk cache).
_SKIPPED_DIRS = {"__pycache__"}
_SKIPPED_SUFFIXES = {".pyc", ".pyo", ".nbi", ".nbc"}
_FINGERPRINT_DIR = re.compile(r"[0-9a-f]{16}")


def fingerprint(root: Path) -> str:
    """A 16-hex-digit hash of every file of :data:`FINGERPRINTED` under ``root``, and the Python version."""
    digest = hashlib.sha256(sys.version.encode())
    for name in FINGERPRINTED:
        top = root / name
        files = [top] if top.is_file() else sorted(
            path for path in top.rglob("*")
            if path.is_file() and path.suffix not in _SKIPPED_SUFFIXES
            and not _SKIPPED_DIRS.intersection(path.relative_to(top).parts))
        for path in files:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def cache_dir(build_dir: Path, root: Path) -> Path:
    """The jupyter-cache folder for the current inputs of the book at ``root``."""
    return build_dir / ".jupyter_cache" / fingerprint(root)


def _key_the_cache(app, config) -> None:
    root = Path(app.srcdir)
    if config.nb_execution_mode != "cache" or not (root / "planner").is_dir():
        return
    if config.nb_execution_cache_path:
        raise ValueError("execution_cache.py chooses the cache folder; leave execute.cache unset")
    folder = cache_dir(Path(app.outdir).parent, root)
    for old in folder.parent.glob("*"):
        if old != folder and old.is_dir() and _FINGERPRINT_DIR.fullmatch(old.name):
            shutil.rmtree(old)
    config.nb_execution_cache_path = str(folder)


def setup(app):
    app.connect("config-inited", _key_the_cache)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
