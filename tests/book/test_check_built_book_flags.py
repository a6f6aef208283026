"""The built-book check finds a command-line flag whose "--" smart quotes turned into a dash."""

from tests.check_built_book import dashed_flags, main


def test_en_dash_flag_is_found_and_code_or_prose_dashes_are_not(tmp_path):
    page = tmp_path / "page.html"
    page.write_text(
        "<html><body><main><p>add <strong>\u2013shutdown-timeout=226</strong> to vllm serve</p>"
        "<p>pages 3\u20134, a pause \u2013 then more, <code>--max-num-seqs</code></p>"
        "<script>var s = '\u2013not-text';</script></main></body></html>",
        encoding="utf-8",
    )
    assert dashed_flags(page) == ["\u2013shutdown-timeout"]
    page.write_text("<p>an em dash \u2014max-model-len</p>", encoding="utf-8")
    assert dashed_flags(page) == ["\u2014max-model-len"]


def test_the_check_fails_on_a_page_with_a_dashed_flag(tmp_path, capsys):
    (tmp_path / "drain.html").write_text("<p>add \u2013shutdown-timeout=226</p>", encoding="utf-8")
    assert main(["check", str(tmp_path), "--static-only"]) == 1
    assert "drain.html: a flag renders with a dash" in capsys.readouterr().err
    (tmp_path / "drain.html").write_text("<p>add <code>--shutdown-timeout=226</code></p>", encoding="utf-8")
    assert main(["check", str(tmp_path), "--static-only"]) == 0
