"""One vLLM release across the planner and the book: defined once, followed by every default."""

from __future__ import annotations

import ast
import re

import nbformat
import pytest
import yaml

from planner.capacity.kv_cache import RULE_RELEASES, ServingSpec
from planner.vllm.metric_versions import history_releases, parse_version
from planner.vllm.release import CURRENT_VLLM_VERSION
from tests.conftest import DATA_DIR, REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "book").glob("*.ipynb"))
# A vLLM-style release number written as a string: "0.11", "v0.19.1".
RELEASE_LITERAL = re.compile(r"v?0\.\d+(\.\d+)*")


def _string_constants(source: str) -> list[str]:
    return [
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def test_the_release_is_defined_once_in_the_planner():
    assert RELEASE_LITERAL.fullmatch(CURRENT_VLLM_VERSION)
    assert ServingSpec().vllm_version == CURRENT_VLLM_VERSION
    assert RULE_RELEASES["v1-capacity"] == CURRENT_VLLM_VERSION
    # The metric history runs to the same release, and nothing in it is newer.
    assert history_releases()[-1] == CURRENT_VLLM_VERSION
    defining = [
        path.relative_to(REPO_ROOT).as_posix()
        for path in (REPO_ROOT / "planner").rglob("*.py")
        if f'"{CURRENT_VLLM_VERSION}"' in path.read_text(encoding="utf-8")
    ]
    assert defining == ["planner/vllm/release.py"]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_notebooks_take_the_release_from_the_planner(notebook):
    nb = nbformat.read(notebook, as_version=4)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        releases = [text for text in _string_constants(cell.source) if RELEASE_LITERAL.fullmatch(text)]
        assert not releases, (
            f"{notebook.name} cell {index}: hard-coded vLLM release(s) {releases}; use "
            "planner.vllm.release.CURRENT_VLLM_VERSION (or planner.capacity.kv_cache.RULE_RELEASES)"
        )
        if "parameters" in cell.metadata.get("tags", []):
            for node in ast.parse(cell.source).body:
                if isinstance(node, ast.AnnAssign) and "version" in node.target.id:
                    assert isinstance(node.value, ast.Constant) and node.value.value == "", (
                        f'{notebook.name}: parameter {node.target.id} must default to "" '
                        "(the planner's current release)"
                    )


def test_the_metrics_chapter_resolves_an_empty_version_to_the_constant():
    source = "\n".join(
        c.source
        for c in nbformat.read(REPO_ROOT / "book" / "vllm_metrics.ipynb", as_version=4).cells
        if c.cell_type == "code"
    )
    assert "vllm_version or CURRENT_VLLM_VERSION" in source


def test_bundled_manifests_run_the_current_release():
    images = []
    for path in sorted((DATA_DIR / "manifests").rglob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            text = yaml.safe_dump(document)
            images += [(path.name, tag) for tag in re.findall(r"vllm/vllm-openai:(\S+)", text)]
    assert images, "no vLLM image found in the bundled manifests"
    assert {tag for _, tag in images} == {f"v{CURRENT_VLLM_VERSION}"}, images


def test_rule_releases_are_in_order_and_name_their_rule():
    from planner.capacity.kv_cache import kv_rule

    assert list(RULE_RELEASES) == ["v0", "v1-early", "v1-blocks", "v1-capacity"]
    assert all(kv_rule(release) == rule for rule, release in RULE_RELEASES.items())
    versions = [parse_version(release) for release in RULE_RELEASES.values()]
    assert versions == sorted(versions)
