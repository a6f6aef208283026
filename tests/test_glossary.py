"""The glossary names every quantity the planner's public API and the book's parameters cells use."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import pkgutil
import re

import yaml

import planner
from tests.conftest import REPO_ROOT

GLOSSARY = REPO_ROOT / "book" / "nomenclature.md"
# Names that end in one of these carry a unit or a count, so they are quantities.
_QUANTITY = re.compile(r"_(s|ms|rps|tps|frac|pct|tokens|gib|bytes|replicas|requests|blocks|seconds|count)$")
_PARAMETER_LINE = re.compile(r"^(\w+)\s*(?::[^=]+)?=.*#.*\[[^\]]+\][^#]*$")


def glossary_terms() -> dict[str, str]:
    """Term -> definition text, from every ``{glossary}`` block of the page.

    Consecutive unindented lines are names of one entry; the indented lines after them define it.
    """
    terms: dict[str, str] = {}
    group: list[str] = []
    defining = inside = False
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside, group, defining = line.startswith("```{glossary}"), [], False
        elif inside and line.strip():
            if line.startswith(" "):
                defining = True
                for term in group:
                    terms[term] = (terms[term] + " " + line.strip()).strip()
            else:
                if defining:
                    group, defining = [], False
                group.append(line.strip())
                terms[line.strip()] = ""
    return terms


def public_quantity_names() -> dict[str, str]:
    """Unit-suffixed parameter and field names of everything the planner exports, with one place each is used."""
    names: dict[str, str] = {}
    for module_info in pkgutil.walk_packages(planner.__path__, "planner."):
        if module_info.name.endswith("__main__"):
            continue
        if module_info.name.startswith("planner.simulate.fast."):
            # The compiled kernels' modules: arrays that mirror the Python model's state, not an API a
            # reader calls (the engine's API is planner.simulate.fast itself, which is checked).
            continue
        module = importlib.import_module(module_info.name)
        for attribute in getattr(module, "__all__", ()):
            obj = getattr(module, attribute)
            if dataclasses.is_dataclass(obj):
                fields = [f.name for f in dataclasses.fields(obj)]
            elif inspect.isfunction(obj) or inspect.isclass(obj):
                try:
                    fields = list(inspect.signature(obj).parameters)
                except (TypeError, ValueError):
                    fields = []
            else:
                fields = []
            for name in fields:
                if _QUANTITY.search(name):
                    names.setdefault(name, f"{module_info.name}.{attribute}")
    return names


def book_parameter_names() -> dict[str, str]:
    """Names of the book's parameters cells whose comment gives a unit in brackets."""
    names: dict[str, str] = {}
    for path in sorted((REPO_ROOT / "book").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if "parameters" not in cell.get("metadata", {}).get("tags", []):
                continue
            for line in "".join(cell["source"]).splitlines():
                match = _PARAMETER_LINE.match(line)
                if match:
                    names.setdefault(match.group(1), path.name)
    return names


def test_every_public_quantity_of_the_planner_is_in_the_glossary():
    terms = glossary_terms()
    missing = {name: where for name, where in public_quantity_names().items() if name not in terms}
    assert not missing, (
        "add these names (and their unit) to book/nomenclature.md, or rename them to a glossary name: "
        + ", ".join(f"{name} ({where})" for name, where in sorted(missing.items()))
    )


def test_every_book_parameter_with_a_unit_is_in_the_glossary():
    terms = glossary_terms()
    missing = {name: where for name, where in book_parameter_names().items() if name not in terms}
    assert not missing, "add to book/nomenclature.md: " + ", ".join(
        f"{name} ({where})" for name, where in sorted(missing.items())
    )


def test_each_quantity_has_a_definition_with_a_unit():
    for term, definition in glossary_terms().items():
        if term.startswith("_"):
            continue
        assert definition.strip(), f"{term} has no definition"
        assert re.search(r"\[[^\]]+\]$", definition.strip()), f"{term}: the definition must end with [unit]"


def test_the_prose_symbols_are_defined():
    text = " ".join(glossary_terms().values())
    for symbol in ("Written K.", "Written T.", "written W.", "Written μ.", "written L:", "written λ."):
        assert symbol in text


def test_the_glossary_is_titled_so_and_comes_last_in_the_book():
    assert "Glossary" in GLOSSARY.read_text(encoding="utf-8").splitlines()[0]
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [chapter["file"] for part in toc["parts"] for chapter in part["chapters"]]
    assert files[-1] == "book/nomenclature"
    assert toc["parts"][-1]["caption"] in ("Reference", "Appendix")
    assert files.index("book/references") < files.index("book/nomenclature")


def test_polling_entries_state_what_keda_polls_for():
    # Issue 20: pollingInterval drives activation and the metrics cache; each HPA sync queries afresh otherwise.
    terms = glossary_terms()
    for term in ("polling_interval_s", "polling_s"):
        assert "useCachedMetrics" in terms[term] and "0 <-> 1" in terms[term]
    assert "useCachedMetrics" in terms["eval_interval_s"] and "afresh" in terms["eval_interval_s"]
    assert "reads its triggers. [s]" not in GLOSSARY.read_text(encoding="utf-8")
