"""Check the built book the way a reader's browser sees it.

Run after `jupyter-book build`: ``python tests/check_built_book.py _build/html``.

1. A static scan of every HTML page (and CSS file) for script, stylesheet,
   image, iframe and font references that point off the book (http:, https:
   or protocol-relative URLs).
2. Every page opened in headless Chromium (Playwright driving the system
   browser; no browser is ever downloaded), served from 127.0.0.1, asserting:

   - every chart (``div.planner-altair``) drew an SVG or a canvas;
   - moving each chart slider (``input[type=range]`` in ``.vega-bindings``)
     changes what its chart draws;
   - the page logs no console error and throws no uncaught exception;
   - the page requests nothing but the local server (others are blocked and
     reported);
   - no element is wider than the content column, and the page is no wider
     than the window (the rules are written above ``_TOO_WIDE`` below);
   - the page loads vega only if it draws a chart, and the ipywidgets manager
     only if it shows a widget; it never loads the theme's 1.5 MB
     ``fontawesome.js``, and its icons are drawn from the icon font;
   - everything the page loads adds up to at most ``PAGE_BUDGET_BYTES``
     (``TEXT_PAGE_BUDGET_BYTES`` for a page without charts).

   Each page is opened twice: in a desktop window (1280 px) and in a phone's
   (390 px, mobile emulation). A full-page screenshot of each goes to
   ``<build>/../screenshots/<width>/``.

The static scan also asserts that every page declares a favicon that exists.

Exits 1 with one line per problem, naming the page and the element. Without
Chromium or Playwright the browser part is skipped with a message, except
under ``CI=true``, where that is a failure.
"""

from __future__ import annotations

import concurrent.futures
import functools
import http.server
import os
import re
import shutil
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

# Attributes that make the browser fetch something when the page opens.
_FETCHING = {
    "script": ("src",),
    "link": ("href",),
    "img": ("src", "srcset"),
    "iframe": ("src",),
    "source": ("src", "srcset"),
    "video": ("src", "poster"),
    "audio": ("src",),
    "embed": ("src",),
    "object": ("data",),
}
# <link rel=...> values that are only metadata, never fetched on open.
_LINK_METADATA = {"canonical", "alternate", "author", "license", "search", "next", "prev", "index"}
_REMOTE = re.compile(r"^\s*(?:https?:)?//", re.IGNORECASE)
_CSS_IMPORT = re.compile(r"@import\s+(?:url\()?['\"]?((?:https?:)?//[^'\")\s]+)", re.IGNORECASE)

CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@dataclass(frozen=True)
class Viewport:
    """A browser window the book is read in."""

    width: int
    height: int
    mobile: bool = False

    @property
    def label(self) -> str:
        return f"{self.width} px"


# A desktop window (the theme shows its sidebars and the usual text column) and a
# phone held upright (390 CSS px: the common iPhone width; the theme's narrowest layout).
DESKTOP = Viewport(1280, 900)
PHONE = Viewport(390, 844, mobile=True)
VIEWPORTS = (DESKTOP, PHONE)
VIEWPORT = {"width": DESKTOP.width, "height": DESKTOP.height}
CHART_TIMEOUT_MS = 20_000

# Libraries a page may load only when it uses them: name, files (URL path endings), what uses them.
LIBRARIES = (
    ("vega", ("vega/vega.min.js", "vega/vega-lite.min.js", "vega/vega-embed.min.js"), "charts"),
    ("the ipywidgets manager", ("widgets/require.js", "widgets/embed-amd.js"), "widgets"),
)
# The theme's Font Awesome as JavaScript (every icon as SVG paths, 1.5 MB); its
# stylesheet already draws the few icons the theme shows from a web font.
FONTAWESOME_JS = "scripts/fontawesome.js"
# Everything one page loads (HTML, styles, scripts, fonts, images). A text page is
# the theme (about 1.0 MB, of which its stylesheet 0.40 MB and the icon font 0.16 MB);
# a chart page adds vega (0.83 MB) and its charts' data: the heaviest, the lab
# chapter, weighs 2.6 MB.
PAGE_BUDGET_BYTES = 3_000_000
TEXT_PAGE_BUDGET_BYTES = 1_500_000


