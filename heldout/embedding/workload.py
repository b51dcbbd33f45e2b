"""embedding: gather rows of a bf16 table (V, D) by int64 token ids (T,), out (T, D) (F.embedding).

Held out: a new operator (an indexed row gather, pure data movement). Ids need a custom init:
uniform in [0, V). An init sees only its tensor's shape (T,), so every shape below uses a distinct T
and the table height is looked up from it (checked at import). Values are copies: exact.
Launcher: launch(const __nv_bfloat16* table, const long long* ids, __nv_bfloat16* out, int V, int D,
int T, cudaStream_t).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from klineage import Scalar, Tensor, Tolerance, Workload

SHAPES = {
    "test": [{"V": 1, "D": 1, "T": 1}, {"V": 1000, "D": 4097, "T": 37}, {"V": 50, "D": 33, "T": 515},
             {"V": 32000, "D": 130, "T": 64}],
    "emu": [{"V": 1, "D": 1, "T": 2}, {"V": 100, "D": 513, "T": 39}, {"V": 50, "D": 33, "T": 517},
            {"V": 3000, "D": 7, "T": 66}],
    "bench": [{"V": 128256, "D": 4096, "T": 32768}],
}
_ROWS: dict[int, int] = {}
for _b in (b for shapes in SHAPES.values() for b in shapes):
    assert _ROWS.setdefault(_b["T"], _b["V"]) == _b["V"], "each T must imply one V"


def _ids(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(0, _ROWS[shape[0]], shape, generator=gen, dtype=torch.int64).to(dtype)


def min_bytes(b: dict[str, int]) -> float:
    """The ids read and the rows written; of the table only one row is certain to be read (the
    ids may all repeat). Every input read once would count the whole 1 GB table at the bench
    shape, a floor above torch's own time: honest gathers were rejected as faster than light."""
    ids, rows_written, one_row = b["T"] * 8, b["T"] * b["D"] * 2, b["D"] * 2
    return ids + rows_written + one_row


def reference(table: torch.Tensor, ids: torch.Tensor, V: int, D: int, T: int) -> torch.Tensor:
    return F.embedding(ids, table)


def vendor(table: torch.Tensor, ids: torch.Tensor, V: int, D: int, T: int) -> torch.Tensor:
    return F.embedding(ids, table)


WORKLOAD = Workload(
    name="embedding",
    description="embedding lookup: bf16 table rows gathered by int64 ids",
    args=[
        Tensor("table", ("V", "D"), "bfloat16", "in"),
        Tensor("ids", ("T",), "int64", "in", init=_ids),
        Tensor("out", ("T", "D"), "bfloat16", "out"),
        Scalar("V"),
        Scalar("D"),
        Scalar("T"),
    ],
    reference=reference,
    vendor=vendor,
    tolerances={"bfloat16": Tolerance(0.0, 0.0)},
    shapes=SHAPES,
    min_bytes=min_bytes,
)
