"""``planner report`` end to end: two chapters on non-default inputs, opened offline in Chromium.

Each report runs a kernel and a Sphinx build (about 20 s on two cores), so
every run happens once per module and several tests read its result.
"""

from __future__ import annotations

import json
import os

import nbformat
import pytest

from planner.cli import main
from tests.check_built_book import browser_unavailable, check_page, chromium
from tests.conftest import REPO_ROOT
from tests.notebooks import glued

LOADTEST = REPO_ROOT / "data" / "loadtests" / "qwen2.5-7b_guidellm_benchmarks.json"


def _report(tmp_path_factory, chapter, *params, cwd=None):
    root = tmp_path_factory.mktemp(chapter)
    out = root / "reports" / "run"
    argv = ["report", chapter, "--quiet", "--out", str(out)]
    for pair in params:
        argv += ["--param", pair]
    old = os.getcwd()
    os.chdir(cwd or root)
    try:
        status = main(argv)
    finally:
        os.chdir(old)
    return status, out


@pytest.fixture(scope="module")
def loadtest_report(tmp_path_factory):
    # A relative path from the user's folder, not from book/.
    return _report(
        tmp_path_factory,
        "loadtest_thresholds",
        "loadtest_path=loadtests/qwen2.5-7b_guidellm_benchmarks.json",
        "ttft_p99_slo_ms=1500",
        "itl_p99_slo_ms=40",
        cwd=REPO_ROOT / "data",
    )


@pytest.fixture(scope="module")
def littles_law_report(tmp_path_factory):
    return _report(
        tmp_path_factory,
        "littles_law",
        "knee_concurrency=64",
        "request_duration_s=9.5",
        "target_concurrency=52",
        "arrival_rate_rps=10",
    )


@pytest.fixture(scope="module")
def browser():
    missing = browser_unavailable()
    if missing:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"browser tests cannot run in CI: {missing}")
        pytest.skip(missing)
    with chromium() as running:
        yield running