class _RemoteRefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.remote: list[str] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "link" and set((attributes.get("rel") or "").lower().split()) <= _LINK_METADATA:
            return
        for name in _FETCHING.get(tag, ()):
            value = attributes.get(name) or ""
            for url in value.split(",") if name == "srcset" else [value]:
                if _REMOTE.match(url):
                    self.remote.append(f"<{tag} {name}={url.strip()}>")


def remote_references(page: Path) -> list[str]:
    """Every off-book URL the page would fetch when opened."""
    text = page.read_text(encoding="utf-8")
    parser = _RemoteRefs()
    parser.feed(text)
    return parser.remote + [f"@import {url}" for url in _CSS_IMPORT.findall(text)]


# A command-line flag whose leading "--" (or "---") Sphinx's smart quotes turned into an en (em) dash:
# a dash at the start of a word and glued to a lowercase letter, as in "\u2013shutdown-timeout".
_DASHED_FLAG = re.compile(r"(?<![\w\u2013\u2014-])[\u2013\u2014][a-z][a-z0-9]*(?:-[a-z0-9]+)*")


class _VisibleText(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.skipping = 0
        self.chunks: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.skipping += tag in ("script", "style")

    def handle_endtag(self, tag):
        self.skipping -= tag in ("script", "style") and self.skipping > 0

    def handle_data(self, data):
        if not self.skipping:
            self.chunks.append(data)


def dashed_flags(page: Path) -> list[str]:
    """Flags a reader would copy wrongly: ``--name`` rendered with an en or em dash in the page's text."""
    parser = _VisibleText()
    parser.feed(page.read_text(encoding="utf-8"))
    return _DASHED_FLAG.findall("".join(parser.chunks))


# --------------------------------------------------------------------------- browser


def find_chromium() -> str | None:
    """The system Chromium, or None."""
    for path in CHROMIUM_PATHS:
        if os.access(path, os.X_OK):
            return path
    return shutil.which("chromium") or shutil.which("chromium-browser")


def browser_unavailable() -> str | None:
    """Why the browser checks cannot run here, or None when they can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -r requirements.txt)"
    if find_chromium() is None:
        return "chromium not found (apt-get install chromium)"
    return None


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve ``root`` on a free port of 127.0.0.1 from a thread; yield its base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # the checker prints its own findings
            pass

    handler = functools.partial(Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def chromium() -> Iterator[object]:
    """A headless system Chromium driven by Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=find_chromium(),
            headless=True,
            args=list(CHROMIUM_ARGS),
        )
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class PageReport:
    """What one page did in the browser."""

    name: str
    charts: int = 0
    sliders: int = 0
    loaded_bytes: int = 0
    problems: list[str] = field(default_factory=list)


_REFRESH = re.compile(r"""<meta\s+http-equiv=["']?refresh["']?\s+content=["'][^"']*url=([^"']+)["']""", re.IGNORECASE)


def refresh_target(path: Path) -> str | None:
    """Where a ``<meta http-equiv="refresh">`` page sends the reader (relative URL), or None."""
    match = _REFRESH.search(path.read_text(encoding="utf-8", errors="replace")[:4000])
    return match.group(1).strip() if match else None


# Resolves once every chart has an SVG/canvas or an error text, or at the timeout;
# a chart the book's charts.js is still fitting to its column (data-layout
# "fitting") has not settled.
_CHARTS_SETTLED = """() => Array.from(document.querySelectorAll('div.planner-altair')).every(
    el => (el.querySelector('svg, canvas') && el.dataset.layout !== 'fitting')
          || el.textContent.includes('chart not drawn'))"""

_CHART_STATES = """() => Array.from(document.querySelectorAll('div.planner-altair')).map((el, i) => ({
    index: i,
    label: el.dataset.title || el.getAttribute('aria-label') || '',
    drawn: !!el.querySelector('svg, canvas'),
    text: el.textContent.slice(0, 200),
    sliders: el.querySelectorAll('.vega-bindings input[type=range]').length,
}))"""

# What a chart draws: its SVG markup, or its canvas pixels.
_FINGERPRINT = """(el) => {
    const svg = el.querySelector('svg');
    if (svg) return svg.outerHTML;
    const canvas = el.querySelector('canvas');
    return canvas ? canvas.toDataURL() : '';
}"""

