"""online_softmax: one-pass running max + rescaled sum -> two passes (max, then sum)."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes, fixture, only_site

from klineage.deopt.base import Refused
from klineage.deopt.online_softmax import OnlineSoftmax
from klineage.source.model import CudaSource

OP = OnlineSoftmax()


def test_find_and_preconditions() -> None:
    src, _ = fixture("online_softmax", "softmax_rows")
    (site,) = OP.find(src)
    assert (site.details["m"], site.details["d"], site.details["form"]) == ("m", "d", "softmax")
    names = {f.name: f.holds for f in OP.preconditions(src, site)}
    assert names == {
        "rerunnable_loop": True,
        "side_effect_free_body": True,
        "sum_starts_at_zero": True,
        "only_max_and_sum_carried": True,
        "max_rescale_identity": True,
    }


def test_remove_two_passes(tmp_path: Path) -> None:
    src, wl = fixture("online_softmax", "softmax_rows")
    out = OP.remove(src, only_site(OP, src))
    assert OP.find(out) == []
    assert out.text.count("for (int j = threadIdx.x; j < N; j += kThreads)") == 3  # max, sum, write
    assert "d = d + __expf(v - mn);" in out.text and "const float mn = m;" in out.text
    assert_passes(out.text, wl, tmp_path, "softmax_two_pass.cu")


def test_expert_softmax_online_kernel_splits() -> None:
    src = CudaSource.from_file(Path(__file__).parent.parent / "expert_kernels/softmax/expert.cu")
    (site,) = OP.find(src)
    out = OP.remove(src, site)
    assert "rescale the running sum" not in out.text.split("// pass 2")[0].split("// pass 1")[1]
    assert OP.find(out) == []


REFUSALS = {
    "writes in the loop": (
        """
__global__ void k(const float* x, float* y, int n) {
    float m = -INFINITY, d = 0.f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const float mn = fmaxf(m, x[j]);
        d = d * __expf(m - mn) + __expf(x[j] - mn);
        m = mn;
        y[j] = m;
    }
    y[0] = d;
}""",
        "side_effect_free_body",
    ),
    "sum not from zero": (
        """
__device__ float f(const float* x, int n, float d) {
    float m = 0.f;
    for (int j = 0; j < n; ++j) {
        const float mn = fmaxf(m, x[j]);
        d = d * expf(m - mn) + expf(x[j] - mn);
        m = mn;
    }
    return d;
}""",
        "sum_starts_at_zero",
    ),
    "welford from a nonzero start": (
        """
__device__ float var(const float* x, int n) {
    float mean = 0.f, m2 = 1.f;
    for (int j = 0; j < n; ++j) {
        const float delta = x[j] - mean;
        mean += delta / (j + 1);
        m2 += delta * (x[j] - mean);
    }
    return m2 / n;
}""",
        "statistics_start_at_zero",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals(case: str) -> None:
    text, fact = REFUSALS[case]
    src = CudaSource.from_text(text, "r.cu")
    (site,) = OP.find(src)
    with pytest.raises(Refused, match=fact):
        OP.remove(src, site)


def test_welford_two_passes(tmp_path: Path) -> None:
    src, wl = fixture("online_softmax", "row_var")
    (site,) = OP.find(src)
    assert (site.details["form"], site.details["mean"], site.details["m2"]) == ("welford", "st.mean", "st.m2")
    out = OP.remove(src, site)
    first, second = out.text.split("// pass 2")
    assert "st.mean += delta / st.n;" in first and "st.m2 +=" not in first.split("// pass 1")[1]
    assert (
        "st.m2 += delta * (v - st.mean);" in second
        and "st.mean +=" not in second.split("part[threadIdx.x]")[0]
    )
    assert_passes(out.text, wl, tmp_path, "row_var_two_pass.cu")


def test_layernorm_streaming_welford_splits() -> None:
    src = CudaSource.from_file(Path(__file__).parent.parent / "expert_kernels/layernorm/expert.cu")
    (site,) = [s for s in OP.find(src) if s.details["form"] == "welford"]
    assert all(f.holds for f in OP.removal_preconditions(src, site))
    out = OP.remove(src, site)
    assert out.text.count("for (int col = threadIdx.x * W; col < N; col += kBlockThreads * W)") == 3
