"""Sphinx extension: each page loads the browser libraries it uses, and nothing more.

- vega, vega-lite, vega-embed and the book's chart fitting (``charts.js``) go
  only on pages that hold a chart (``planner.charts.viz`` marks each with
  ``class="planner-altair"``), below myst-nb's require.js (priority 500) so
  vega's UMD wrapper defines the page-global ``vegaEmbed`` instead of an AMD module.
- myst-nb adds the ipywidgets manager (require.js and the 3.6 MB embed-amd.js)
  and the saved widget state to every page whose notebook created a widget,
  shown or not. They stay only where a widget view is on the page.
- The theme's ``fontawesome.js`` (1.5 MB: every Font Awesome icon as SVG paths)
  goes: the theme's stylesheet already draws the dozen icons it uses from the
  Font Awesome web font (fa-solid-900.woff2, 156 KB, fetched once).
- Every page gets the book's favicon, so browsers stop asking for /favicon.ico.
- Inline-code words longer than ``LONG_CODE_CHARS`` get the class ``long``, which
  book.css lets break so they never widen a phone's column; shorter ones (flags
  like ``--max-num-seqs``) stay whole.

The decisions are pure functions of the page body (:func:`page_libraries`) and
are unit-tested; :func:`setup` wires them into the build.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from sphinx.application import Sphinx

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
FAVICON = HERE / "favicon.svg"

CHART_MARKER = 'class="planner-altair"'
CHART_SCRIPTS = ("vega/vega.min.js", "vega/vega-lite.min.js", "vega/vega-embed.min.js", "charts.js")
CHART_PRIORITY = 300
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

_FONTAWESOME_JS = re.compile(r"""[ \t]*<script\b[^>]*\bsrc=["'][^"']*/fontawesome\.js[^"']*["'][^>]*>\s*</script>\n?""")


# Inline code at most this long stays on one line; longer (a dotted Python name, a
# controller flag) may break, so it never widens a phone's column (book.css).
LONG_CODE_CHARS = 28
_INLINE_CODE_WORD = re.compile(r'<span class="pre">([^<]*)</span>')


def mark_long_code(body: str, limit: int = LONG_CODE_CHARS) -> str:
    """Give inline-code words longer than ``limit`` characters the class ``long``."""

    def mark(match: re.Match) -> str:
        word = html.unescape(match.group(1))
        return f'<span class="pre long">{match.group(1)}</span>' if len(word) > limit else match.group(0)

    return _INLINE_CODE_WORD.sub(mark, body)


def page_libraries(body: str) -> dict[str, bool]:
    """Which libraries a page body needs: ``{"charts": ..., "widgets": ...}``."""
    return {"charts": CHART_MARKER in body, "widgets": WIDGET_VIEW in body}


def without_fontawesome_js(html: str) -> str:
    """``html`` without the theme's ``<script src=".../fontawesome.js">`` tag."""
    return _FONTAWESOME_JS.sub("", html)


def is_widget_script(script, widget_files) -> bool:
    """True for myst-nb's widget manager scripts and the widget state it writes into the page."""
    filename = str(getattr(script, "filename", "") or "")
    attributes = getattr(script, "attributes", {}) or {}
    # Sphinx files local scripts under "_static/".
    names = {filename, filename.removeprefix("_static/")}
    return bool(names & set(widget_files)) or attributes.get("type") == WIDGET_STATE


def _add_page_libraries(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    if context.get("body"):
        context["body"] = mark_long_code(context["body"])
    needs = page_libraries(context.get("body") or "")
    if needs["charts"]:
        for path in CHART_SCRIPTS:
            app.add_js_file(path, priority=CHART_PRIORITY)
    scripts = context.get("script_files")
    if not needs["widgets"] and isinstance(scripts, list):
        widget_files = set(getattr(app.config, "nb_ipywidgets_js", None) or ())
        scripts[:] = [s for s in scripts if not is_widget_script(s, widget_files)]
    context["planner_without_fontawesome_js"] = without_fontawesome_js


def _configure(app: Sphinx, config) -> None:
    config.templates_path = [*config.templates_path, str(TEMPLATES)]
    if not config.html_favicon:
        config.html_favicon = str(FAVICON)


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _configure)
    # After myst-nb's handler (priority 500), which adds the widget scripts.
    app.connect("html-page-context", _add_page_libraries, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