# Moves a range input to the far end of its range from where it is, as a user would.
_MOVE_SLIDER = """(input) => {
    const min = parseFloat(input.min || '0'), max = parseFloat(input.max || '100');
    const now = parseFloat(input.value);
    const before = input.value;
    input.value = String(Math.abs(now - min) > Math.abs(max - now) ? min : max);
    input.dispatchEvent(new Event('input', {bubbles: true}));
    input.dispatchEvent(new Event('change', {bubbles: true}));
    return [before, input.value];
}"""

# The width rules. The content column is the page's <article> (class bd-article).
# Every visible element inside it must end at or before the column's right edge
# (1 px slack), and every visible element of the page at or before the window's
# right edge; SVG internals are not measured, only the <svg> box itself. An element
# inside a horizontally scrollable box (overflow-x auto or scroll: a code block, a
# wide table's own scroller) may extend past either, since the reader scrolls that
# box and nothing is cut off. That exemption never applies inside a chart
# (div.planner-altair): a chart that needs a scroll bar has a clipped panel or
# legend, and is reported. Elements the theme hides off-canvas (closed dialogs,
# collapsed drawers) are not drawn and are skipped.

_TOO_WIDE = """(scope) => {
    const column = document.querySelector('article.bd-article') || document.querySelector('main');
    const window_ = scope === 'window';
    const root = window_ ? document.body : column;
    if (!root) return {column: null, wide: []};
    const right = window_ ? document.documentElement.clientWidth : column.getBoundingClientRect().right;
    const scrolls = (el) => {
        for (let a = el.parentElement; a && a !== root; a = a.parentElement) {
            if (a.classList.contains('planner-altair')) return false;
            const ox = getComputedStyle(a).overflowX;
            if (ox === 'auto' || ox === 'scroll') return true;
        }
        return false;
    };
    const describe = (el) => {
        let s = el.tagName.toLowerCase();
        if (el.id) s += '#' + el.id;
        const cls = (typeof el.className === 'string' ? el.className : '').trim();
        if (cls) s += '.' + cls.split(/\\s+/).slice(0, 3).join('.');
        const chart = el.closest('div.planner-altair');
        if (chart) {
            const n = Array.from(document.querySelectorAll('div.planner-altair')).indexOf(chart) + 1;
            s += ' in chart ' + n + ' "' + (chart.dataset.title || '') + '"';
        }
        const text = (el.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 50);
        if (text && !chart) s += ' "' + text + '"';
        return s;
    };
    const wide = [];
    for (const el of root.querySelectorAll('*')) {
        if (el.closest('svg') && el.tagName.toLowerCase() !== 'svg') continue;
        if (window_ && column && column.contains(el)) continue;  // the column rule covers those
        const box = el.getBoundingClientRect();
        if (box.width === 0 || box.height === 0) continue;
        if (box.right <= right + 1 || scrolls(el)) continue;
        const style = getComputedStyle(el);
        if (style.visibility === 'hidden' || style.display === 'none') continue;
        if (el.closest('dialog:not([open])')) continue;
        // Report the outermost offender only: its children overflow with it.
        if (wide.some(w => w.el.contains(el))) continue;
        wide.push({el: el, text: describe(el) + ' ends at ' + Math.round(box.right)
                   + (window_ ? ' px, the window is ' : ' px, column ends at ') + Math.round(right) + ' px'});
    }
    return {column: Math.round(right), wide: wide.map(w => w.text),
            page: document.documentElement.scrollWidth, window: document.documentElement.clientWidth};
}"""

# Icons the theme shows: with fontawesome.js gone, the theme's stylesheet draws
# them from the Font Awesome web font, which must have loaded.
_ICONS_UNDRAWN = """async () => {
    await document.fonts.ready;
    const icons = Array.from(document.querySelectorAll('i[class*="fa-"]')).filter(el => {
        const box = el.getBoundingClientRect();
        return box.width > 0 && box.height > 0 && getComputedStyle(el).visibility !== 'hidden';
    });
    if (!icons.length) return [];
    const loaded = Array.from(document.fonts).some(
        f => f.family.replace(/["']/g, '').startsWith('Font Awesome') && f.status === 'loaded');
    return loaded ? [] : icons.map(el => el.className);
}"""

