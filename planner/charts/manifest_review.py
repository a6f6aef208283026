"""Table and chart for the chapter "Reviewing the manifests you run".

The findings come from :func:`planner.manifests.lint.lint`; these functions only lay
them out to fit the book's column (about 650 px).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import altair as alt
import pandas as pd

from planner.manifests.lint import SEVERITIES, Finding
from planner.markdown import inline_html

__all__ = [
    "WORKLOAD_COLUMNS",
    "findings_chart",
    "findings_frame",
    "findings_table",
    "workloads_frame",
    "workloads_table",
]

_SEVERITY_COLOURS = {"error": "#c0392b", "warning": "#e67e22", "info": "#7f8c8d"}


def findings_frame(findings: Iterable[Finding]) -> pd.DataFrame:
    """One row per finding: ``file`` (name only), ``line``, ``severity``, ``rule``, ``why``, ``fix``, ``path``."""
    rows = [(Path(f.file).name, f.line, f.severity, f.rule, f.why, f.fix, f.path, f.document) for f in findings]
    return pd.DataFrame(rows, columns=["file", "line", "severity", "rule", "why", "fix", "path", "document"])


def findings_table(frame: pd.DataFrame, rules_page: str = "lint_rules.html"):
    """The findings as an HTML table that wraps inside the column; each rule links to its section.

    The reasons and fixes are Markdown (flags and fields in backticks); they
    are rendered as HTML, code as code, and everything else escaped.
    """
    shown = frame.assign(
        where=frame["file"] + ":" + frame["line"].astype(str),
        rule=[
            f'<a href="{rules_page}#{rule}">{rule}</a><br><small>{severity}</small>'
            for rule, severity in zip(frame["rule"], frame["severity"], strict=True)
        ],
        finding=[
            f"{inline_html(why)}<br><b>Fix:</b> {inline_html(fix)}"
            for why, fix in zip(frame["why"], frame["fix"], strict=True)
        ],
    )[["where", "rule", "finding"]]
    return shown.style.hide(axis="index").set_table_styles(
        [
            {"selector": "", "props": "table-layout: fixed; width: 100%; max-width: 650px; font-size: 0.85em;"},
            {
                "selector": "td, th",
                "props": "text-align: left; vertical-align: top; white-space: normal; "
                "overflow-wrap: anywhere; padding: 4px;",
            },
            {"selector": "th.col_heading.col0, td.col0", "props": "width: 24%;"},
            {"selector": "th.col_heading.col1, td.col1", "props": "width: 24%;"},
        ]
    )


def findings_chart(frame: pd.DataFrame) -> alt.Chart:
    """Findings per file, stacked by severity: where to start, in a folder of many manifests.

    Files are sorted by their number of errors, then of all findings; the
    tooltip names the rules behind each bar segment.
    """
    counts = frame.groupby(["file", "severity"], as_index=False).agg(
        findings=("rule", "size"), rules=("rule", lambda rules: ", ".join(sorted(set(rules))))
    )
    errors = frame[frame["severity"] == "error"].groupby("file").size()
    totals = frame.groupby("file").size()
    order = sorted(totals.index, key=lambda f: (-int(errors.get(f, 0)), -int(totals[f]), f))
    return (
        alt.Chart(counts)
        .mark_bar()
        .encode(
            y=alt.Y("file:N", sort=order, title=None, axis=alt.Axis(labelLimit=200)),
            x=alt.X("findings:Q", title="Findings", axis=alt.Axis(format="d", tickMinStep=1)),
            color=alt.Color(
                "severity:N",
                title="Severity",
                scale=alt.Scale(domain=list(SEVERITIES), range=[_SEVERITY_COLOURS[s] for s in SEVERITIES]),
                legend=alt.Legend(orient="bottom"),
            ),
            order=alt.Order("severity_rank:Q"),
            tooltip=["file", "severity", "findings", alt.Tooltip("rules:N", title="rules")],
        )
        .transform_calculate(
            severity_rank=" + ".join(f"(datum.severity == '{s}' ? {i} : 0)" for i, s in enumerate(SEVERITIES))
        )
        .properties(width=420, height=alt.Step(22), title="Findings per file, by severity")
    )


WORKLOAD_COLUMNS = (
    "Workload",
    "Grace period (s)",
    "preStop",
    "--shutdown-timeout (s)",
    "--max-num-seqs",
    "--max-model-len (tokens)",
    "GPUs",
)
"""The headers of :func:`workloads_frame`: the field or flag each column shows, with its unit."""


def workloads_frame(workloads) -> pd.DataFrame:
    """One row per vLLM container read: the settings the shutdown and batch rules use.

    Columns are :data:`WORKLOAD_COLUMNS`; a setting the manifest leaves out is
    empty, except the grace period, shown as ``unset (30)``.
    """
    rows = []
    for workload in workloads:
        for server in workload.servers:
            pre_stop = server.pre_stop
            rows.append(
                (
                    f"{workload.kind} {workload.name}",
                    "unset (30)"
                    if workload.termination_grace_period_s is None
                    else str(workload.termination_grace_period_s),
                    ""
                    if pre_stop is None
                    else (
                        f"{pre_stop.action} {pre_stop.sleep_s:g} s"
                        if pre_stop.sleep_s is not None
                        else pre_stop.action + (" (drains)" if pre_stop.drains else "")
                    ),
                    server.flags.get("--shutdown-timeout") or "",
                    server.flags.get("--max-num-seqs") or "",
                    server.flags.get("--max-model-len") or "",
                    "" if server.gpus is None else str(server.gpus),
                )
            )
    return pd.DataFrame(rows, columns=list(WORKLOAD_COLUMNS))


def workloads_table(workloads):
    """:func:`workloads_frame` as the page shows it: headers that wrap, so seven columns fit the text column."""
    return (
        workloads_frame(workloads)
        .style.hide(axis="index")
        .set_table_styles(
            [
                {"selector": "", "props": "font-size: 0.85em; border-collapse: collapse;"},
                {
                    "selector": "th",
                    "props": "white-space: normal; vertical-align: bottom; text-align: left; "
                    "padding: 2px 6px; line-height: 1.2;",
                },
                {"selector": "td", "props": "text-align: left; padding: 2px 6px;"},
            ]
        )
    )
