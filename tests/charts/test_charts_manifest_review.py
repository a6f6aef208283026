"""Tests for planner.charts.manifest_review: findings rendered as text a reader can use."""

import re

from planner.charts.manifest_review import findings_chart, findings_frame, findings_table
from planner.manifests.lint import LintSettings, lint
from planner.readers.workload import read_manifest_set
from tests.conftest import DATA_DIR

REVIEW = DATA_DIR / "manifests" / "review"


def _frame():
    return findings_frame(lint(read_manifest_set([REVIEW]), LintSettings(itl_ms=50.0)))


def test_findings_show_code_as_code_never_as_backticks():
    frame = _frame()
    assert frame["fix"].str.contains("`").any()  # the linter writes Markdown
    html = findings_table(frame).to_html()
    assert "`" not in html and "<code>planner grace</code>" in html


def test_chart_counts_findings_per_file_and_severity():
    frame = _frame()
    spec = findings_chart(frame).to_dict()
    assert spec["encoding"]["y"]["field"] == "file" and spec["encoding"]["color"]["field"] == "severity"
    rows = next(iter(spec["datasets"].values()))
    per_file = {}
    for row in rows:
        per_file[row["file"]] = per_file.get(row["file"], 0) + row["findings"]
    assert per_file == frame.groupby("file").size().to_dict()
    assert max(per_file.values()) > 1  # bars of different lengths, unlike one bar per rule
    errors = frame[frame.severity == "error"].groupby("file").size()
    assert spec["encoding"]["y"]["sort"][0] == errors.idxmax()
    assert all(re.fullmatch(r"[a-z0-9-]+(, [a-z0-9-]+)*", row["rules"]) for row in rows)


def test_workloads_table_has_headers_with_units_and_fits_the_column():
    from planner.charts.manifest_review import WORKLOAD_COLUMNS, workloads_frame, workloads_table

    manifests = read_manifest_set([REVIEW])
    frame = workloads_frame(manifests.workloads)
    assert tuple(frame.columns) == WORKLOAD_COLUMNS
    assert not [c for c in frame.columns if re.search(r"[a-z]_[a-z]", c)]
    chat = frame.set_index("Workload").loc["Deployment chat"]
    assert chat["Grace period (s)"] == "unset (30)" and chat["--max-model-len (tokens)"] == "4096"
    assert "white-space: normal" in workloads_table(manifests.workloads).to_html()