_SHOWS_WIDGETS = """() => !!document.querySelector(
    'script[type="application/vnd.jupyter.widget-view+json"], .jupyter-widgets')"""


def check_page(
    browser,
    url: str,
    name: str,
    screenshot: Path | None = None,
    allowed_origin: str | None = None,
    redirect_to: str | None = None,
    viewport: Viewport = DESKTOP,
    budget_bytes: int | None = None,
    require_favicon: bool = False,
) -> PageReport:
    """Open ``url`` in a fresh context and return what went wrong there.

    Requests to anything but ``allowed_origin`` (scheme://host:port; file: and
    data: URLs when it is None) are blocked and reported. A page that redirects
    is checked at ``redirect_to``, the absolute URL it sends the reader to. The
    window is ``viewport``; ``budget_bytes`` caps what the page loads, and
    ``require_favicon`` asks for a favicon the browser can fetch.
    """
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    report = PageReport(name)
    context = browser.new_context(
        viewport={"width": viewport.width, "height": viewport.height},
        is_mobile=viewport.mobile,
        has_touch=viewport.mobile,
        device_scale_factor=1,
    )
    page = context.new_page()
    finished = []

    def on_route(route):
        if _is_local(route.request.url, allowed_origin):
            route.continue_()
        else:
            report.problems.append(f"{name}: requests a non-local URL: {route.request.url}")
            route.abort()

    def on_failed(request):
        if _is_local(request.url, allowed_origin):  # blocked ones are reported above
            report.problems.append(f"{name}: request failed: {request.url} ({request.failure})")

    def on_console(message):
        if message.type == "error":
            where = message.location.get("url", "") if message.location else ""
            report.problems.append(f"{name}: console error: {message.text}" + (f" ({where})" if where else ""))

    page.route("**/*", on_route)
    page.on("console", on_console)
    page.on("pageerror", lambda error: report.problems.append(f"{name}: uncaught error: {error}"))
    page.on("requestfailed", on_failed)
    page.on("requestfinished", lambda request: finished.append(request))
    try:
        if redirect_to:
            # A redirect page (the book's index.html): check where it lands, once it has.
            page.goto(url, wait_until="commit")
            page.wait_for_url(redirect_to, wait_until="load")
        else:
            page.goto(url, wait_until="load")
        try:
            page.wait_for_function(_CHARTS_SETTLED, timeout=CHART_TIMEOUT_MS)
        except PlaywrightTimeout:  # each undrawn chart is reported below
            pass
        _check_charts(page, name, report)
        _check_width(page, name, report)
        _check_icons(page, name, report)
        try:  # fonts and icons the page asks for after "load"
            page.wait_for_load_state("networkidle", timeout=3_000)
        except PlaywrightTimeout:
            pass
        _check_loads(page, finished, name, report, budget_bytes)
        if require_favicon:
            _check_favicon(page, context, name, report)
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            try:
                page.screenshot(path=str(screenshot), full_page=True)
            except PlaywrightError:
                # A loaded machine's Chromium may refuse one capture of a tall page ("Unable to capture
                # screenshot"); a second failure is raised.
                page.screenshot(path=str(screenshot), full_page=True)
    finally:
        context.close()
    return report


def _is_local(url: str, allowed_origin: str | None) -> bool:
    """True for data:, blob: and about: URLs and for URLs under ``allowed_origin``
    (any file: URL when it is None)."""
    scheme = urlsplit(url).scheme
    if scheme in ("data", "blob", "about"):
        return True
    return url.startswith(allowed_origin) if allowed_origin else scheme == "file"


