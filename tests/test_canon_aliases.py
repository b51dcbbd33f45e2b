"""canon `thread_index_alias` and `shared_array_alias`: a local that only renames threadIdx or a
`__shared__` array reads as what it renames, so the block-per-row operator sees the thread's roles
(a block-strided loop's start, the thread-0 fold) and the exchange through shared memory in a kernel
written through aliases; aliases that could change meaning are left alone."""

from __future__ import annotations

import pytest

from klineage.source.canon import canonical_form
from klineage.source.canon.aliases import SharedArrayAlias, ThreadIndexAlias
from klineage.source.model import CudaSource
from klineage.source.text import normalize
from tests.test_deopt_block_per_row import _block_kernel, _removal_failures

K = "__global__ void k(float* x, int n) {{ {} }}"


def _rw(text: str, rule: ThreadIndexAlias | SharedArrayAlias | None = None) -> str:
    out = (rule or ThreadIndexAlias()).rewrite(CudaSource.from_text(text))
    return normalize(out.text) if out is not None else "UNCHANGED"


def test_alias_reads_as_the_coordinate() -> None:
    before = K.format(
        "const int tid = threadIdx.x; if (tid == 0) x[0] = 1;"
        " for (int i = tid; i < n; i += blockDim.x) x[i] = (tid & 31);"
    )
    after = K.format(
        "if (threadIdx.x == 0) x[0] = 1; for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = (threadIdx.x & 31);"
    )
    assert _rw(before) == normalize(after)


@pytest.mark.parametrize(
    "body",
    [
        "int tid = threadIdx.x; x[tid - 1] = 0;",  # unsigned threadIdx.x would wrap at thread 0
        "int tid = threadIdx.x; x[-(tid)] = 0;",
        "int tid = threadIdx.x; tid += 1; x[tid] = 0;",  # written
        "int tid = threadIdx.x; int* p = &tid; x[*p] = 0;",  # address taken
        "float t = threadIdx.x; x[0] = t;",  # not an integer
        "int tid = threadIdx.x + 1; x[tid] = 0;",  # not a bare coordinate
        "int a = threadIdx.x, b = 2; x[a + b] = 0;",  # two declarators
    ],
)
def test_alias_left_alone(body: str) -> None:
    assert _rw(K.format(body)) == "UNCHANGED"


_TID_BODY = """    const int tid = threadIdx.x;
    float acc = 0.f;
    for (int j = tid; j < N; j += blockDim.x) acc += xr[j];
    if ((tid & 31) == 0) red[tid >> 5] = acc;
    __syncthreads();
    acc = red[0];
    for (int w = 1; w < 8; ++w) acc += red[w];
    if (tid == 0) y[row] = acc;"""


def test_canonical_form_opens_block_per_row_through_a_tid_alias() -> None:
    text = _block_kernel(_TID_BODY)
    assert _removal_failures(text) != {}
    canon = canonical_form(CudaSource.from_text(text, "k.cu"))
    assert "thread_index_alias" in canon.applied
    assert _removal_failures(canon.source.text) == {}


def test_shared_pointer_alias_reads_as_the_array() -> None:
    before = K.format(
        "extern __shared__ float smem[]; float* buf = smem; buf[threadIdx.x] = x[0];"
        " __syncthreads(); float v = buf[0]; x[1] = v + *(buf + 1);"
    )
    after = K.format(
        "extern __shared__ float smem[]; smem[threadIdx.x] = x[0];"
        " __syncthreads(); float v = smem[0]; x[1] = v + *(smem + 1);"
    )
    assert _rw(before, SharedArrayAlias()) == normalize(after)


@pytest.mark.parametrize(
    "body",
    [
        "__shared__ float smem[64]; float* buf = smem; x[0] = sizeof(buf);",  # a pointer's size
        "__shared__ float smem[64]; float* buf = smem; buf += 2; buf[0] = 1;",  # rebound
        "__shared__ float smem[64]; float* buf = smem; float** q = &buf; (*q)[0] = 1;",  # address taken
        "__shared__ int smem[64]; float* buf = (float*)smem; buf[0] = 1;",  # another element type
        "float loc[64]; float* buf = loc; buf[0] = 1; x[0] = loc[0];",  # not shared
    ],
)
def test_shared_pointer_alias_left_alone(body: str) -> None:
    assert _rw(K.format(body), SharedArrayAlias()) == "UNCHANGED"
