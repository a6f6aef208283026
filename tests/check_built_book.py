"""Fail if a built page of the book would load anything from another host.

Run after `jupyter-book build`: scans every HTML page under the build folder for
script, stylesheet, image, iframe and font references that point off the
book (http:, https: or protocol-relative URLs), and for pages whose notebook
outputs report an error. Exits 1 and lists each offending page and URL.
"""

from __future__ import annotations

import re
import sys
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
        if "[chart not drawn" in page.read_text(encoding="utf-8") and "vegaEmbed" not in page.read_text(encoding="utf-8"):
            print(f"{page.relative_to(root)}: chart renderer without vega", file=sys.stderr)
            failures += 1
    for css in sorted(root.rglob("*.css")):
        for url in _CSS_IMPORT.findall(css.read_text(encoding="utf-8", errors="replace")):
            print(f"{css.relative_to(root)}: imports from another host: {url}", file=sys.stderr)
            failures += 1
    if failures:
        print(f"check_built_book: {failures} off-book reference(s) in {root}", file=sys.stderr)
        return 1
    print(f"check_built_book: {len(pages)} pages, no off-book references")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
