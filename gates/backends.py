"""Registry of gate backends by name; modules are imported lazily (the cuda one needs a GPU torch)."""

from __future__ import annotations

import importlib
from types import ModuleType

from klineage.errors import KLineageError

BACKENDS = {
    "emu": "klineage.gates.emu.backend",
    "cuda": "klineage.gates.cuda.backend",
}


def get_backend(name: str) -> ModuleType:
    """The backend module implementing gates/backend.py's Backend interface."""
    if name not in BACKENDS:
        raise KLineageError(f"unknown backend '{name}' (known: {', '.join(BACKENDS)})")
    try:
        return importlib.import_module(BACKENDS[name])
    except ModuleNotFoundError as e:
        raise KLineageError(f"backend '{name}' is not available: {e}") from None
