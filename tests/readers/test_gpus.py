"""The GPU memory table: bundled rows, reported memory preferred, bad rows named."""

import pytest

from planner.errors import PlannerInputError
from planner.readers.gpus import gpu_memory, read_gpu_table
from tests.conftest import DATA_DIR

TABLE = DATA_DIR / "gpus.csv"


def test_bundled_table_has_the_common_gpus():
    table = read_gpu_table(TABLE)
    for name in ("a10", "l4", "l40s", "a100-40gb", "a100-80gb", "h100-80gb", "h200", "b200", "mi300x"):
        assert name in table
    assert gpu_memory("rtx-3090", TABLE).usable_gib == 23.58  # reported by a public log
    assert gpu_memory("H100-80GB", TABLE).usable_gib == 80.0  # nominal where none is known


def test_bad_rows_and_names(tmp_path):
    bad = tmp_path / "gpus.csv"
    bad.write_text("name,memory_gib,reported_gib\nX1,lots,\n")
    with pytest.raises(PlannerInputError, match="row 2: column 'memory_gib' must be a number"):
        read_gpu_table(bad)
    bad.write_text("name,memory_gib,reported_gib\nX1,-4,\n")
    with pytest.raises(PlannerInputError, match="must be > 0"):
        read_gpu_table(bad)
    with pytest.raises(PlannerInputError, match="unknown GPU 'A11'"):
        gpu_memory("A11", TABLE)
    with pytest.raises(PlannerInputError, match="no such file"):
        read_gpu_table(tmp_path / "none.csv")
