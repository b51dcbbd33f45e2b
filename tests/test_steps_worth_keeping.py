"""Steps worth keeping (issue 23, part 3): a roundtrip restores the optimization where the step
took it out, and tile_size never shrinks a template block size below the block its launch starts."""

from __future__ import annotations

import pytest

from klineage.deopt.base import Refused
from klineage.deopt.pragma_unroll import PragmaUnroll
from klineage.deopt.tile_size import TileSize
from klineage.source.model import CudaSource
from klineage.walker import restored_at

TWO = """
constexpr int K = 8;
__global__ void b(float* x) {
    float s = 0;
    for (int i = 0; i < K; ++i) s += x[i];
    x[0] = s;
}
__global__ void a(float* x) {
    float s = 0;
#pragma unroll
    for (int i = 0; i < K; ++i) s += x[i];
    x[1] = s;
}
"""


def test_roundtrip_counts_only_the_function_the_step_touched() -> None:
    op = PragmaUnroll()
    src = CudaSource.from_text(TWO)
    site = next(s for s in op.find(src) if s.anchor.function == "a")
    simpler = op.remove(src, site)
    by_fn = {s.anchor.function: s for s in op.find_forward(simpler)}
    elsewhere = op.apply(simpler, by_fn["b"])
    same = op.apply(simpler, by_fn["a"])
    assert len(op.find(elsewhere)) > len(op.find(simpler))  # what the old check counted as restored
    assert not restored_at(op, simpler, elsewhere, "a")
    assert restored_at(op, simpler, same, "a")


BLOCK = """
#define THREADS 256
template <unsigned int blockSize>
__global__ void k(float* x) {{
    __shared__ float s[blockSize];
    s[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    x[threadIdx.x] = s[blockSize - 1 - threadIdx.x];
}}
extern "C" void launch(float* x, cudaStream_t st) {{
    {launch}
}}
"""


@pytest.mark.parametrize(
    ("launch", "refused"),
    [
        ("dim3 Block(THREADS, 1); k<256><<<1, Block, 0, st>>>(x);", True),
        ("const int threads = 256; k<256><<<1, threads, 0, st>>>(x);", True),
        ("k<256><<<1, 256, 0, st>>>(x);", False),  # the launch's literal halves along
        ("k<256><<<1, 128, 0, st>>>(x);", False),
    ],
)
def test_tile_size_refuses_a_template_block_below_the_launch(launch: str, refused: bool) -> None:
    op = TileSize()
    src = CudaSource.from_text(BLOCK.format(launch=launch))
    site = next(s for s in op.find(src) if s.details["kind"] == "template")
    if refused:
        with pytest.raises(Refused, match="template_size_covers_block"):
            op.remove(src, site)
    else:
        assert "k<128>" in op.remove(src, site).text