def test_a_report_is_two_files_and_nothing_else(loadtest_report):
    status, out = loadtest_report
    assert status == 0
    assert sorted(p.name for p in out.iterdir()) == ["loadtest_thresholds.html", "loadtest_thresholds.ipynb"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["run"]  # no staging folder left


def test_the_loadtest_report_has_the_cli_numbers(loadtest_report, capsys):
    _, out = loadtest_report
    notebook = nbformat.read(out / "loadtest_thresholds.ipynb", as_version=4)
    assert notebook.metadata.papermill.parameters["loadtest_path"] == str(LOADTEST)
    assert main(["knee", str(LOADTEST), "--ttft-p99-ms", "1500", "--itl-p99-ms", "40", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert glued(notebook)["knee_concurrency_value"] == cli["knee_concurrency"]
    assert cli["model"] in (out / "loadtest_thresholds.html").read_text(encoding="utf-8")


def test_the_littles_law_report_has_the_cli_numbers(littles_law_report, capsys):
    status, out = littles_law_report
    assert status == 0
    notebook = nbformat.read(out / "littles_law.ipynb", as_version=4)
    assert notebook.metadata.papermill.parameters["knee_concurrency"] == 64.0
    assert (
        main(
            ["replicas", "--arrival-rate-rps", "10", "--duration-s", "9.5", "--knee", "64", "--target", "52", "--json"]
        )
        == 0
    )
    cli = json.loads(capsys.readouterr().out)
    assert glued(notebook)["replicas"] == cli["replicas"]
    # The page says what it was run on; the notebook stays as papermill wrote it.
    from bs4 import BeautifulSoup

    page = BeautifulSoup((out / "littles_law.html").read_text(encoding="utf-8"), "html.parser")
    text = " ".join(page.get_text(" ").split())
    assert "on these inputs:" in text and "knee_concurrency = 64.0" in text
    assert not any("on these inputs" in c.source for c in notebook.cells)


@pytest.mark.parametrize("which", ["loadtest_report", "littles_law_report"])
def test_the_page_opens_offline_with_every_chart_drawn(which, request, browser, tmp_path):
    _, out = request.getfixturevalue(which)
    page = next(out.glob("*.html"))
    text = page.read_text(encoding="utf-8")
    assert "{glue" not in text
    # Only the page itself may be read: every script, style and font is inside it.
    result = check_page(
        browser, page.as_uri(), page.name, screenshot=tmp_path / "page.png", allowed_origin=page.as_uri()
    )
    assert result.charts >= 2
    # Layout is checked on the built book (check_built_book); here the page must load and draw.
    assert [p for p in result.problems if "wider than the content column" not in p] == []


def test_a_failing_cell_exits_2_with_its_message_and_writes_nothing(tmp_path, capsys):
    not_a_loadtest = REPO_ROOT / "data" / "manifests" / "queue-keda.yaml"
    out = tmp_path / "reports" / "bad"
    status = main(
        ["report", "loadtest_thresholds", "--quiet", "--out", str(out), "--param", f"loadtest_path={not_a_loadtest}"]
    )
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("planner report: error: loadtest_thresholds: cell ")
    assert "PlannerInputError" in err and "queue-keda.yaml" in err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # not even the reports/ folder it would have made


def test_refusals_exit_2_before_running_anything(tmp_path, capsys):
    cases = [
        (["report", "nope", "--out", str(tmp_path / "x")], "unknown chapter 'nope'"),
        (["report", "littles_law"], "--out DIR is required"),
        (
            ["report", "littles_law", "--out", str(tmp_path / "x"), "--param", "knee=3"],
            "the chapter has no parameter 'knee'; its parameters: knee_concurrency (float)",
        ),
        (["report", "littles_law", "--out", str(REPO_ROOT / "book" / "out")], "inside the book's folder"),
        (
            ["report", "loadtest_thresholds", "--out", str(REPO_ROOT / "data" / "loadtests")],
            "is the folder of the input",
        ),
    ]
    for argv, message in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []


def test_list_shows_the_parameters(capsys):
    from planner.workflows.report import chapter_parameters

    assert main(["report", "kv_capacity", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    expected = chapter_parameters(REPO_ROOT / "book" / "kv_capacity.ipynb").values()
    assert [line.split(" = ")[0] for line in lines] == [f"{p.name}: {p.type_name}" for p in expected]
    assert any(line.startswith("kv_cache_dtype: str = ") for line in lines)


# --------------------------------------------------------------------------- dict and list parameters (issue 20)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"0": 20}', {"0": 20}),  # JSON
        ("{0: 20}", {0: 20}),  # YAML flow
        ("{'0': 20}", {"0": 20}),  # the form planner.autoscaler.explain's own message shows
        ("{waiting: 20, 1: 0.9}", {"waiting": 20, 1: 0.9}),
        ("0=6,1=9", {"0": 6, "1": 9}),  # as `planner hpa --metric` takes them
    ],
)
def test_a_dict_parameter_is_converted_from_json_or_yaml_flow(text, expected):
    from planner.workflows.report import chapter_parameters, resolve_parameters

    parameters = chapter_parameters(REPO_ROOT / "book" / "hpa_decisions.ipynb")
    assert parameters["metric_values"].type_name == "dict"
    assert resolve_parameters(parameters, [f"metric_values={text}"]) == {"metric_values": expected}


def test_a_refused_dict_names_forms_that_work():
    import re

    from planner.errors import PlannerInputError
    from planner.workflows.report import chapter_parameters, resolve_parameters

    parameters = chapter_parameters(REPO_ROOT / "book" / "hpa_decisions.ipynb")
    with pytest.raises(PlannerInputError) as refused:
        resolve_parameters(parameters, ["metric_values=[20, 0.9]"])
    message = str(refused.value)
    suggested = re.findall(r"--param '([^']+)'", message)
    assert len(suggested) == 3 and "expected a mapping" in message
    for pair in suggested:  # every form the message shows is accepted
        assert isinstance(resolve_parameters(parameters, [pair])["metric_values"], dict)


def test_a_list_parameter_is_converted_too():
    from planner.workflows.report import ChapterParameter, resolve_parameters

    parameters = {"sizes": ChapterParameter("sizes", "list", [1])}
    assert resolve_parameters(parameters, ["sizes=[1, 2.5]"]) == {"sizes": [1, 2.5]}
    assert resolve_parameters(parameters, ["sizes=1,2"]) == {"sizes": [1, 2]}


def test_the_hpa_chapter_runs_with_a_json_dict_on_the_command_line(tmp_path_factory):
    status, out = _report(tmp_path_factory, "hpa_decisions", 'metric_values={"0": 20}')
    assert status == 0
    executed = nbformat.read(out / "hpa_decisions.ipynb", as_version=4)
    injected = next(c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", []))
    assert 'metric_values = {"0": 20}' in injected.source


def test_the_readmes_dict_examples_are_accepted():
    import re

    from planner.workflows.report import chapter_parameters, resolve_parameters

    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    examples = re.findall(r"--param '?(metric_values=[^'`]+)'?`", readme)
    assert len(examples) >= 3, examples
    parameters = chapter_parameters(REPO_ROOT / "book" / "hpa_decisions.ipynb")
    for pair in examples:
        assert isinstance(resolve_parameters(parameters, [pair])["metric_values"], dict), pair
