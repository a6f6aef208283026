"""The chapter "From a load test to thresholds" really uses its `loadtest_path` parameter."""

from pathlib import Path

import nbformat
import papermill as pm
import pytest

BOOK = Path(__file__).resolve().parent.parent / "book"


def _glued(notebook, name: str) -> str:
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            scrap = output.get("metadata", {}).get("scrapbook", {})
            if scrap.get("name") == name:
                return output["data"][scrap.get("mime_prefix", "") + "text/plain"]
    raise AssertionError(f"nothing glued under {name!r}")


@pytest.mark.parametrize("path, ttft_ms, itl_ms, knee", [
    ("../data/loadtests/qwen2.5-7b_guidellm_benchmarks.json", 2000.0, 50.0, 32.0),
    ("../tests/data/loadtests/guidellm_v05_qwen3-0.6b_concurrency", 250.0, 50.0, 4.0),
])
def test_papermill_run_on_another_file_reports_its_knee(tmp_path, path, ttft_ms, itl_ms, knee):
    out = tmp_path / "out.ipynb"
    pm.execute_notebook(
        str(BOOK / "loadtest_thresholds.ipynb"), str(out), cwd=str(BOOK), kernel_name="python3",
        parameters={"loadtest_path": path, "ttft_p99_slo_ms": ttft_ms, "itl_p99_slo_ms": itl_ms},
        progress_bar=False,
    )
    assert float(_glued(nbformat.read(out, as_version=4), "knee_concurrency_value")) == knee
