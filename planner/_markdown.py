"""Markdown tables for the book's reference pages (string building only)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["link", "markdown_table"]


def _cell(text: str) -> str:
    # A pipe would end the cell and a newline the row.
    return text.replace("|", "\\|").replace("\n", " ")


def link(title: str, url: str) -> str:
    """A Markdown link ``[title](url)``."""
    return f"[{title}]({url})"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table.

    Raises
    ------
    ValueError
        A row with a different number of cells than ``headers``.
    """
    for number, row in enumerate(rows, start=1):
        if len(row) != len(headers):
            raise ValueError(f"row {number} has {len(row)} cells for {len(headers)} headers")
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
