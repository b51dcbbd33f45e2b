"""Errors that reach the user as one clear line and exit code 2 (DESIGN.md, CLI)."""

from __future__ import annotations


class KLineageError(Exception):
    """Bad input or usage: the CLI prints `error: <message>` and exits 2, never a traceback."""


class WorkloadError(KLineageError):
    """A workload folder or spec is unusable; the message names the file and every problem."""


class SourceError(KLineageError):
    """A CUDA source that cannot be read or parsed, or an edit that would break it."""
