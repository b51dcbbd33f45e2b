"""A kernel's identity: the short SHA-256 of its text, the key of `kernels`, `states` and the
materializer's candidates."""

from __future__ import annotations

import hashlib


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
