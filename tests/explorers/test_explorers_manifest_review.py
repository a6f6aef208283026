"""The manifest-review explorer: the findings follow the numbers the rules compare against."""

from __future__ import annotations

from planner.explorers.manifest_review import lint_explorer
from planner.manifests.lint import LintSettings, lint
from planner.readers.workload import read_manifest_set
from tests.conftest import DATA_DIR

MANIFESTS = read_manifest_set([DATA_DIR / "manifests" / "review"])


def test_the_list_opens_on_the_linters_findings_for_the_given_settings():
    # None (from the manifests, or the rule's default) is each slider's 0: the list opens as the chapter's.
    for settings in (LintSettings(warmup_s=120.0), LintSettings(warmup_s=90.0, max_tokens=4096, itl_ms=50.0)):
        summary = lint_explorer(MANIFESTS, settings).children[-1]
        expected = lint(MANIFESTS, settings)
        assert f"{len(expected)} finding(s)" in summary.value
        assert all(
            f"{f.rule}</b> ({f.severity}) {f.file.rsplit('/', 1)[-1]}:{f.line}" in summary.value for f in expected
        )
    assert "max_tokens from the manifests" in lint_explorer(MANIFESTS, LintSettings()).children[-1].value


def test_a_longer_answer_changes_the_findings():
    _, max_tokens, itl, summary = lint_explorer(MANIFESTS, LintSettings(warmup_s=120.0)).children
    short = summary.value
    max_tokens.value, itl.value = 32_768, 200.0  # a 109-minute drain: every grace period is too short
    assert summary.value != short
    longest = lint(MANIFESTS, LintSettings(warmup_s=120.0, max_tokens=32_768, itl_ms=200.0))
    assert f"{len(longest)} finding(s)" in summary.value and "short-grace" in summary.value
