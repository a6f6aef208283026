"""Read what the book was built with: installed package versions and the vendored JavaScript versions.

Package versions come from the installed distributions' metadata
(:mod:`importlib.metadata`); the JavaScript versions from the script that
fetches them (``book/_js/vendor.sh``), which pins each npm package to a
version held in a shell variable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from planner.errors import PlannerInputError
from planner.markdown import markdown_table

__all__ = [
    "BOOK_PACKAGES",
    "ComponentVersion",
    "package_versions",
    "read_vendored_js",
    "vendored_js_from_text",
    "versions_markdown",
]

BOOK_PACKAGES: tuple[str, ...] = (
    "planner",
    "altair",
    "pandas",
    "numpy",
    "myst-nb",
    "sphinx",
    "jupyter-book",
    "papermill",
    "ipywidgets",
)
"""The distributions the status page reports."""


@dataclass(frozen=True)
class ComponentVersion:
    """One component and the version the build used ('not installed' when absent)."""

    name: str
    version: str


def package_versions(names: tuple[str, ...] = BOOK_PACKAGES) -> tuple[ComponentVersion, ...]:
    """The installed version of each distribution in ``names``, in that order."""
    versions = []
    for name in names:
        try:
            versions.append(ComponentVersion(name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            versions.append(ComponentVersion(name, "not installed"))
    return tuple(versions)


_ASSIGNMENT = re.compile(r"\b([A-Z][A-Z0-9_]*)=([0-9][0-9A-Za-z.+-]*)")
_PINNED = re.compile(r"[\"']?((?:@[\w.-]+/)?[\w.-]+)@\$\{?([A-Z][A-Z0-9_]*)\}?")


def vendored_js_from_text(text: str, source: str = "<text>") -> tuple[ComponentVersion, ...]:
    """The npm packages a vendoring script pins, as ``package@$VAR`` with ``VAR=version`` set in the script.

    Raises
    ------
    PlannerInputError
        No pinned package found, or a package pinned to a variable the script never sets.
    """
    assigned = dict(_ASSIGNMENT.findall(text))
    pinned = _PINNED.findall(text)
    if not pinned:
        raise PlannerInputError(
            f"{source}: no npm package pinned as name@$VERSION_VARIABLE; expected a line like "
            'npm pack "vega@$VEGA" with VEGA=6.4.0 set earlier in the script'
        )
    versions = []
    for package, variable in pinned:
        if variable not in assigned:
            raise PlannerInputError(f"{source}: {package} is pinned to ${variable}, which the script never sets")
        versions.append(ComponentVersion(package, assigned[variable]))
    return tuple(dict.fromkeys(versions))


def read_vendored_js(path: str | Path) -> tuple[ComponentVersion, ...]:
    """Read ``book/_js/vendor.sh`` (or a script like it); see :func:`vendored_js_from_text`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlannerInputError(f"{path}: no such file (expected the book's JavaScript vendoring script)") from None
    except UnicodeDecodeError:
        raise PlannerInputError(f"{path}: not a text file (expected a shell script)") from None
    return vendored_js_from_text(text, source=str(path))


def versions_markdown(components: tuple[ComponentVersion, ...], kind: str) -> str:
    """A two-column Markdown table: ``kind`` (e.g. "package") and version."""
    return markdown_table((kind, "version"), [(f"`{c.name}`", c.version) for c in components])
