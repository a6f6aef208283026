"""The metric-names-by-version table agrees with the planner's catalogue and with real scrapes."""

from __future__ import annotations

import pytest

from planner.markdown import markdown_table
from planner.readers.metrics import read_metrics_scrape
from planner.vllm.metric_versions import (
    CURRENT_VLLM_VERSION,
    METRIC_HISTORY,
    export_status,
    exported_by_default,
    history_releases,
    metric_rows,
    metric_table_markdown,
    parse_version,
    promql_markdown,
    release_matrix_markdown,
)
from planner.vllm.promql import LEGACY_ONLY, SIGNALS, queries_for

CATALOGUE = {name for s in SIGNALS for name in (s.current, *s.deprecated)} | set(LEGACY_ONLY)


def test_history_covers_exactly_the_names_the_planner_knows():
    assert {entry.name for entry in METRIC_HISTORY} == CATALOGUE
    assert len(METRIC_HISTORY) == len(CATALOGUE)


def test_each_row_carries_the_signal_kind_and_unit():
    rows = {row.name: row for row in metric_rows()}
    assert set(rows) == CATALOGUE
    for signal in SIGNALS:
        for name in (signal.current, *signal.deprecated):
            assert rows[name].kind == signal.kind
    assert rows["vllm:kv_cache_usage_perc"].unit == "fraction (0-1)"
    assert rows["vllm:request_queue_time_seconds"].unit == "s"
    assert rows["vllm:num_requests_swapped"].kind == "gauge"


def test_deprecated_names_point_at_their_successor_and_current_names_are_current():
    rows = {row.name: row for row in metric_rows()}
    for signal in SIGNALS:
        assert rows[signal.current].deprecated == rows[signal.current].hidden == ""
        for old in signal.deprecated:
            assert rows[old].replaced_by == signal.current
            assert rows[old].deprecated and rows[old].hidden


def test_promql_is_what_queries_for_writes():
    rows = {row.name: row for row in metric_rows()}
    current = queries_for({s.key: s.current for s in SIGNALS})
    assert set(rows["vllm:kv_cache_usage_perc"].promql) == {
        current["kv_usage_fleet_sum"],
        current["kv_usage_per_pod_avg"],
    }
    assert rows["vllm:num_preemptions"].promql == (current["preemptions_per_s"],)
    assert rows["vllm:gpu_cache_usage_perc"].promql == (
        "sum(vllm:gpu_cache_usage_perc)",
        "avg(vllm:gpu_cache_usage_perc)",
    )
    assert "vllm:time_per_output_token_seconds_bucket" in rows["vllm:time_per_output_token_seconds"].promql[0]
    assert rows["vllm:cpu_cache_usage_perc"].promql == ()


def test_deprecation_follows_the_hide_then_remove_policy():
    for entry in METRIC_HISTORY:
        if entry.deprecated:
            assert parse_version(entry.deprecated) < parse_version(entry.hidden)
        if entry.removed:
            assert parse_version(entry.hidden) < parse_version(entry.removed)
        assert all(url.startswith("https://") for _, url in entry.sources)


@pytest.mark.parametrize(("text", "expected"), [("0.9.2", (0, 9, 2)), ("v0.11", (0, 11)), ("V0", (0,))])
def test_parse_version(text, expected):
    assert parse_version(text) == expected


@pytest.mark.parametrize("text", ["", "latest", "0", "0.11.x"])
def test_parse_version_rejects_other_text(text):
    with pytest.raises(ValueError, match="not a vLLM release number"):
        parse_version(text)


def test_exported_by_default_at_the_edges_of_each_rename():
    assert exported_by_default("vllm:gpu_cache_usage_perc", "0.10.2")
    assert not exported_by_default("vllm:gpu_cache_usage_perc", "0.11")
    assert not exported_by_default("vllm:kv_cache_usage_perc", "0.9.1")
    assert exported_by_default("vllm:kv_cache_usage_perc", "0.9.2")
    assert not exported_by_default("vllm:num_requests_swapped", "0.9")


