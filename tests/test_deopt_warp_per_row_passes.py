"""warp_per_row around a sequential pass loop: k passes of a filtered arg-max (a selection).

Each pass scans the row for the largest value after the previous pick (smaller position on
ties); the warp strides every pass and reduces (value, position) with a butterfly in which a lane
that found nothing (position < 0) never wins, so the pick carried to the next pass is the same in
every lane. Checked on the emu gate with the topk workload and with a tie-heavy selection of the
project's own (quantized values, odd row lengths, k up to the row length)."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.deopt.warp_per_row import WarpPerRow
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from klineage.source.model import CudaSource
from tests.deopt_kernel_checks import failed_forward

OP = WarpPerRow()
REPO = Path(__file__).resolve().parent.parent

#: k passes over quantized values (many ties), `floorf(x * 4)`
TIES_KERNEL = """
__global__ void sel(const float* x, float* values, long long* indices, int M, int N, int K) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    const float* xr = x + (size_t)row * N;
    float last_v = 0.0f;
    int last_i = -1;
    for (int p = 0; p < K; ++p) {
        int pick = -1;
        float pick_v = 0.0f;
        for (int j = 0; j < N; ++j) {
            float v = floorf(xr[j] * 4.0f);
            if ((p == 0 || v < last_v || (v == last_v && j > last_i)) && (pick < 0 || v > pick_v)) {
                pick = j;
                pick_v = v;
            }
        }
        values[(size_t)row * K + p] = pick_v;
        indices[(size_t)row * K + p] = pick;
        last_v = pick_v;
        last_i = pick;
    }
}

extern "C" void launch(const float* x, float* values, long long* indices, int M, int N, int K, cudaStream_t s) {
    sel<<<(M + 63) / 64, 64, 0, s>>>(x, values, indices, M, N, K);
}
"""

TIES_WORKLOAD = """
import torch
from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x, M, N, K):
    v, i = torch.sort(torch.floor(x * 4.0), dim=-1, descending=True, stable=True)
    return {"values": v[:, :K].contiguous(), "indices": i[:, :K].contiguous()}


WORKLOAD = Workload(
    name="select_ties",
    args=[
        Tensor("x", ("M", "N"), "float32", "in"),
        Tensor("values", ("M", "K"), "float32", "out"),
        Tensor("indices", ("M", "K"), "int64", "out"),
        Scalar("M"),
        Scalar("N"),
        Scalar("K"),
    ],
    reference=reference,
    shapes={
        "test": [{"M": 3, "N": 33, "K": 33}],
        "emu": [{"M": 3, "N": 33, "K": 33}, {"M": 2, "N": 333, "K": 9}, {"M": 1, "N": 31, "K": 31}],
        "bench": [{"M": 64, "N": 333, "K": 9}],
    },
    tolerances={"float32": Tolerance(0.0, 0.0)},
    description="k passes of a filtered arg-max over quantized values (ties everywhere)",
)
"""


def _forward(text: str) -> CudaSource:
    src = CudaSource.from_text(text, "k.cu")
    (site,) = OP.find_forward(src)
    return OP.apply(src, site)


def _failed(text: str) -> dict[str, str]:
    return dict(failed_forward(OP, text))


def _ties_workload(tmp_path: Path) -> Path:
    wl = tmp_path / "select_ties"
    wl.mkdir()
    (wl / "workload.py").write_text(TIES_WORKLOAD)
    return wl


def _accepted(text: str, wl: Path, tmp_path: Path) -> tuple[bool, str]:
    r = gate(text, wl, GateOptions(backend="emu"), name="warp.cu", use_cache=False, cache_root=tmp_path)
    return r.accepted, f"{r.category}: {r.message}"


def test_each_pass_is_strided_and_reduced_with_a_sentinel_butterfly() -> None:
    out = _forward(TIES_KERNEL).text
    assert "for (int j = lane; j < N; j += 32)" in out
    assert "if (kl_i >= 0 && (pick < 0 || kl_v > pick_v || (kl_v == pick_v && kl_i < pick)))" in out
    assert "if (lane == 0) values[(size_t)row * K + p] = pick_v;" in out
    assert "for (int p = 0; p < K; ++p)" in out  # the pass loop stays sequential
    (site,) = OP.find(CudaSource.from_text(out, "w.cu"))
    back = OP.remove(CudaSource.from_text(out, "w.cu"), site).text
    assert "__shfl_xor_sync" not in back and "for (int j = 0; j < N; ++j)" in back


def test_gate_accepts_the_selection_with_ties_and_odd_rows(tmp_path: Path) -> None:
    ok, why = _accepted(_forward(TIES_KERNEL).text, _ties_workload(tmp_path), tmp_path)
    assert ok, why


def test_gate_rejects_a_butterfly_where_an_empty_lane_can_win(tmp_path: Path) -> None:
    """Adversarial: without the sentinel test, a lane whose elements were all picked offers
    (0, -1) and beats negative values once the row's positives are used up (k = N)."""
    out = _forward(TIES_KERNEL).text.replace("kl_i >= 0 && (pick < 0 || ", "(")
    ok, _ = _accepted(out, _ties_workload(tmp_path), tmp_path)
    assert not ok


def test_gate_accepts_topk_naive(tmp_path: Path) -> None:
    wl = REPO / "expert_kernels" / "topk"
    out = _forward((wl / "naive.cu").read_text()).text
    ok, why = _accepted(out, wl, tmp_path)
    assert ok, why


@pytest.mark.parametrize(
    ("edits", "words"),
    [
        # a sum carried over the passes would be re-added by all 32 lanes every pass
        (
            [
                ("float last_v = 0.0f;", "float last_v = 0.0f;\n    float s = 0.0f;"),
                ("float v = floorf(xr[j] * 4.0f);", "float v = floorf(xr[j] * 4.0f);\n            s += v;"),
                ("last_i = pick;", "last_i = pick + (int)s;"),
            ],
            "not declared in the pass",
        ),
        # the pass writes what the next pass's row loop reads: lane 0's store, the other lanes' reads
        (
            [("last_i = pick;", "last_i = pick;\n        ((float*)x)[(size_t)row * N + pick] = -1e30f;")],
            "which its row loops read",
        ),
        # `>=`: the last maximum wins, not the pair order the butterfly keeps
        ([("v > pick_v", "v >= pick_v")], "not a sum/max/min reduction"),
    ],
)
def test_pass_loops_it_refuses(edits: list[tuple[str, str]], words: str) -> None:
    text = TIES_KERNEL
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    failed = _failed(text)
    assert "rows_independent" in failed and words in failed["rows_independent"], failed
