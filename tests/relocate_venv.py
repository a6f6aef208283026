"""Point a copied virtual environment's scripts at its own python: ``python tests/relocate_venv.py FROM TO``.

``make lab-setup`` makes JupyterLab's environment as a copy of ``.venv``; pip wrote each script's
``#!`` line with the original's absolute path, so a copied script would run the original's python.
"""

from __future__ import annotations

import sys
from pathlib import Path


def relocate(source: Path, copy: Path) -> int:
    """Rewrite the ``#!`` line of every script in ``copy/bin`` that names ``source``'s python; how many."""
    old = f"#!{source.resolve()}/bin/python".encode()
    new = f"#!{copy.resolve()}/bin/python".encode()
    changed = 0
    for script in sorted((copy / "bin").iterdir()):
        if script.is_symlink() or not script.is_file():
            continue
        with script.open("rb") as handle:
            first = handle.readline()
        if not first.startswith(old):
            continue
        script.write_bytes(new + script.read_bytes()[len(old) :])
        changed += 1
    return changed


if __name__ == "__main__":
    source, copy = (Path(arg) for arg in sys.argv[1:3])
    print(f"{copy}: {relocate(source, copy)} scripts now run {copy}/bin/python")
