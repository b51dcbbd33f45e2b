"""The held-out instances (heldout/NAME/): every workload loads and validates, follows the shape and
tolerance rules of DESIGN.md, and its naive.cu exports the launcher the workload declares. Fast:
no kernel is compiled here (tests/test_heldout_emu.py gates them)."""

from __future__ import annotations

import math
import re

import pytest
import torch

from klineage.corpus import COMPUTE_BOUND, MEMORY_BOUND
from klineage.workload import DEFAULT_TOLERANCES, Tensor, Workload, load_workload
from tests.conftest import REPO

HELDOUT = REPO / "heldout"
NAMES = sorted(p.name for p in HELDOUT.iterdir() if (p / "workload.py").is_file())

#: what each instance holds out: a new operator, or a new dtype/shape of a corpus family
KIND = {
    "logsumexp": "new",
    "l2norm": "new",
    "mean_var": "new",
    "argmax": "new",
    "cumsum": "new",
    "gelu_bias": "new",
    "swiglu": "new",
    "add_rmsnorm": "new",
    "cross_entropy": "new",
    "gemv": "new",
    "embedding": "new",
    "rotary": "new",
    "cosine_sim": "new",
    "maxpool2d": "new",
    "histogram": "new",
    "axpy": "new",
    "softmax_bf16_short": "softmax",
    "softmax_long": "softmax",
    "rmsnorm_fp16": "rmsnorm",
    "layernorm_fp32": "layernorm",
    "transpose_fp16": "transpose",
    "transpose_tiny_batched": "transpose",
    "col_sum": "reduce_sum_rows",
}
#: the corpus (klineage.corpus's list) and the examples: no held-out instance may share a name with them
CORPUS = {*MEMORY_BOUND, *COMPUTE_BOUND} | {p.name for p in (REPO / "examples").iterdir() if p.is_dir()}
L2_BYTES = 60 * 2**20


def test_the_set_is_large_and_new_enough() -> None:
    assert len(NAMES) >= 22
    assert set(NAMES) == set(KIND), "every instance is classified in KIND (and nothing else)"
    assert sum(k == "new" for k in KIND.values()) >= 12
    assert not set(NAMES) & CORPUS
    # a held-out variant names the corpus family it varies
    assert {k for k in KIND.values() if k != "new"} <= CORPUS


@pytest.fixture(scope="module", params=NAMES)
def wl(request: pytest.FixtureRequest) -> Workload:
    return load_workload(HELDOUT / request.param)


def test_loads_and_validates(wl: Workload) -> None:
    assert wl.name == wl.source_dir.name
    assert wl.problems() == []
    assert wl.description and wl.vendor is not None


def test_shape_sets(wl: Workload) -> None:
    test = wl.shape_set("test")
    assert len(test) >= 3
    # at least one test size that is not a multiple of 4 (so of no warp, block or tile size)
    assert any(v % 4 for b in test for v in b.values())
    emu = wl.shapes.get("emu")
    assert emu, "an explicit emu shape set"
    for b in emu:
        for t in wl.tensors:
            assert math.prod(wl.tensor_shape(t, b)) <= 2**16, f"emu shape {b} too large for the emulator"
    bench = wl.shape_set("bench")
    assert bench
    for b in bench:
        assert wl.bytes_moved(b) >= 3 * L2_BYTES, f"bench shape {b} does not spill the H200's L2"
        for s in wl.scalars:
            if s.dtype == "int32":
                assert abs(wl.scalar_value(s, b)) < 2**31


def test_tolerances_no_looser_than_torch_unless_explained(wl: Workload) -> None:
    doc = (wl.source_dir / "workload.py").read_text()
    for t in wl.outputs:
        tol, default = wl.tolerance_for(t), DEFAULT_TOLERANCES[t.dtype]
        looser = tol.atol > default.atol or tol.rtol > default.rtol or tol.metric != default.metric
        if looser:
            assert "provably" in doc, (
                f"{wl.name}: '{t.name}' tolerance {tol} is looser than torch's without a reason"
            )


def test_naive_launcher_matches_the_workload(wl: Workload) -> None:
    text = (wl.source_dir / "naive.cu").read_text()
    m = re.search(r'extern\s+"C"\s+void\s+launch\s*\(([^)]*)\)', text)
    assert m, 'naive.cu exports extern "C" void launch(...)'
    got = [" ".join(p.split()) for p in m.group(1).split(",")]
    want = [" ".join(p.split()) for p in wl.c_signature().split("(", 1)[1].rstrip(")").split(",")]
    assert got == want
    body = text[m.end() :]
    for banned in ("cudaMalloc", "cudaFree", "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaMemcpy("):
        assert banned not in body, f"the launcher must not call {banned}"
    assert "stream>>>" in body.replace(" ", "")


def test_reference_and_vendor_run(wl: Workload) -> None:
    b = min(wl.shape_set("emu"), key=lambda s: sum(s.values()))
    inputs = wl.make_inputs(b, seed=0)
    ref = wl.run_reference(inputs)
    for t in wl.outputs:
        assert tuple(ref[t.name].shape) == wl.tensor_shape(t, b)
        assert ref[t.name].dtype == t.torch_dtype
    for t in wl.tensors:
        if t.is_read and t.torch_dtype.is_floating_point and t.init is None:
            x = inputs[t.name]
            assert x.numel() < 4 or (bool((x < 0).any()) and bool((x > 0).any())), "inputs are signed"
    args = {a.name: inputs[a.name] for a in wl.args if not isinstance(a, Tensor) or a.is_read}
    try:
        got = wl.vendor(**args)
    except RuntimeError as e:  # some vendor ops have no CPU kernel for 16-bit types
        pytest.skip(f"vendor has no CPU path here: {e}")
    got = [got] if isinstance(got, torch.Tensor) else list(got)
    for t, v in zip(wl.outputs, got, strict=True):
        assert torch.allclose(
            v.double().reshape(ref[t.name].shape), ref[t.name].double(), rtol=2e-2, atol=1e-2
        )


#: torch's F.embedding at the bench shape on the H200 (2026-12-03, tenth session's held-out table)
EMBEDDING_TORCH_MS = 0.1455
#: the copy bandwidth the gate measured there
H200_COPY_TB_S = 4.21


def test_the_speed_of_light_floor_is_below_what_torch_reaches() -> None:
    """A floor above a real kernel's time rejects honest candidates as `suspicious`: the gather's
    floor counted the whole table (1 GB) where only the rows asked for are read."""
    wl = load_workload(HELDOUT / "embedding")
    bench = wl.shape_set("bench")[0]
    floor_ms = wl.bytes_moved(bench) / (H200_COPY_TB_S * 1e12) * 1e3
    assert floor_ms < EMBEDDING_TORCH_MS
    # still a floor: the rows written and the ids read
    assert wl.bytes_moved(bench) >= bench["T"] * bench["D"] * 2 + bench["T"] * 8
    # workloads that say nothing keep "every input read once, every output written once"
    axpy = load_workload(HELDOUT / "axpy")
    b = axpy.shape_set("bench")[0]
    assert axpy.bytes_moved(b) == sum(
        math.prod(axpy.tensor_shape(t, b)) * t.torch_dtype.itemsize * (int(t.is_read) + int(t.is_checked))
        for t in axpy.tensors
    )
