"""planner.workflows.report without a kernel: parameters, output folders, inlining."""

from __future__ import annotations

import base64
import re

import pytest

from planner.errors import PlannerInputError
from planner.workflows import report
from tests.conftest import REPO_ROOT

BOOK = REPO_ROOT / "book"


@pytest.fixture(scope="module")
def loadtest_params():
    return report.chapter_parameters(BOOK / "loadtest_thresholds.ipynb")


def test_parameters_come_with_types_defaults_and_help(loadtest_params):
    p = loadtest_params
    assert list(p)[:3] == ["loadtest_path", "ttft_p99_slo_ms", "itl_p99_slo_ms"]
    assert (p["ttft_p99_slo_ms"].type_name, p["ttft_p99_slo_ms"].default) == ("float", 2000.0)
    assert p["interpolate_knee"].type_name == "bool"
    assert p["loadtest_path"].is_path and not p["ttft_p99_slo_ms"].is_path
    assert "TTFT" in p["ttft_p99_slo_ms"].help


def test_every_assignment_of_the_parameters_cell_is_found():
    # Read from the cell itself too, so a line papermill cannot parse still counts.
    for chapter in report.chapters():
        notebook = BOOK / f"{chapter}.ipynb"
        params = report.chapter_parameters(notebook)
        import nbformat

        cell = next(
            c for c in nbformat.read(notebook, as_version=4).cells if "parameters" in c.metadata.get("tags", [])
        )
        names = re.findall(r"^(\w+)\s*[:=]", cell.source, flags=re.MULTILINE)
        assert list(params) == names, chapter


def test_unknown_chapter_lists_the_chapters():
    with pytest.raises(PlannerInputError, match=r"unknown chapter 'nope'; chapters: .*littles_law"):
        report.chapter_path("nope")
    assert report.chapter_path("book/littles_law.ipynb") == BOOK / "littles_law.ipynb"


def test_text_values_take_the_chapter_types(loadtest_params, tmp_path):
    values = report.resolve_parameters(
        loadtest_params, ["ttft_p99_slo_ms=1500", "itl_p99_slo_ms= 40", "interpolate_knee=true"], cwd=tmp_path
    )
    assert values == {"ttft_p99_slo_ms": 1500.0, "itl_p99_slo_ms": 40.0, "interpolate_knee": True}
    assert isinstance(values["ttft_p99_slo_ms"], float)


def test_an_int_parameter_refuses_a_fraction():
    params = report.chapter_parameters(BOOK / "kv_bounded_ratio.ipynb")
    assert report.resolve_parameters(params, ["start_replicas=6"]) == {"start_replicas": 6}
    with pytest.raises(PlannerInputError, match=r"--param start_replicas: expected a whole number, got '4.5'"):
        report.resolve_parameters(params, ["start_replicas=4.5"])


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("ttft_p99_slo_ms=fast", r"--param ttft_p99_slo_ms: expected a finite number, got 'fast'"),
        ("ttft_p99_slo_ms=nan", r"expected a finite number"),
        ("interpolate_knee=maybe", r"--param interpolate_knee: expected true or false, got 'maybe'"),
        ("ttft_p99_slo_ms", r"--param 'ttft_p99_slo_ms': expected NAME=VALUE"),
    ],
)
def test_bad_values_are_named(loadtest_params, pair, message):
    with pytest.raises(PlannerInputError, match=message):
        report.resolve_parameters(loadtest_params, [pair])


def test_an_unknown_name_is_named_and_the_parameters_listed(loadtest_params):
    with pytest.raises(PlannerInputError) as error:
        report.resolve_parameters(loadtest_params, ["ttft_slo=1"])
    text = str(error.value)
    assert text.startswith("--param ttft_slo: the chapter has no parameter 'ttft_slo'; its parameters: ")
    assert "loadtest_path (str)" in text and "itl_p99_slo_ms (float)" in text


