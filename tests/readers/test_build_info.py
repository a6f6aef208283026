"""The status page's versions: installed packages and the vendored JavaScript pins."""

from __future__ import annotations

from importlib import metadata

import pytest

from planner.errors import PlannerInputError
from planner.readers.build_info import (
    ComponentVersion,
    package_versions,
    read_vendored_js,
    vendored_js_from_text,
    versions_markdown,
)
from tests.conftest import REPO_ROOT


def test_package_versions_come_from_the_installed_metadata():
    versions = package_versions(("planner", "numpy", "no-such-distribution-xyz"))
    assert versions[0] == ComponentVersion("planner", metadata.version("planner"))
    assert versions[1].version == metadata.version("numpy")
    assert versions[2] == ComponentVersion("no-such-distribution-xyz", "not installed")


def test_every_book_package_is_installed():
    assert all(v.version != "not installed" for v in package_versions())


def test_the_real_vendor_script_pins_the_chart_libraries():
    pins = {c.name: c.version for c in read_vendored_js(REPO_ROOT / "book" / "_js" / "vendor.sh")}
    assert set(pins) == {"vega", "vega-lite", "vega-embed", "@jupyter-widgets/html-manager", "requirejs"}
    text = (REPO_ROOT / "book" / "_js" / "vendor.sh").read_text()
    assert f"VEGALITE={pins['vega-lite']}" in text


def test_a_script_pin_is_read_with_its_variable():
    text = 'A=1.2.3 B=4.5.6\nnpm pack "alpha@$A" "@scope/beta@${B}"\n'
    assert vendored_js_from_text(text) == (ComponentVersion("alpha", "1.2.3"), ComponentVersion("@scope/beta", "4.5.6"))


def test_a_pin_to_an_unset_variable_is_named():
    with pytest.raises(PlannerInputError, match=r"vendor.sh: alpha is pinned to \$A, which the script never sets"):
        vendored_js_from_text('npm pack "alpha@$A"\n', source="vendor.sh")


def test_a_script_without_pins_is_refused(tmp_path):
    script = tmp_path / "vendor.sh"
    script.write_text("echo hello\n")
    with pytest.raises(PlannerInputError, match="no npm package pinned"):
        read_vendored_js(script)
    with pytest.raises(PlannerInputError, match="no such file"):
        read_vendored_js(tmp_path / "missing.sh")


def test_versions_markdown():
    assert versions_markdown((ComponentVersion("vega", "6.4.0"),), "npm package").splitlines() == [
        "| npm package | version |",
        "|---|---|",
        "| `vega` | 6.4.0 |",
    ]
