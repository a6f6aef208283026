"""The README's Python example runs as printed, from the repository root."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import REPO_ROOT


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (REPO_ROOT / "README.md").read_text(), flags=re.DOTALL)


def test_the_python_example_runs():
    blocks = _python_blocks()
    assert blocks, "the README has no Python example"
    for block in blocks:
        result = subprocess.run(
            [sys.executable, "-c", block], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600
        )
        assert result.returncode == 0, result.stderr[-3000:]


def test_each_import_is_one_concept_from_its_module():
    # The README lists the public API one import per line, each from the module named for the concept.
    for block in _python_blocks():
        imports = [line for line in block.splitlines() if line.startswith(("from planner", "import planner"))]
        assert imports and all(line.startswith("from planner.") and " import " in line for line in imports)
