"""size_dispatch: a host-side `if` that sends size classes to different kernels -> one path for
every size. The gate decides whether the kept path serves the other class: the general path
passes, a specialized one is rejected (evidence of what the size class needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.deopt.base import Refused
from klineage.deopt.registry import get_operator
from klineage.deopt.size_dispatch import SizeDispatch
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from klineage.source.model import CudaSource

OP = SizeDispatch()
REPO = Path(__file__).resolve().parent.parent

DISPATCH = """
__global__ void small_k(const float* x, float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = x[i]; }
__global__ void big_k(const float* x, float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i];
}
template <bool V> void launch_big(const float* x, float* y, int n, cudaStream_t s) { big_k<<<64, 256, 0, s>>>(x, y, n); }
extern "C" void launch(const float* x, float* y, int n, cudaStream_t s) {
    if (n <= 1024) {
        small_k<<<1, 1024, 0, s>>>(x, y, n);
    } else {
        launch_big<true>(x, y, n, s);
    }
    if (n > 0) big_k<<<1, 32, 0, s>>>(x, y, n);
    if constexpr (sizeof(float) == 4) big_k<<<1, 32, 0, s>>>(x, y, n); else small_k<<<1, 32, 0, s>>>(x, y, n);
}
__device__ int pick(int n) { if (n > 4) { return 1; } else { return 2; } }
"""


def test_find_two_sites_per_dispatch_if_only() -> None:
    src = CudaSource.from_text(DISPATCH, "d.cu")
    sites = OP.find(src)
    # the size dispatch only: the if without an else, the `if constexpr` and device code are not sites
    assert [s.details["keep"] for s in sites] == ["else", "then"]
    assert sites[0].details["condition"] == "(n <= 1024)" and sites[0].details["function"] == "launch"
    assert (
        "through launch_big" not in sites[0].summary
    )  # a call to a launching host function counts as a launch


def test_remove_keeps_one_branch() -> None:
    src = CudaSource.from_text(DISPATCH, "d.cu")
    keep_else, keep_then = OP.find(src)
    general = OP.remove(src, keep_else)
    assert "small_k<<<1, 1024" not in general.text and "launch_big<true>(x, y, n, s);" in general.text
    small = OP.remove(src, keep_then)
    assert "small_k<<<1, 1024" in small.text and "launch_big<true>" not in small.text.split('extern "C"')[1]
    assert OP.find(general) == [] and OP.find(small) == []
    assert OP.find_forward(general) == [] and not OP.mechanical_apply
    with pytest.raises(Refused, match="no mechanical forward step"):
        OP.apply(general, keep_else)


def test_condition_with_side_effects_is_refused() -> None:
    text = DISPATCH.replace("if (n <= 1024)", "if ((n = n + 0) <= 1024)")
    src = CudaSource.from_text(text, "d.cu")
    with pytest.raises(Refused, match="condition_without_side_effects"):
        OP.remove(src, OP.find(src)[0])


def test_registered_last_in_the_soft_order() -> None:
    assert get_operator("size_dispatch").category == "tiling"


@pytest.mark.parametrize(("keep", "accepted"), [("else", True), ("then", False)])
def test_gate_decides_whether_the_kept_path_serves_every_size(
    tmp_path: Path, keep: str, accepted: bool
) -> None:
    """softmax's mined root sends rows of N <= 1024 to a warp-per-row kernel that caches the row in
    registers: keeping the other side (block per row and up) serves every size; keeping the
    warp path alone is wrong for the longer rows of the emu shapes (1025 ... 16384)."""
    wl = REPO / "expert_kernels" / "softmax"
    src = CudaSource.from_text(
        (REPO / "tests" / "data" / "deopt" / "softmax_warp_or_block_dispatch.cu").read_text(), "root.cu"
    )
    site = next(
        s for s in OP.find(src) if s.details["keep"] == keep and s.details["condition"] == "(N <= 32 * kWarp)"
    )
    out = OP.remove(src, site)
    r = gate(
        out.text, wl, GateOptions(backend="emu"), name=f"keep_{keep}.cu", use_cache=False, cache_root=tmp_path
    )
    assert r.accepted is accepted, (r.category, r.message)
    if not accepted:
        assert r.category in ("mismatch", "crash", "unwritten_output"), (r.category, r.message)


def test_emu_shapes_cover_every_head_dim_of_attention(tmp_path: Path) -> None:
    """The gate can only refute a dispatch removal with a shape of the other class: attention's
    emu shapes hold both head dims, so keeping only the D = 64 kernels is rejected."""
    wl = REPO / "expert_kernels" / "attention_fwd"
    src = CudaSource.from_text(
        (REPO / "tests" / "data" / "deopt" / "attention_fwd_head_dim_dispatch.cu").read_text(), "root.cu"
    )
    sites = OP.find(src)
    d64_only = next(s for s in sites if s.details["keep"] == "then" and s.details["condition"] == "(D == 64)")
    r = gate(
        OP.remove(src, d64_only).text,
        wl,
        GateOptions(backend="emu"),
        name="d64_only.cu",
        use_cache=False,
        cache_root=tmp_path,
    )
    assert not r.accepted and "D': 128" in r.message, (r.category, r.message)
    # and both masks at D = 128: keeping only its causal kernel is rejected too
    causal_128 = [s for s in sites if s.details["condition"] == "(causal)" and s.details["keep"] == "then"][
        -1
    ]
    r = gate(
        OP.remove(src, causal_128).text,
        wl,
        GateOptions(backend="emu"),
        name="causal128_only.cu",
        use_cache=False,
        cache_root=tmp_path,
    )
    assert not r.accepted and "'causal': 0" in r.message, (r.category, r.message)
