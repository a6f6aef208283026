"""Tests for planner.markdown: counted nouns, shares and inline Markdown as the pages print them."""

import pytest

from planner.markdown import at_least_share, inline_html, markdown_table, plural


@pytest.mark.parametrize(
    ("count", "noun", "text"),
    [
        (1, "scale event", "1 scale event"),
        (2, "scale event", "2 scale events"),
        (0, "flap cycle", "0 flap cycles"),
        (1, "GPU", "1 GPU"),
        (8, "GPU", "8 GPUs"),
        (1.0, "replica", "1 replica"),
        (12_000, "request", "12,000 requests"),
        (2.5, "replica", "2.5 replicas"),
    ],
)
def test_plural_is_singular_for_exactly_one(count, noun, text):
    assert plural(count, noun) == text


def test_plural_takes_an_irregular_form():
    assert plural(3, "query", "queries") == "3 queries" and plural(1, "query", "queries") == "1 query"


def test_a_lower_bound_never_reads_at_least_100_percent():
    assert at_least_share(1.0, "requests") == "all requests"
    assert at_least_share(0.99991, "requests") == "more than 99.9% of requests"
    assert at_least_share(0.912, "requests") == "at least 91.2% of requests"
    assert "100.0%" not in at_least_share(0.9999, "requests")


def test_inline_html_renders_code_and_bold_and_escapes_the_rest():
    assert inline_html("Set `--shutdown-timeout 226` (from `planner grace`).") == (
        "Set <code>--shutdown-timeout 226</code> (from <code>planner grace</code>)."
    )
    assert inline_html("**Fix:** keep <b> & `a<b`") == "<b>Fix:</b> keep &lt;b&gt; &amp; <code>a&lt;b</code>"
    assert "`" not in inline_html("a `b` c `d`")


def test_markdown_table_still_refuses_a_short_row():
    with pytest.raises(ValueError, match="row 1 has 1 cells for 2 headers"):
        markdown_table(["a", "b"], [["x"]])
