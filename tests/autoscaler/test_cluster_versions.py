"""Version facts: the feature gates' stages, KEDA's tolerance pass-through, and parsing the CLI's versions."""

from __future__ import annotations

import pytest

from planner.autoscaler.versions import (
    DEFAULT_KEDA_VERSION,
    DEFAULT_KUBERNETES_VERSION,
    HPA_CONFIGURABLE_TOLERANCE,
    HPA_SCALE_TO_ZERO,
    ClusterVersions,
    Version,
)
from planner.errors import PlannerInputError


@pytest.mark.parametrize(
    ("text", "version"),
    [("1.37", Version(1, 37)), ("v1.36.2", Version(1, 36)), ("2.20.2", Version(2, 20)), (" 1.9 ", Version(1, 9))],
)
def test_versions_parse_with_or_without_v_and_patch(text, version):
    assert Version.parse(text) == version


@pytest.mark.parametrize("text", ["1", "1.x", "latest", "1.37.0.1", ""])
def test_a_bad_version_names_the_flag(text):
    with pytest.raises(PlannerInputError, match=r"--keda-version: expected MAJOR\.MINOR"):
        ClusterVersions.parse(keda=text)


def test_versions_order_numerically_not_as_text():
    assert Version(1, 9) < Version(1, 10) < Version(2, 0)


def test_defaults_are_kubernetes_1_37_and_keda_2_20():
    assert ClusterVersions() == ClusterVersions.parse() == ClusterVersions(Version(1, 37), Version(2, 20))
    assert (str(DEFAULT_KUBERNETES_VERSION), str(DEFAULT_KEDA_VERSION)) == ("1.37", "2.20")


@pytest.mark.parametrize(
    ("minor", "stage", "on"),
    [
        (32, "absent", False),
        (33, "alpha", False),
        (34, "alpha", False),
        (35, "beta", True),
        (36, "beta", True),
        (37, "GA", True),
    ],
)
def test_configurable_tolerance_stages(minor, stage, on):
    version = Version(1, minor)
    assert HPA_CONFIGURABLE_TOLERANCE.stage(version) == stage
    assert HPA_CONFIGURABLE_TOLERANCE.enabled_by_default(version) is on


@pytest.mark.parametrize(
    ("minor", "stage", "on"), [(15, "absent", False), (16, "alpha", False), (36, "alpha", False), (37, "beta", True)]
)
def test_hpa_scale_to_zero_stages(minor, stage, on):
    assert HPA_SCALE_TO_ZERO.stage(Version(1, minor)) == stage
    assert ClusterVersions(Version(1, minor)).hpa_scale_to_zero_by_default is on


def test_the_condition_based_scale_to_zero_starts_in_1_36():
    assert not ClusterVersions(Version(1, 35)).scaled_to_zero_condition
    assert ClusterVersions(Version(1, 36)).scaled_to_zero_condition


@pytest.mark.parametrize(
    ("k8s", "keda", "hpa_kept", "so_kept"),
    [
        ((1, 37), (2, 20), True, True),
        ((1, 35), (2, 18), True, True),
        ((1, 35), (2, 17), True, False),
        ((1, 34), (2, 20), False, False),
        ((1, 32), (2, 20), False, False),
    ],
)
def test_tolerance_is_kept_only_where_both_versions_pass_it(k8s, keda, hpa_kept, so_kept):
    versions = ClusterVersions(Version(*k8s), Version(*keda))
    assert (versions.tolerance_dropped("HorizontalPodAutoscaler") is None) is hpa_kept
    assert (versions.tolerance_dropped("ScaledObject") is None) is so_kept


def test_the_reasons_name_the_gate_or_the_keda_release():
    assert "alpha and off by default" in ClusterVersions(Version(1, 33)).tolerance_dropped("ScaledObject")
    assert "no per-HPA tolerance" in ClusterVersions(Version(1, 30)).tolerance_dropped("HorizontalPodAutoscaler")
    assert "KEDA 2.17 does not pass" in ClusterVersions(keda=Version(2, 17)).tolerance_dropped("ScaledObject")
