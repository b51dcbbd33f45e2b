"""GPU times imported into the store (`klineage timings import`), as the report counts them."""

from __future__ import annotations

from typing import Any

from klineage.store.db import Store


def imported_by_device(store: Store) -> list[dict[str, Any]]:
    """Per device: how many kernel times were imported, and when they were measured."""
    return store.rows("SELECT device, count(*) AS kernels, min(measured_at) AS first, max(measured_at) AS last"
                      " FROM kernel_timings GROUP BY device ORDER BY kernels DESC, device")
