"""Shared fixtures: the repository root, bundled data, and the optional shared corpus."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = REPO_ROOT / "data"
TEST_DATA_DIR = Path(__file__).resolve().parent / "data"
# Real traces, manifests and scrapes other teams published, kept beside the
# checkout rather than copied in.
SHARED_DIR = REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared corpus folder; tests that need it skip where it is absent."""
    if not SHARED_DIR.is_dir():
        pytest.skip(f"shared corpus not found at {SHARED_DIR} (it sits beside the checkout in CI)")
    return SHARED_DIR


# Property tests: no per-example deadline (a loaded 2-core CI machine is slow
# at random), and in CI a fixed example sequence so a failure reproduces.
settings.register_profile("default", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")