def test_relative_paths_are_taken_from_the_current_directory(loadtest_params):
    data = REPO_ROOT / "data"
    values = report.resolve_parameters(loadtest_params, ["loadtest_path=loadtests/qwen2.5-7b_canonical.csv"], cwd=data)
    assert values["loadtest_path"] == str(data / "loadtests" / "qwen2.5-7b_canonical.csv")
    assert report.resolve_parameters(loadtest_params, ["loadtest_path="], cwd=data) == {
        "loadtest_path": ""
    }  # an empty path stays empty: "none given"
    with pytest.raises(PlannerInputError, match=r"--param loadtest_path: no such file or folder: .*nothing.csv"):
        report.resolve_parameters(loadtest_params, ["loadtest_path=nothing.csv"], cwd=data)


def test_a_params_file_is_typed_relative_to_its_folder_and_overridden_by_param(loadtest_params, tmp_path):
    (tmp_path / "sweep.csv").write_text("x\n")
    params_file = tmp_path / "params.yaml"
    params_file.write_text("loadtest_path: sweep.csv\nttft_p99_slo_ms: 1500\nitl_p99_slo_ms: 40\n")
    values = report.resolve_parameters(loadtest_params, ["itl_p99_slo_ms=45"], params_file, cwd=REPO_ROOT)
    assert values == {"loadtest_path": str(tmp_path / "sweep.csv"), "ttft_p99_slo_ms": 1500.0, "itl_p99_slo_ms": 45.0}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("loadtest_path: 12\n", r"params.yaml: loadtest_path: expected text, got 12 \(quote it in YAML\)"),
        ("- a\n- b\n", r"expected a mapping of NAME: VALUE"),
        ("a: [\n", r"not valid YAML"),
    ],
)
def test_a_bad_params_file_is_named(loadtest_params, tmp_path, text, message):
    (tmp_path / "params.yaml").write_text(text)
    with pytest.raises(PlannerInputError, match=message):
        report.resolve_parameters(loadtest_params, [], tmp_path / "params.yaml")


def test_outputs_never_go_into_the_book_or_beside_an_input(loadtest_params, tmp_path):
    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir()
    values = {"loadtest_path": str(sweep_dir)}
    inputs = report.input_paths(loadtest_params, values)
    assert inputs == [sweep_dir]
    for out, message in [
        (BOOK / "reports", "inside the book's folder"),
        (sweep_dir, "is the folder of the input"),
        (sweep_dir / "report", "is the folder of the input"),
    ]:
        with pytest.raises(PlannerInputError, match=message):
            report.check_output_dir(out, "loadtest_thresholds", inputs)
    file_input = tmp_path / "data" / "sweep.csv"
    file_input.parent.mkdir()
    file_input.write_text("x\n")
    with pytest.raises(PlannerInputError, match="is the folder of the input"):
        report.check_output_dir(file_input.parent, "loadtest_thresholds", [file_input])
    clash = tmp_path / "out" / "loadtest_thresholds.html"
    clash.parent.mkdir()
    clash.write_text("mine")
    with pytest.raises(PlannerInputError, match="would overwrite the input"):
        report.check_output_dir(tmp_path / "out", "loadtest_thresholds", [clash])
    with pytest.raises(PlannerInputError, match="exists and is not a folder"):
        report.check_output_dir(file_input, "loadtest_thresholds", [])
    assert report.check_output_dir(tmp_path / "reports" / "x", "loadtest_thresholds", inputs) == (
        tmp_path / "reports" / "x"
    )


def test_defaults_count_as_inputs(loadtest_params):
    inputs = report.input_paths(loadtest_params, {})
    assert inputs == [REPO_ROOT / "data" / "loadtests" / "llama-3.1-8b_canonical.csv"]
    with pytest.raises(PlannerInputError, match="is the folder of the input"):
        report.check_output_dir(REPO_ROOT / "data" / "loadtests", "loadtest_thresholds", inputs)


