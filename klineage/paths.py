"""Where KLineage keeps its caches and artifacts: $KLINEAGE_HOME, else ~/.cache/klineage."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    p = Path(os.environ.get("KLINEAGE_HOME") or Path.home() / ".cache" / "klineage")
    p.mkdir(parents=True, exist_ok=True)
    return p


def repo_root() -> Path:
    """The source checkout (where expert_kernels/ and examples/ live)."""
    return Path(__file__).resolve().parent.parent
