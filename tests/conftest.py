"""Shared fixtures: repository paths and an isolated KLineage home per test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


@pytest.fixture(scope="session", autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Gate caches and artifacts go to a temporary folder, never the user's ~/.cache."""
    if "KLINEAGE_TEST_KEEP_HOME" not in os.environ:
        os.environ["KLINEAGE_HOME"] = str(tmp_path_factory.mktemp("klineage_home"))


@pytest.fixture
def repo() -> Path:
    return REPO
