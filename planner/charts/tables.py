"""Tables as the pages show them: each column under its header with units, in its own format."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

__all__ = ["compact_table_styles", "headed"]


def headed(
    frame: pd.DataFrame, columns: Mapping[str, tuple[str, str]], *, percent_in_header: bool = False
) -> tuple[pd.DataFrame, dict[str, str]]:
    """``frame`` with each column renamed to its header, and each header's format.

    Parameters
    ----------
    frame : pandas.DataFrame
        Not changed.
    columns : mapping of str to (str, str)
        Column name to its header and its ``str.format`` spec.
    percent_in_header : bool
        Fractions (a ``%`` spec) print as plain numbers times 100, under a
        header that carries the "(%)".

    Returns
    -------
    pandas.DataFrame, dict of str to str

    Raises
    ------
    ValueError
        A column has no header.
    """
    unknown = [c for c in frame.columns if c not in columns]
    if unknown:
        raise ValueError(f"no header for column {unknown[0]!r}")
    shown = frame.copy()
    formats = {}
    for column in shown.columns:
        header, spec = columns[column]
        if percent_in_header and spec.endswith("%}"):
            shown[column] = 100.0 * shown[column]
            spec = spec.replace("%}", "f}")
        formats[header] = spec
    return shown.rename(columns={c: columns[c][0] for c in shown.columns}), formats


def compact_table_styles(first_column_max_em: float) -> list[dict[str, str]]:
    """Wrapping headers and compact cells, so ten or more columns fit the book's text column."""
    return [
        {"selector": "", "props": "font-size: 0.8em; border-collapse: collapse;"},
        {
            "selector": "th",
            "props": "white-space: normal; vertical-align: bottom; text-align: right; "
            "padding: 2px 3px; line-height: 1.2;",
        },
        {"selector": "td", "props": "text-align: right; padding: 2px 3px;"},
        {"selector": "th.col0, td.col0", "props": f"text-align: left; max-width: {first_column_max_em:g}em;"},
    ]
