"""KLineage: mine verified CUDA optimization skills from expert kernels and apply them to new ones."""

from typing import TYPE_CHECKING, Any

from klineage.errors import KLineageError, SourceError, WorkloadError

if TYPE_CHECKING:
    from klineage.workload import Scalar, Tensor, Tolerance, Workload, load_workload

__version__ = "0.1.0"

__all__ = [
    "KLineageError",
    "Scalar",
    "SourceError",
    "Tensor",
    "Tolerance",
    "Workload",
    "WorkloadError",
    "load_workload",
    "__version__",
]

#: names served from klineage.workload on first use: it imports torch, which a command that only
#: reads a cached verdict or a store never needs (seconds of start-up)
_LAZY = ("Scalar", "Tensor", "Tolerance", "Workload", "load_workload")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from klineage import workload

        return getattr(workload, name)
    raise AttributeError(f"module 'klineage' has no attribute {name!r}")
