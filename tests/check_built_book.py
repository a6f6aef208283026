"""Fail if a built page of the book would load anything from another host.

Run after `jupyter-book build`: scans every HTML page under the build folder for
script, stylesheet, image, iframe and font references that point off the
book (http:, https: or protocol-relative URLs). Where Chromium is installed, it
also opens every page that has charts with all host names unresolvable and
checks that each chart was drawn. Exits 1 and lists each offending page.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

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


_CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    # Any attempt to reach another host fails, so a chart that needs one is not drawn.
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--virtual-time-budget=20000",
)


def undrawn_charts(page: Path, chromium: str) -> str | None:
    """Open ``page`` headless with no network; describe what is wrong, or None."""
    expected = page.read_text(encoding="utf-8").count('<div class="planner-altair"')
    if expected == 0:
        return None
    with tempfile.TemporaryDirectory() as profile:
        result = subprocess.run(
            [chromium, *_CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],
            capture_output=True, text=True, timeout=180,
        )
    drawn = len(re.findall(r'class="planner-altair vega-embed"[^>]*>\s*<(?:svg|canvas)', result.stdout))
    if drawn != expected:
        return f"{drawn} of {expected} charts drawn with the network off"
    return None


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else "_build/html")
    pages = sorted(root.rglob("*.html"))
    if not pages:
        print(f"check_built_book: no HTML pages under {root}", file=sys.stderr)
        return 1
    failures = 0
    for page in pages:
        for ref in remote_references(page):
            print(f"{page.relative_to(root)}: loads from another host: {ref}", file=sys.stderr)
            failures += 1
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium:
        for page in pages:
            problem = undrawn_charts(page, chromium)
            if problem:
                print(f"{page.relative_to(root)}: {problem}", file=sys.stderr)
                failures += 1
    else:
        print("check_built_book: chromium not found; charts not opened in a browser")
    for css in sorted(root.rglob("*.css")):
        for url in _CSS_IMPORT.findall(css.read_text(encoding="utf-8", errors="replace")):
            print(f"{css.relative_to(root)}: imports from another host: {url}", file=sys.stderr)
            failures += 1
    if failures:
        print(f"check_built_book: {failures} off-book reference(s) in {root}", file=sys.stderr)
        return 1
    opened = "all charts drawn offline" if chromium else "charts not checked in a browser"
    print(f"check_built_book: {len(pages)} pages, no off-book references, {opened}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
