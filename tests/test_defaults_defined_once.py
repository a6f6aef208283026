"""Each HPA and KEDA default is written once, in planner.autoscaler.defaults; elsewhere it is imported."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import planner
from planner.autoscaler import defaults

PACKAGE_DIR = Path(planner.__file__).resolve().parent
DEFAULTS_MODULE = PACKAGE_DIR / "autoscaler" / "defaults.py"
# A default-looking name given a literal equal to one of the defaults is that
# default typed a second time. 0 and 1 are left out: a zero window or
# tolerance is a deliberate choice, not a copy of a default.
DEFAULT_VALUES = {getattr(defaults, name) for name in defaults.__all__} - {0, 1}
DEFAULT_NAME = re.compile(
    r"sync_period|polling|eval_interval|cooldown|stabili[sz]ation|scale_down_window|tolerance"
    r"|hpa_(min|max)_replicas|min_replica_count",
    re.IGNORECASE,
)


def _is_default_value(node: ast.expr | None) -> bool:
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
        and node.value in DEFAULT_VALUES
    )


def retyped_defaults(path: Path, root: Path = PACKAGE_DIR) -> list[str]:
    """``file:line name`` for every default-named constant or parameter given a default's value in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        pairs: list[tuple[str, ast.expr | None, int]] = []
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper():
            pairs.append((node.targets[0].id, node.value, node.lineno))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            pairs.append((node.target.id, node.value, node.lineno))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            positional = node.args.posonlyargs + node.args.args
            for arg, default in zip(
                positional[len(positional) - len(node.args.defaults) :], node.args.defaults, strict=True
            ):
                pairs.append((arg.arg, default, default.lineno))
            for arg, kw_default in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True):
                if kw_default is not None:
                    pairs.append((arg.arg, kw_default, kw_default.lineno))
        for name, value, line in pairs:
            if DEFAULT_NAME.search(name) and _is_default_value(value):
                found.append(f"{path.relative_to(root)}:{line} {name}")
    return sorted(found, key=lambda hit: int(hit.split(":")[1].split(" ")[0]))


def test_no_module_types_a_controller_default_again():
    offenders = [
        hit for path in sorted(PACKAGE_DIR.rglob("*.py")) if path != DEFAULTS_MODULE for hit in retyped_defaults(path)
    ]
    assert offenders == [], "import these from planner.autoscaler.defaults:\n" + "\n".join(offenders)


def test_the_scan_finds_a_retyped_default(tmp_path):
    # The guard itself must be able to fail.
    sample = tmp_path / "sample.py"
    sample.write_text(
        "SYNC_PERIOD_S = 15.0\nWARMUP_S = 90.0\nWINDOW_S = 0\n\n"
        "def f(polling_interval_s: float = 30.0, *, tolerance=0.1, n=3):\n    pass\n"
    )
    assert [hit.split(" ", 1)[1] for hit in retyped_defaults(sample, tmp_path)] == [
        "SYNC_PERIOD_S",
        "polling_interval_s",
        "tolerance",
    ]