def _check_charts(page, name: str, report: PageReport) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    charts = page.evaluate(_CHART_STATES)
    report.charts = len(charts)
    elements = page.query_selector_all("div.planner-altair")
    for chart, element in zip(charts, elements, strict=True):
        label = f'chart {chart["index"] + 1} "{chart["label"]}"'
        if not chart["drawn"]:
            report.problems.append(f"{name}: {label} drew no SVG or canvas: {chart['text']!r}")
            continue
        for k, slider in enumerate(element.query_selector_all(".vega-bindings input[type=range]")):
            report.sliders += 1
            before = element.evaluate(_FINGERPRINT)
            old, new = slider.evaluate(_MOVE_SLIDER)
            try:
                page.wait_for_function(
                    f"([el, before]) => ({_FINGERPRINT})(el) !== before", arg=[element, before], timeout=5_000
                )
            except PlaywrightTimeout:
                report.problems.append(
                    f"{name}: {label}: moving slider {k + 1} from {old} to {new} did not change the chart"
                )
            slider.evaluate(
                "(input, value) => { input.value = value; input.dispatchEvent(new Event('input', {bubbles: true})); }",
                old,
            )


def _check_width(page, name: str, report: PageReport) -> None:
    column = page.evaluate(_TOO_WIDE, "column")
    for text in column["wide"]:
        report.problems.append(f"{name}: wider than the content column: {text}")
    window = page.evaluate(_TOO_WIDE, "window")
    for text in window["wide"]:
        report.problems.append(f"{name}: wider than the window: {text}")
    if window["page"] > window["window"] + 1 and not (column["wide"] or window["wide"]):
        report.problems.append(f"{name}: the page is {window['page']} px wide in a {window['window']} px window")


def _check_icons(page, name: str, report: PageReport) -> None:
    undrawn = page.evaluate(_ICONS_UNDRAWN)
    if undrawn:
        report.problems.append(f"{name}: {len(undrawn)} icon(s) drawn without their font, e.g. {undrawn[0]!r}")


def _check_loads(page, finished, name: str, report: PageReport, budget_bytes: int | None) -> None:
    """Libraries loaded without use, and what the page weighs."""
    from playwright.sync_api import Error as PlaywrightError

    paths = {}
    for request in finished:
        path = urlsplit(request.url).path
        try:
            size = request.sizes()["responseBodySize"]
        except PlaywrightError:  # a request whose sizes are gone counts as empty
            size = 0
        paths[path] = paths.get(path, 0) + size
    report.loaded_bytes = sum(paths.values())
    uses = {"charts": report.charts > 0, "widgets": page.evaluate(_SHOWS_WIDGETS)}
    for library, files, used_by in LIBRARIES:
        loaded = [p for f in files for p in paths if p.endswith(f)]  # in the library's own order
        if loaded and not uses[used_by]:
            size = sum(paths[p] for p in loaded)
            report.problems.append(
                f"{name}: loads {library} ({', '.join(p.rsplit('/', 1)[-1] for p in loaded)}; "
                f"{size / 1e6:.2f} MB) but has no {used_by}"
            )
    for path, size in paths.items():
        if path.endswith(FONTAWESOME_JS):
            report.problems.append(
                f"{name}: loads {FONTAWESOME_JS} ({size / 1e6:.2f} MB); "
                "the theme's stylesheet draws its icons from a web font"
            )
    if budget_bytes is not None and not uses["charts"]:
        budget_bytes = min(budget_bytes, TEXT_PAGE_BUDGET_BYTES)
    if budget_bytes is not None and report.loaded_bytes > budget_bytes:
        heaviest = sorted(paths.items(), key=lambda item: -item[1])[:3]
        report.problems.append(
            f"{name}: loads {report.loaded_bytes / 1e6:.2f} MB, over the {budget_bytes / 1e6:.1f} MB budget; "
            "heaviest: " + ", ".join(f"{p.rsplit('/', 1)[-1]} {s / 1e6:.2f} MB" for p, s in heaviest)
        )


def _check_favicon(page, context, name: str, report: PageReport) -> None:
    href = page.evaluate("() => { const l = document.querySelector('link[rel~=\"icon\"]'); return l ? l.href : null; }")
    if not href:
        report.problems.append(f"{name}: declares no favicon, so browsers ask for /favicon.ico and get a 404")
        return
    if href.startswith("data:"):
        return
    response = context.request.get(href)
    if not response.ok:
        report.problems.append(f"{name}: favicon {href} answers HTTP {response.status}")


def _is_page(path: Path, root: Path) -> bool:
    # _static/ holds theme template fragments, _sources/ copies of the inputs.
    return path.relative_to(root).parts[0] not in ("_static", "_sources")


