"""The manifest-review explorer: the findings follow the numbers the rules compare against."""

from __future__ import annotations

from planner.explorers.manifest_review import lint_explorer
from planner.lint import LintSettings, lint
from planner.readers.workload import read_manifest_set
from tests.conftest import DATA_DIR

MANIFESTS = read_manifest_set([DATA_DIR / "manifests" / "review"])


def test_the_list_is_the_linters_for_the_sliders_values():
    summary = lint_explorer(MANIFESTS, LintSettings(warmup_s=120.0)).children[-1]
    expected = lint(MANIFESTS, LintSettings(warmup_s=120.0, max_tokens=4096, itl_ms=50.0))
    assert f"{len(expected)} finding(s)" in summary.value
    assert all(f.rule in summary.value for f in expected)


def test_a_longer_answer_changes_the_findings():
    _, max_tokens, itl, summary = lint_explorer(MANIFESTS, LintSettings(warmup_s=120.0)).children
    short = summary.value
    max_tokens.value, itl.value = 32_768, 200.0  # a 109-minute drain: every grace period is too short
    assert summary.value != short
    longest = lint(MANIFESTS, LintSettings(warmup_s=120.0, max_tokens=32_768, itl_ms=200.0))
    assert f"{len(longest)} finding(s)" in summary.value and "short-grace" in summary.value
