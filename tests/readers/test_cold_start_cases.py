"""The published cold starts: each case cited and checked, the model's phases give back the measured totals."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from planner.dynamics.cold_start import ColdStartPhases, time_to_ready_s
from planner.errors import PlannerInputError
from planner.readers.cold_start_cases import KINDS, cold_start_case, read_cold_start_cases
from tests.conftest import DATA_DIR, REPO_ROOT

CASES_PATH = DATA_DIR / "cold_starts.yaml"


@pytest.fixture(scope="module")
def cases():
    return read_cold_start_cases(CASES_PATH)


def test_every_case_is_cited_in_the_references_page(cases):
    references = (REPO_ROOT / "book" / "references.md").read_text(encoding="utf-8")
    assert len(cases) == 10 and len({case.id for case in cases}) == 10
    for case in cases:
        assert case.kind in KINDS
        for url in (case.url, *case.also):
            assert url.startswith("https://github.com/") and url in references, (case.id, url)


def test_kaito_2325_gives_back_966_s_and_455_s(cases):
    kaito = cold_start_case(cases, "kaito-2325")
    assert kaito.kind == "measurement" and kaito.runs == 1 and len(kaito.phases) == 11
    phases = kaito.model_phases()
    expected = ColdStartPhases(provision_s=284, node_init_s=126, image_pull_s=101, weights_load_s=260, warmup_s=195)
    assert phases == expected
    assert time_to_ready_s(phases, needs_node=True, image_cached=False) == kaito.figure("total_s") == 966
    assert time_to_ready_s(phases, needs_node=False, image_cached=True) == kaito.figure("warm_node_cached_image_s")


def test_llm_d_1902_totals_follow_from_their_parts(cases):
    llmd = cold_start_case(cases, "llm-d-1902")
    phases = llmd.model_phases()
    assert phases.provision_s == phases.node_init_s == phases.warmup_s == 0  # not 60, ColdStartPhases' default
    on_a_node = dict(needs_node=False, image_cached=False)
    assert time_to_ready_s(phases, **on_a_node) == llmd.figure("total_s") == 409
    streamed = dataclasses.replace(phases, image_pull_s=llmd.figure("image_streaming_pull_s"))
    assert time_to_ready_s(streamed, **on_a_node) == llmd.figure("image_streaming_total_s")
    both = dataclasses.replace(streamed, weights_load_s=llmd.figure("pod_snapshot_restore_s"))
    assert time_to_ready_s(both, **on_a_node) == llmd.figure("image_streaming_and_pod_snapshots_total_s") == 15


def test_a_user_report_is_not_called_a_measurement(cases):
    kinds = {case.id: case.kind for case in cases}
    assert kinds["gpu-operator-708"] == kinds["kubernetes-autoscaler-6707"] == "user report"
    assert kinds["karpenter-provider-aws-5578"] == "user report"
    assert kinds["llm-d-autoscaling-1071"] == "estimate"
    assert kinds["kubernetes-autoscaler-9126"] == "code default"


def test_unknown_cases_and_figures_are_named(cases):
    with pytest.raises(PlannerInputError, match=r"cold_starts\.yaml: no case 'nope' \(cases: kaito-2325, llm-d-1902"):
        cold_start_case(cases, "nope")
    with pytest.raises(PlannerInputError, match=r"cases\[2\] \(llm-d-autoscaling-1071\): figures\.total_s: not in"):
        cold_start_case(cases, "llm-d-autoscaling-1071").figure("total_s")
    with pytest.raises(PlannerInputError, match=r"\(llm-d-autoscaling-1071\): phases: this estimate lists no phases"):
        cold_start_case(cases, "llm-d-autoscaling-1071").model_phases()


def _kaito() -> dict:
    data = yaml.safe_load(CASES_PATH.read_text(encoding="utf-8"))
    return data["cases"][0]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c.update(colour="red"), r"cases\[0\] \(kaito-2325\): unknown key 'colour'"),
        (lambda c: c.update(kind="rumour"), r"\(kaito-2325\): kind: expected one of measurement, user report"),
        (lambda c: c.update(url="http://example.com"), r"\(kaito-2325\): url: expected an https:// URL"),
        (lambda c: c["phases"][3].update(duration_s=-1), r"\(kaito-2325\): phases\[3\]\.duration_s: expected a number"),
        (lambda c: c["phases"][0].update(counts_as="boot_s"), r"phases\[0\]\.counts_as: expected one of provision_s"),
        (lambda c: c["phases"][0].pop("name"), r"\(kaito-2325\): phases\[0\]\.name: expected non-empty text"),
        (lambda c: c["figures"].update(total_s=965), r"phases add up to 966 s, but figures\.total_s is 965 s"),
        (lambda c: c["figures"].update(total_minutes=16), r"figures\.total_minutes: a figure's name must end in _s"),
        (lambda c: c.pop("figures"), r"\(kaito-2325\): figures: missing"),
        (lambda c: c.update(runs=0), r"\(kaito-2325\): runs: expected a whole number >= 1"),
        (lambda c: c.update(kind="user report"), r"phases: only a measurement lists phases, and this is a user report"),
    ],
)
def test_a_bad_case_is_refused_naming_the_file_the_case_and_the_key(tmp_path, change, message):
    case = _kaito()
    change(case)
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": [case]}), encoding="utf-8")
    with pytest.raises(PlannerInputError, match=rf"^{path}: .*{message}"):
        read_cold_start_cases(path)


def test_a_bad_file_is_refused_with_its_name(tmp_path):
    with pytest.raises(PlannerInputError, match=r"missing\.yaml: no such file"):
        read_cold_start_cases(tmp_path / "missing.yaml")
    path = tmp_path / "cases.yaml"
    path.write_text("cases: [\n", encoding="utf-8")
    with pytest.raises(PlannerInputError, match=r"cases\.yaml: not valid YAML at line"):
        read_cold_start_cases(path)
    path.write_text(yaml.safe_dump({"cases": [_kaito(), _kaito()]}), encoding="utf-8")
    with pytest.raises(PlannerInputError, match=r"cases\[1\] \(kaito-2325\): id: 'kaito-2325' is used by an earlier"):
        read_cold_start_cases(path)
    path.write_text(yaml.safe_dump({"cases": []}), encoding="utf-8")
    with pytest.raises(PlannerInputError, match=r"expected a mapping with a non-empty list 'cases'"):
        read_cold_start_cases(path)
