"""Text for the book's pages: Markdown tables, counted nouns, shares and inline Markdown as HTML."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

__all__ = ["at_least_share", "inline_html", "link", "markdown_table", "plural"]


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


def plural(count, singular: str, plural_form: str | None = None) -> str:
    """A count and its noun, in the singular for exactly one: ``1 scale event``, ``3 scale events``.

    Parameters
    ----------
    count : int or float
        Whole counts print with thousands separators, others with ``:g``.
    singular : str
    plural_form : str, optional
        Default: ``singular + "s"``.

    Examples
    --------
    >>> plural(1, "scale event"), plural(0, "flap cycle"), plural(2, "GPU"), plural(1200, "request")
    ('1 scale event', '0 flap cycles', '2 GPUs', '1,200 requests')
    >>> plural(1.0, "replica"), plural(2.5, "replica")
    ('1 replica', '2.5 replicas')
    """
    number = float(count)
    text = f"{int(number):,}" if number.is_integer() else f"{number:g}"
    return f"{text} {singular if number == 1 else (plural_form or singular + 's')}"


def at_least_share(frac: float, noun: str) -> str:
    """A lower bound on a share, in words that stay true at the top: ``at least 97.5% of requests``.

    Examples
    --------
    >>> at_least_share(1.0, "requests"), at_least_share(0.9996, "requests"), at_least_share(0.975, "requests")
    ('all requests', 'more than 99.9% of requests', 'at least 97.5% of requests')
    """
    if frac >= 1.0:
        return f"all {noun}"
    if f"{frac:.1%}" == "100.0%":  # rounds up to 100 % but is not all of them
        return f"more than 99.9% of {noun}"
    return f"at least {frac:.1%} of {noun}"


_CODE_SPAN = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


def inline_html(text: str) -> str:
    """One line of Markdown as HTML: code spans and bold; everything else is escaped, never interpreted.

    Examples
    --------
    >>> inline_html("Run `planner grace` and set **241** <s>")
    'Run <code>planner grace</code> and set <b>241</b> &lt;s&gt;'
    """
    escaped = html.escape(text, quote=False)
    return _BOLD.sub(r"<b>\1</b>", _CODE_SPAN.sub(r"<code>\1</code>", escaped))
