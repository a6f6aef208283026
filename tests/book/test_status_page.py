"""The status page's run-time table: myst-nb's nb-exec-table works under the strict build."""

from __future__ import annotations

import re

from tests.book.test_book_pipeline import _strict_build, _tiny_book


def test_exec_table_lists_each_executed_notebook_with_its_run_time(tmp_path):
    root = _tiny_book(tmp_path, page_source="import time\ntime.sleep(0.2)", intro_extra="```{nb-exec-table}\n```")
    result = _strict_build(root)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    html = (root / "_build" / "html" / "book" / "intro.html").read_text(encoding="utf-8")
    row = re.search(r"<tr[^>]*>\s*<td[^>]*>.*?book/page.*?</tr>", html, re.DOTALL)
    assert row, "the table has no row for book/page"
    cells = [
        re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.DOTALL)
    ]
    assert cells[2] == "force" and float(cells[3]) >= 0.2 and cells[4] == "✅", cells