def _catalogued(scrape) -> set[str]:
    return set(read_metrics_scrape(scrape).exported) & CATALOGUE


def test_a_real_0_25_1_scrape_shows_exactly_the_names_the_history_predicts(shared_dir):
    for state in ("idle", "loaded"):
        shown = _catalogued(shared_dir / "real-world" / "metrics" / f"vllm-0.25.1-opt125m-tp2-{state}.txt")
        assert shown == {name for name in CATALOGUE if exported_by_default(name, "0.25.1")}


def test_a_real_v1_scrape_near_0_11_matches_the_0_11_history(shared_dir):
    # The scrape's exact release was not recorded; its labels place it near 0.11.
    shown = _catalogued(shared_dir / "real-world" / "metrics" / "vllm-v1-qwen1.5-0.5b-chat-idle.txt")
    assert shown == {name for name in CATALOGUE if exported_by_default(name, "0.11")}
    assert "vllm:time_per_output_token_seconds" in shown and "vllm:gpu_cache_usage_perc" not in shown


def test_tables_name_every_metric_once_per_row():
    table = metric_table_markdown()
    lines = table.splitlines()
    assert len(lines) == len(metric_rows()) + 2
    for row in metric_rows():
        assert sum(line.startswith(f"| `{row.name}`") for line in lines) == 1
    promql = promql_markdown()
    assert (
        "```text\nhistogram_quantile(0.99, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket[5m])))" in promql
    )
    assert "cpu_cache_usage_perc" not in promql


def test_markdown_table_escapes_pipes_and_rejects_ragged_rows():
    assert markdown_table(("a", "b"), [("x|y", "z")]).splitlines()[2] == "| x\\|y | z |"
    with pytest.raises(ValueError, match="row 1 has 1 cells for 2 headers"):
        markdown_table(("a", "b"), [("x",)])


def test_history_runs_to_the_current_release_with_checked_removals():
    history = {entry.name: entry for entry in METRIC_HISTORY}
    # The old inter-token histogram: still registered (hidden) in 0.14.0's wheel, gone from 0.15.0's.
    old_itl = history["vllm:time_per_output_token_seconds"]
    assert (old_itl.hidden, old_itl.removed) == ("0.12", "0.15")
    assert export_status(old_itl.name, "0.14.1") == "hidden"
    assert export_status(old_itl.name, "0.15") == "removed"
    # The prefix-cache counters lost their gpu_ prefix with the KV gauge (#18354) and followed its life.
    for new, old in (
        ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"),
        ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"),
    ):
        assert history[new].since == "0.9.2" and history[old].replaced_by == new
        assert (history[old].hidden, history[old].removed) == (
            history["vllm:gpu_cache_usage_perc"].hidden,
            history["vllm:gpu_cache_usage_perc"].removed,
        )
    # Every current name is exported by the release the book follows, with that release's source cited.
    for signal in SIGNALS:
        assert export_status(signal.current, CURRENT_VLLM_VERSION) == "exported"
        assert any(f"v{CURRENT_VLLM_VERSION}/" in url for _, url in history[signal.current].sources)
        for old in signal.deprecated:
            assert export_status(old, CURRENT_VLLM_VERSION) == "removed"


def test_the_release_matrix_has_a_column_per_change_and_the_current_release():
    releases = history_releases()
    assert releases[-1] == CURRENT_VLLM_VERSION and "0.15" in releases and "0.9.2" in releases
    assert [parse_version(v) for v in releases] == sorted(parse_version(v) for v in releases)
    lines = release_matrix_markdown().splitlines()
    releases = releases[::-1]  # newest first
    assert lines[0] == "| metric | " + " | ".join(releases) + " |"
    assert len(lines) == len(METRIC_HISTORY) + 2
    row = next(line for line in lines if line.startswith("| `vllm:time_per_output_token_seconds`"))
    cells = [cell.strip() for cell in row.strip("|").split("|")][1:]
    assert cells[releases.index("0.11")] == "yes" and cells[releases.index("0.12")] == "hidden"
    assert cells[releases.index("0.15")] == "" and cells[0] == ""  # gone from the current release
