"""One GPU price for the whole book: the constant, the simulator's default, the fleets and every notebook."""

import ast

import nbformat
import pytest
import yaml

from planner.capacity.cost import DEFAULT_USD_PER_GPU_HOUR
from planner.readers.fleet import read_fleet
from planner.simulate.fleet import FleetSpec
from tests.conftest import DATA_DIR, REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "book").glob("*.ipynb"))


def _parameter_defaults(path) -> dict[str, object]:
    """The typed literals of a notebook's ``parameters`` cell."""
    notebook = nbformat.read(path, as_version=4)
    cell = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
    return {
        node.target.id: ast.literal_eval(node.value)
        for node in ast.parse(cell.source).body
        if isinstance(node, ast.AnnAssign) and node.value is not None
    }


def test_the_simulator_and_an_empty_fleet_file_charge_the_default(tmp_path):
    assert FleetSpec().usd_per_gpu_hour == DEFAULT_USD_PER_GPU_HOUR
    (tmp_path / "fleet.yaml").write_text("")
    assert read_fleet(tmp_path / "fleet.yaml").usd_per_gpu_hour == DEFAULT_USD_PER_GPU_HOUR


@pytest.mark.parametrize("path", sorted((DATA_DIR / "fleets").glob("*.yaml")), ids=lambda p: p.name)
def test_bundled_fleets_use_the_default_or_say_nothing(path):
    price = (yaml.safe_load(path.read_text()) or {}).get("usd_per_gpu_hour", DEFAULT_USD_PER_GPU_HOUR)
    assert price == DEFAULT_USD_PER_GPU_HOUR


def test_every_notebook_prices_a_gpu_hour_at_the_default():
    priced = {
        path.name: _parameter_defaults(path)["usd_per_gpu_hour"]
        for path in NOTEBOOKS
        if "usd_per_gpu_hour" in _parameter_defaults(path)
    }
    assert {"lab.ipynb", "flapping.ipynb", "your_plan.ipynb"} <= set(priced)
    assert {name: price for name, price in priced.items() if price != DEFAULT_USD_PER_GPU_HOUR} == {}