def screenshot_path(screenshots: Path, relative: Path, viewport: Viewport = DESKTOP) -> Path:
    """``book/kv_capacity.html`` -> ``<screenshots>/<width>/book/kv_capacity.png``."""
    return screenshots / str(viewport.width) / relative.with_suffix(".png")


def browse_book(
    root: Path, pages: list[Path], screenshots: Path, browser=None, viewports: tuple[Viewport, ...] = VIEWPORTS
) -> list[PageReport]:
    """Open every page of the built book at ``root`` in each of ``viewports`` and check it.

    ``browser`` reuses a running Playwright browser; by default one is started.
    """
    if browser is None:
        with chromium() as started:
            return browse_book(root, pages, screenshots, started, viewports)
    reports = []
    for viewport in viewports:
        shutil.rmtree(screenshots / str(viewport.width), ignore_errors=True)
    with serve(root) as base:
        origin = base.rstrip("/")
        for viewport in viewports:
            for page in pages:
                relative = page.relative_to(root)
                url = base + relative.as_posix()
                target = refresh_target(page)
                reports.append(
                    check_page(
                        browser,
                        url,
                        f"{relative.as_posix()} at {viewport.label}",
                        screenshot=screenshot_path(screenshots, relative, viewport),
                        allowed_origin=origin,
                        redirect_to=urljoin(url, target) if target else None,
                        viewport=viewport,
                        budget_bytes=PAGE_BUDGET_BYTES,
                        require_favicon=True,
                    )
                )
    return reports


def browse_book_in_parallel(root: Path, pages: list[Path], screenshots: Path) -> list[PageReport]:
    """:func:`browse_book` at each width in a process (and a Chromium) of its own, on the machine's cores."""
    with concurrent.futures.ProcessPoolExecutor(max_workers=len(VIEWPORTS)) as pool:
        runs = [pool.submit(browse_book, root, pages, screenshots, None, (viewport,)) for viewport in VIEWPORTS]
        return [report for run in runs for report in run.result()]


def main(argv: list[str], browser=None) -> int:
    args = [a for a in argv[1:] if not a.startswith("--")]
    static_only = "--static-only" in argv
    root = Path(args[0] if args else "_build/html")
    pages = sorted(root.rglob("*.html"))
    if not pages:
        print(f"check_built_book: no HTML pages under {root}", file=sys.stderr)
        return 1
    problems: list[str] = []
    for page in pages:
        for ref in remote_references(page):
            problems.append(f"{page.relative_to(root)}: loads from another host: {ref}")
        for flag in dashed_flags(page):
            problems.append(
                f"{page.relative_to(root)}: a flag renders with a dash that cannot be copied: {flag!r} "
                "(write it as inline code)"
            )
    for css in sorted(root.rglob("*.css")):
        for url in _CSS_IMPORT.findall(css.read_text(encoding="utf-8", errors="replace")):
            problems.append(f"{css.relative_to(root)}: imports from another host: {url}")
    summary = f"{len(pages)} pages, no off-book references"
    if not static_only:
        missing = browser_unavailable()
        if missing and os.environ.get("CI", "").lower() == "true":
            problems.append(f"browser checks cannot run in CI: {missing}")
        elif missing:
            print(f"check_built_book: browser checks skipped: {missing}")
            summary += ", pages not opened in a browser"
        else:
            screenshots = root.parent / "screenshots"
            opened = [p for p in pages if _is_page(p, root)]
            reports = (
                browse_book(root, opened, screenshots, browser)
                if browser is not None
                else browse_book_in_parallel(root, opened, screenshots)
            )
            for report in reports:
                problems.extend(report.problems)
            heaviest = max(reports, key=lambda r: r.loaded_bytes)
            summary += (
                f"; opened in Chromium at {' and '.join(v.label for v in VIEWPORTS)}: "
                f"{sum(r.charts for r in reports)} charts drawn, "
                f"{sum(r.sliders for r in reports)} sliders moved, no console errors, "
                f"nothing too wide, no unused library, heaviest page {heaviest.name} "
                f"({heaviest.loaded_bytes / 1e6:.2f} MB); screenshots in {screenshots}"
            )
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"check_built_book: {len(problems)} problem(s) in {root}", file=sys.stderr)
        return 1
    print(f"check_built_book: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
