"""KLineage: mine verified CUDA optimization skills from expert kernels and apply them to new ones."""

from klineage.errors import KLineageError, SourceError, WorkloadError
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
