"""Tensor-core and async-copy emulation on the emu backend (issue 11).

Fragments go into tests/kernels/emu_tc/tc.cu as raw per-lane registers built here from the PTX
ISA's layouts, and come back the same way, so every layout is checked element by element against
a float64 torch reference; the gate must reject a missing cp.async wait and a wrong ldmatrix
layout assumption (tests/kernels/emu_tc/tc_gemm, a 3-stage mma.sync + ldmatrix + cp.async GEMM).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
import torch

from klineage.gates.backend import GateOptions
from klineage.gates.emu import backend
from klineage.gates.emu.rewrite import Unsupported, translate
from klineage.gates.gate import gate

KDIR = Path(__file__).parent / "kernels" / "emu_tc"
GEMM = KDIR / "tc_gemm"


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    out = backend.build((KDIR / "tc.cu").read_text(), tmp_path_factory.mktemp("emu_tc"), GateOptions())
    assert out.ok, out.message
    return ctypes.CDLL(str(out.library))


def P(t: torch.Tensor) -> ctypes.c_void_p:
    return ctypes.c_void_p(t.data_ptr())


def bits16(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(torch.int16).to(torch.int64) & 0xFFFF


def pack(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    return (lo | (hi << 16)).to(torch.int64)


# ---- PTX ISA fragment layouts (groupID = lane >> 2, threadID_in_group = lane % 4) -------------------
def a_regs(A: torch.Tensor, k16: bool) -> torch.Tensor:
    """(32, 4) registers of the 16 x K A operand (row)."""
    b = bits16(A)
    out = torch.zeros(32, 4, dtype=torch.int64)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for j in range(4 if k16 else 2):
            row = g + 8 * (j & 1)
            col = 2 * t + 8 * (j >> 1)
            out[lane, j] = pack(b[row, col], b[row, col + 1])
    return out


def b_regs(B: torch.Tensor, k16: bool) -> torch.Tensor:
    """(32, 2) registers of the K x 8 B operand (col)."""
    b = bits16(B)
    out = torch.zeros(32, 2, dtype=torch.int64)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for j in range(2 if k16 else 1):
            k = 2 * t + 8 * j
            out[lane, j] = pack(b[k, g], b[k + 1, g])
    return out


def c_coords(lane: int, i: int) -> tuple[int, int]:
    """(row, col) of accumulator element c_i (i < 4) of `lane` in the 16 x 8 tile."""
    g, t = lane >> 2, lane & 3
    return g + 8 * (i >> 1), 2 * t + (i & 1)


def f32_bits(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float32).contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def run_mma(lib: ctypes.CDLL, kind: int, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    a32 = torch.zeros(32, 4, dtype=torch.int64)
    a32[:, : a.shape[1]] = a
    b32 = torch.zeros(32, 2, dtype=torch.int64)
    b32[:, : b.shape[1]] = b
    ta, tb, tc = (x.to(torch.int64).to(torch.int32).contiguous() for x in (a32, b32, c))
    td = torch.zeros(32, 4, dtype=torch.int32)
    lib.mma(P(ta), P(tb), P(tc), P(td), kind)
    return td.to(torch.int64) & 0xFFFFFFFF


MMA_KINDS = [
    (0, torch.bfloat16, True),
    (1, torch.float16, True),
    (3, torch.bfloat16, False),
    (4, torch.float16, False),
]


@pytest.mark.parametrize(
    ("kind", "dtype", "k16"), MMA_KINDS, ids=["m16n8k16-bf16", "m16n8k16-f16", "m16n8k8-bf16", "m16n8k8-f16"]
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mma_sync_f32_accumulate_matches_the_isa_layout(
    lib: ctypes.CDLL, kind: int, dtype: torch.dtype, k16: bool, seed: int
) -> None:
    g = torch.Generator().manual_seed(seed)
    K = 16 if k16 else 8
    if seed == 2:  # exact small integers: the result must be exact
        A = torch.randint(-4, 5, (16, K), generator=g).to(dtype)
        B = torch.randint(-4, 5, (K, 8), generator=g).to(dtype)
        C = torch.randint(-8, 9, (16, 8), generator=g).float()
    else:
        A = torch.randn(16, K, generator=g).to(dtype)
        B = torch.randn(K, 8, generator=g).to(dtype)
        C = torch.randn(16, 8, generator=g)
    creg = torch.zeros(32, 4, dtype=torch.int64)
    for lane in range(32):
        for i in range(4):
            creg[lane, i] = f32_bits(C[c_coords(lane, i)].reshape(1))[0]
    d = run_mma(lib, kind, a_regs(A, k16), b_regs(B, k16), creg)
    D = torch.empty(16, 8)
    for lane in range(32):
        for i in range(4):
            D[c_coords(lane, i)] = (
                torch.tensor([int(d[lane, i])], dtype=torch.int64).to(torch.int32).view(torch.float32)[0]
            )
    ref = (A.double() @ B.double() + C.double()).float()
    if seed == 2:
        assert torch.equal(D, ref)
    else:
        torch.testing.assert_close(D, ref, atol=1e-5, rtol=1e-5)


def test_mma_sync_f16_accumulate(lib: ctypes.CDLL) -> None:
    g = torch.Generator().manual_seed(5)
    A = torch.randn(16, 16, generator=g).half()
    B = torch.randn(16, 8, generator=g).half()
    C = torch.randn(16, 8, generator=g).half()
    cb = bits16(C)
    creg = torch.zeros(32, 4, dtype=torch.int64)
    for lane in range(32):
        for j in range(2):
            (r0, c0), (r1, c1) = c_coords(lane, 2 * j), c_coords(lane, 2 * j + 1)
            creg[lane, j] = pack(cb[r0, c0], cb[r1, c1])
    d = run_mma(lib, 2, a_regs(A, True), b_regs(B, True), creg)
    D = torch.empty(16, 8, dtype=torch.float16)
    for lane in range(32):
        for j in range(2):
            v = int(d[lane, j])
            for h in range(2):
                half = (
                    torch.tensor([(v >> (16 * h)) & 0xFFFF], dtype=torch.int32)
                    .to(torch.int16)
                    .view(torch.float16)[0]
                )
                D[c_coords(lane, 2 * j + h)] = half
    ref = (A.double() @ B.double() + C.double()).half()
    torch.testing.assert_close(D.float(), ref.float(), atol=2e-3, rtol=1e-3)


LDM = [(1, False), (2, False), (4, False), (1, True), (2, True), (4, True)]


@pytest.mark.parametrize(
    ("variant", "num_trans"), list(enumerate(LDM)), ids=["x1", "x2", "x4", "x1.trans", "x2.trans", "x4.trans"]
)
@pytest.mark.parametrize("seed", [0, 1])
def test_ldmatrix_hands_each_lane_the_isa_fragment(
    lib: ctypes.CDLL, variant: int, num_trans: tuple[int, bool], seed: int
) -> None:
    num, trans = num_trans
    g = torch.Generator().manual_seed(seed)
    tile = torch.randint(0, 1 << 16, (4, 8, 8), generator=g, dtype=torch.int64)
    src = tile.to(torch.int32).to(torch.int16).contiguous()
    out = torch.zeros(32, 4, dtype=torch.int32)
    lib.ldm(P(src), P(out), variant)
    got = out.to(torch.int64) & 0xFFFFFFFF
    for lane in range(32):
        g_, t = lane >> 2, lane & 3
        for j in range(4):
            if j >= num:
                assert got[lane, j] == 0
                continue
            m = tile[j]
            lo, hi = (m[2 * t, g_], m[2 * t + 1, g_]) if trans else (m[g_, 2 * t], m[g_, 2 * t + 1])
            assert got[lane, j] == int(lo) | int(hi) << 16, (lane, j)


def _poisoned(x: torch.Tensor) -> torch.Tensor:
    b = x.contiguous().view(torch.int32)
    return (b == int.from_bytes(b"\xcb" * 4, "little", signed=True)) | (
        b == int.from_bytes(b"\x7e" * 4, "little", signed=True)
    )


@pytest.mark.parametrize("src_size", [16, 8, 4, 0])
def test_cp_async_lands_at_the_wait_with_zero_fill(lib: ctypes.CDLL, src_size: int) -> None:
    src = torch.arange(1, 385, dtype=torch.float32)
    out = torch.zeros(384)
    lib.cpa(P(src), P(out), src_size, 0)
    exp = src.clone().view(-1, 4)
    exp[:, src_size // 4 :] = 0
    assert torch.equal(out, exp.view(-1))


def test_cp_async_wait_group_n_leaves_the_newest_groups_in_flight(lib: ctypes.CDLL) -> None:
    src = torch.arange(1, 385, dtype=torch.float32)
    out = torch.zeros(384)
    lib.cpa(P(src), P(out), 16, 1)  # wait_group 1 after 3 groups
    assert torch.equal(out[:256], src[:256])
    assert _poisoned(out[256:]).all()


def test_cp_async_read_before_the_wait_gets_poison(lib: ctypes.CDLL) -> None:
    src = torch.arange(1, 385, dtype=torch.float32)
    out = torch.zeros(384)
    lib.cpa(P(src), P(out), 16, 2)
    assert _poisoned(out).all()


def test_cp_async_ca_4_and_8_bytes_and_wait_all(lib: ctypes.CDLL) -> None:
    src = torch.arange(1, 97, dtype=torch.float32)
    out = torch.zeros(96)
    lib.cpa(P(src), P(out), 4, 3)  # 8-byte copies with src-size 4: the second float is zero
    exp = src.clone()
    exp[33:96:2] = 0
    assert torch.equal(out, exp)


@pytest.mark.parametrize(("zfill", "wait"), [(0, 1), (8, 1), (0, 0)])
def test_pipeline_primitives(lib: ctypes.CDLL, zfill: int, wait: int) -> None:
    src = torch.arange(1, 129, dtype=torch.float32)
    out = torch.zeros(128)
    lib.pipe(P(src), P(out), zfill, wait)
    if not wait:
        assert _poisoned(out).all()
        return
    exp = src.clone().view(-1, 4)
    exp[:, (16 - zfill) // 4 :] = 0
    assert torch.equal(out, exp.view(-1))


@pytest.mark.parametrize("early", [0, 1])
def test_cuda_pipeline_thread_scope_stages_land_at_consumer_wait(lib: ctypes.CDLL, early: int) -> None:
    src = torch.arange(1, 513, dtype=torch.float32)
    out = torch.zeros(512)
    lib.cupipe(P(src), P(out), early)
    assert torch.equal(out[:256], src[:256])
    if early:
        assert _poisoned(out[256:]).all()
    else:
        assert torch.equal(out[256:], src[256:])


WMMA = [  # variant, M, N, K, input dtype, A col-major, B col-major, accumulator dtype
    (0, 16, 16, 16, torch.bfloat16, False, True, torch.float32),
    (1, 16, 16, 16, torch.float16, True, False, torch.float32),
    (2, 32, 8, 16, torch.float16, False, False, torch.float32),
    (3, 8, 32, 16, torch.bfloat16, False, True, torch.float32),
    (4, 16, 16, 16, torch.float16, False, False, torch.float16),
]


@pytest.mark.parametrize(
    "case", WMMA, ids=["bf16-16x16x16", "f16-16x16x16-colA", "f16-32x8x16", "bf16-8x32x16", "f16acc"]
)
@pytest.mark.parametrize(("c_col", "d_col"), [(0, 0), (1, 1), (0, 1)])
def test_wmma_gemm_tile_with_elementwise_epilogue(
    lib: ctypes.CDLL, case: tuple, c_col: int, d_col: int
) -> None:
    variant, M, N, K, dt, acol, bcol, acc = case
    g = torch.Generator().manual_seed(variant * 7 + c_col + 2 * d_col)
    A = torch.randn(M, K, generator=g).to(dt)
    B = torch.randn(K, N, generator=g).to(dt)
    C = torch.randn(M, N, generator=g).to(acc)
    a_mem = (A.t() if acol else A).contiguous()
    b_mem = (B.t() if bcol else B).contiguous()
    c_mem = (C.t() if c_col else C).contiguous()
    D = torch.zeros(N, M, dtype=acc) if d_col else torch.zeros(M, N, dtype=acc)
    lib.wmma(P(a_mem), P(b_mem), P(c_mem), P(D), ctypes.c_float(0.5), c_col, d_col, variant)
    got = (D.t() if d_col else D).float()
    ref = 0.5 * (A.double() @ B.double() + C.double())
    tol = 2e-3 if acc == torch.float16 else 1e-5
    torch.testing.assert_close(got, ref.float(), atol=tol * 8, rtol=tol)


def test_wmma_multiwarp_gemm_with_fill_fragment_and_k_loop(lib: ctypes.CDLL) -> None:
    g = torch.Generator().manual_seed(11)
    M, N, K = 64, 96, 48
    A = torch.randn(M, K, generator=g).half()
    B = torch.randn(K, N, generator=g).half()
    C = torch.randn(M, N, generator=g)
    Bt = B.t().contiguous()
    out = C.clone()
    lib.wmma_gemm(P(A), P(Bt), P(out), M, N, K, ctypes.c_float(2.0), ctypes.c_float(-1.0))
    ref = 2.0 * (A.double() @ B.double()) - C.double()
    torch.testing.assert_close(out, ref.float(), atol=1e-4, rtol=1e-5)


def test_tc_gemm_passes_the_emu_gate() -> None:
    r = gate(GEMM / "kernel.cu", GEMM, GateOptions(backend="emu"), use_cache=False)
    assert r.accepted and r.category == "ok", f"{r.category}: {r.message}"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('asm volatile("cp.async.wait_group 1;\\n" ::: "memory");', ""),  # missing wait
        (
            'asm volatile("cp.async.wait_group 1;\\n" ::: "memory");',  # waits one group short
            'asm volatile("cp.async.wait_group 2;\\n" ::: "memory");',
        ),
        ("col = ks * 16 + (lane / 16) * 8;", "col = ks * 16 + ((lane / 8) % 2) * 8;"),  # a1/a2 swapped
        (
            "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
        ),  # no .trans
    ],
    ids=["no-wait", "wait-short", "ldmatrix-a-layout", "ldmatrix-b-no-trans"],
)
def test_gate_rejects_async_copy_and_layout_bugs(tmp_path: Path, old: str, new: str) -> None:
    src = (GEMM / "kernel.cu").read_text()
    assert src.count(old) == 1
    (tmp_path / "kernel.cu").write_text(src.replace(old, new))
    r = gate(tmp_path / "kernel.cu", GEMM, GateOptions(backend="emu"), use_cache=False)
    assert not r.accepted
    assert r.category in ("mismatch", "nondeterministic", "nan"), f"{r.category}: {r.message}"


@pytest.mark.parametrize(
    ("asm", "words"),
    [
        (
            'asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0}, {%1}, {%2}, {%3};" :: "r"(x));',
            "mma.sync",
        ),
        (
            'asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\\n st.shared.b32 [%4], %0;"'
            ' : "=r"(x), "=r"(x), "=r"(x), "=r"(x) : "r"(x));',
            "st.shared.b32",
        ),
        ('asm volatile("cp.async.bulk.shared::cluster.global [%0], [%1], 16;" :: "r"(x), "l"(x));', "TMA"),
        ('asm("mov.u32 %0, %%smid;" : "=r"(x));', "mov.u32"),
    ],
)
def test_other_ptx_stays_unsupported_with_instruction_and_line(asm: str, words: str) -> None:
    src = "#include <cuda_runtime.h>\n__global__ void k(unsigned x) {\n  int y = 0;\n  " + asm + "\n}\n"
    with pytest.raises(Unsupported) as e:
        translate(src, "cand.cu")
    assert str(e.value).startswith("cand.cu:4: ") and words in str(e.value), str(e.value)