def _data(url: str) -> bytes:
    assert url.startswith("data:")
    return base64.b64decode(url.split(",", 1)[1])


def test_inline_page_leaves_nothing_to_fetch(tmp_path):
    static = tmp_path / "_static"
    (static / "fonts").mkdir(parents=True)
    (static / "app.js").write_text("window.x = 1;")
    (static / "base.css").write_text("body { color: red; }")
    (static / "theme.css").write_text('@import "base.css";\n@font-face { src: url(fonts/f.woff2); }')
    (static / "fonts" / "f.woff2").write_bytes(b"FONT")
    (static / "logo.png").write_bytes(b"PNG")
    page = tmp_path / "page.html"
    page.write_text(
        '<html><head><script defer src="_static/app.js?digest=1"></script>'
        '<link rel="stylesheet" href="_static/theme.css">'
        '<link rel="preload" as="script" href="_static/app.js">'
        '<script src="https://cdn.example.org/x.js"></script></head>'
        '<body><img src="_static/logo.png"><a href="other.html">next</a></body></html>'
    )
    html = report.inline_page(page)
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    scripts = soup.find_all("script")
    assert _data(scripts[0]["src"]) == b"window.x = 1;" and scripts[0].has_attr("defer")
    assert scripts[1]["src"] == "https://cdn.example.org/x.js"  # not ours to fetch; left for the check to flag
    style = soup.find("style").string
    assert "body { color: red; }" in style and "@import" not in style
    assert 'url("data:font/woff2;base64,' + base64.b64encode(b"FONT").decode() + '")' in style
    assert soup.find("link", rel="preload") is None
    assert _data(soup.find("img")["src"]) == b"PNG"
    assert soup.find("a")["href"] == "other.html"


def test_the_widget_manager_gets_its_fonts_inline():
    vendored = BOOK / "_vendor" / "widgets"
    if not (vendored / "embed-amd.js").is_file():
        pytest.skip("book/_vendor not populated; run make setup")
    body = (vendored / "embed-amd.js").read_bytes()
    fonts = sorted(p.name for p in vendored.glob("*.woff2"))
    assert len(fonts) == 3
    assert all(f'.p+"{name}"'.encode() in body for name in fonts)
    patched = report._inline_widget_fonts(body, vendored)
    assert not any(f'.p+"{name}"'.encode() in patched for name in fonts)
    assert patched.count(b'"data:font/woff2;base64,') >= 3


def test_finished_files_move_into_an_existing_folder_and_leave_the_rest(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("the user's")
    (out / "ch.html").write_text("old report")
    staging = tmp_path / ".out.tmp"
    staging.mkdir()
    (staging / "ch.html").write_text("new report")
    (staging / "ch.ipynb").write_text("{}")
    report._move_into_place(staging, out)
    assert (out / "ch.html").read_text() == "new report"
    assert (out / "notes.txt").read_text() == "the user's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    fresh = tmp_path / "fresh"
    staging.mkdir()
    (staging / "ch.html").write_text("x")
    report._move_into_place(staging, fresh)
    assert [p.name for p in fresh.iterdir()] == ["ch.html"] and not staging.exists()


def test_a_kernel_stopped_while_flushing_leaves_only_the_users_lines():
    # What a loaded machine printed in CI after a failing cell: ipykernel's shutdown race, then the CLI's line.
    lines = [
        "[IPKernelApp] WARNING | Kernel is running over TCP without encryption. All communication is plain text.",
        "ERROR:tornado.general:Uncaught exception in ZMQStream callback",
        "Traceback (most recent call last):",
        '  File "/venv/lib/python3.11/site-packages/ipykernel/iostream.py", line 343, in schedule',
        '    self._event_pipe.send(b"")',
        "zmq.error.ZMQError: Socket operation on non-socket",
        "a line the notebook's code wrote to stderr",
        "Traceback (most recent call last):",
        "  a traceback of the user's own, kept",
    ]
    assert report.without_kernel_noise(lines) == lines[6:]
