"""template_args_to_constexpr: an integer kernel template parameter with one value at every launch
becomes a constexpr in the kernel's body; what the rule must leave alone stays templated."""

from __future__ import annotations

import pytest

from klineage.deopt.register_blocking import RegisterBlocking
from klineage.source.canon import canonical_form
from klineage.source.canon.templates import TemplateArgsToConstexpr
from klineage.source.model import CudaSource

RULE = TemplateArgsToConstexpr()

_K = """constexpr int kTile = 32;
template <typename T, int BM, unsigned int TM = 4>
__global__ void k(T* x) {{ x[threadIdx.x] = BM * TM; }}
{extra}
extern "C" void launch(float* x, cudaStream_t s) {{
    {launches}
}}
"""


def _run(launches: str, extra: str = "") -> str | None:
    out = RULE.rewrite(CudaSource.from_text(_K.format(launches=launches, extra=extra), "k.cu"))
    return out.text if out is not None else None


def test_fixed_values_become_constexprs() -> None:
    out = _run("k<float, kTile, 8><<<1, 32, 0, s>>>(x);\n    k<float, 32><<<2, 32, 0, s>>>(x);")
    assert out is not None  # TM differs (8, and the default 4): only BM is fixed
    assert "template <typename T, unsigned int TM = 4>" in out and "constexpr int BM = 32;" in out
    assert "k<float, 8><<<1" in out and "k<float><<<2" in out
    out = _run("k<float, kTile, 8><<<1, 32, 0, s>>>(x);\n    k<float, 32, 8><<<2, 32, 0, s>>>(x);")
    assert out is not None
    assert "template <typename T>" in out
    assert "constexpr int BM = kTile;" not in out  # launches disagree in spelling: the value is written
    assert "constexpr int BM = 32;" in out and "constexpr unsigned int TM = 8;" in out
    assert "k<float><<<1, 32, 0, s>>>(x);" in out and "k<float><<<2, 32, 0, s>>>(x);" in out


def test_every_parameter_fixed_drops_the_template() -> None:
    src = """template <int B>
__global__ void z(float* x) { x[threadIdx.x] = B; }
extern "C" void launch(float* x, cudaStream_t s) { z<64><<<1, 64, 0, s>>>(x); }
"""
    out = RULE.rewrite(CudaSource.from_text(src, "z.cu"))
    assert out is not None
    assert "template" not in out.text and "z<<<1, 64, 0, s>>>(x);" in out.text
    assert "constexpr int B = 64;" in out.text


@pytest.mark.parametrize(
    "extra",
    [
        "void f() { cudaFuncSetAttribute(k<float, 32, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 0); }",
        "auto* p = &k<float, 32, 4>;",
    ],
)
def test_other_mentions_of_the_instantiation_keep_it(extra: str) -> None:
    assert _run("k<float, 32, 4><<<1, 32, 0, s>>>(x);", extra) is None


def test_parameters_read_by_the_signature_stay() -> None:
    src = """template <int BM>
__global__ void __launch_bounds__(BM) z(float* x) { x[threadIdx.x] = BM; }
extern "C" void launch(float* x, cudaStream_t s) { z<64><<<1, 64, 0, s>>>(x); }
"""
    assert RULE.rewrite(CudaSource.from_text(src, "z.cu")) is None


def test_register_blocking_reads_sizes_the_launch_fixed() -> None:
    """The launch literal that register_blocking refused ("TM is the literal 4 at the launch")
    becomes a named size once canonical."""
    src = """template <int BM, int BN, int TM, int TN>
__global__ void g(const float* A, float* C, int M, int N) {
    float acc[TM][TN] = {};
    const int ty = threadIdx.x / (BN / TN), tx = threadIdx.x % (BN / TN);
    for (int i = 0; i < TM; ++i) for (int j = 0; j < TN; ++j) acc[i][j] += A[i] * A[j];
    C[(blockIdx.y * BM + ty * TM) * N + blockIdx.x * BN + tx * TN] = acc[0][0];
}
extern "C" void launch(const float* A, float* C, int M, int N, cudaStream_t s) {
    g<64, 64, 4, 4><<<dim3((N + 63) / 64, (M + 63) / 64), 256, 0, s>>>(A, C, M, N);
}
"""
    rb = RegisterBlocking()
    before = CudaSource.from_text(src, "g.cu")
    (site,) = rb.find(before)
    assert any("literal" in f.reason for f in rb.removal_preconditions(before, site) if not f.holds)
    canon = canonical_form(before).source
    assert "template_args_to_constexpr" in canonical_form(before).applied
    (site,) = rb.find(canon)
    facts = rb.removal_preconditions(canon, site)
    assert all("literal" not in f.reason for f in facts), [f.reason for f in facts]


def test_a_file_constant_keeps_its_name_and_a_launcher_local_is_left() -> None:
    out = _run("k<float, kTile, 4><<<1, 32, 0, s>>>(x);")
    assert out is not None and "constexpr int BM = kTile;" in out
    src = """template <int B>
__global__ void z(float* x) { x[threadIdx.x] = B; }
extern "C" void launch(float* x, cudaStream_t s) {
    constexpr int kB = 64;
    z<kB><<<1, kB, 0, s>>>(x);
}
"""
    assert RULE.rewrite(CudaSource.from_text(src, "z.cu")) is None
