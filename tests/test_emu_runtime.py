"""Semantics of the emu runtime: warp collectives, barriers, atomics, fp16/bf16, cg, host API, limits.

tests/kernels/emu/runtime/semantics.cu is built once; probes that must end the process (launch
limits, collective misuse) run in a subprocess and are classified like a gate child.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from klineage.gates.backend import GateOptions
from klineage.gates.emu import backend

SRC = Path(__file__).parent / "kernels" / "emu" / "runtime" / "semantics.cu"


@pytest.fixture(scope="module")
def lib_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = backend.build(SRC.read_text(), tmp_path_factory.mktemp("emu_sem"), GateOptions())
    assert out.ok, out.message
    assert out.library is not None
    return out.library


@pytest.fixture(scope="module")
def lib(lib_path: Path) -> ctypes.CDLL:
    return ctypes.CDLL(str(lib_path))


def ptr(t: torch.Tensor) -> ctypes.c_void_p:
    return ctypes.c_void_p(t.data_ptr())


def run_probe(lib_path: Path, fn: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Call `fn` of the library in a fresh process (arguments: Python expressions)."""
    code = (
        "import ctypes, sys\n"
        f"lib = ctypes.CDLL({str(lib_path)!r})\n"
        "buf = (ctypes.c_int * 4096)()\n"
        f"lib.{fn}({', '.join(args)})\n"
        "print('returned')\n"
    )
    full_env = dict(os.environ, **(env or {}))
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=full_env
    )
    return p.returncode, p.stdout + p.stderr


def lanes(width: int, n: int = 64) -> list[int]:
    return list(range(n))


@pytest.mark.parametrize("width", [32, 16, 8, 4])
def test_shuffles_with_width(lib: ctypes.CDLL, width: int) -> None:
    out = torch.zeros(6 * 64, dtype=torch.int32)
    lib.t_shfl(ptr(out), width)
    o = out.view(6, 64).tolist()
    for t in range(64):
        lane, v = t % 32, 100 * t
        warp0 = t - lane
        base = lane - lane % width
        assert o[0][t] == 100 * (warp0 + base + 3 % width)
        assert o[1][t] == (v if lane % width < 2 else v - 200)
        assert o[2][t] == (v if lane % width + 2 >= width else v + 200)
        src = lane ^ 5
        assert o[3][t] == (v if src >= base + width else 100 * (warp0 + src))
        assert o[4][t] == (t if lane % width + 1 >= width else t + 1)
        if lane % 2 == 0:
            src = lane + 2 if lane + 2 < 32 else 0
            assert o[5][t] == 100 * (warp0 + src)
        else:
            assert o[5][t] == -1


def test_votes_and_reductions(lib: ctypes.CDLL) -> None:
    out = torch.zeros(12 * 32, dtype=torch.int64)
    buf = torch.zeros(12 * 32, dtype=torch.int32)
    lib.t_vote(ptr(buf))
    out = buf.view(torch.uint32).to(torch.int64).view(12, 32).tolist()
    ballot = sum(1 << i for i in range(32) if i % 3 == 0)
    assert set(out[0]) == {ballot}
    assert set(out[1]) == {1}
    assert set(out[2]) == {0}
    assert set(out[3]) == {sum(range(32)) - 320}
    assert set(out[4]) == {(-10) & 0xFFFFFFFF}
    assert set(out[5]) == {31}
    assert set(out[6]) == {0xFF00}
    assert set(out[7]) == {0xFFFFFFFF}
    x = 0
    for i in range(32):
        x ^= i
    assert set(out[8]) == {x}
    assert set(out[9]) == {0xFFFFFFFF}
    for lane in range(32):
        assert out[10][lane] == 0xF << (lane // 4 * 4)
    odd_low = sum(1 << i for i in range(16) if i & 1)
    assert out[11][:16] == [odd_low] * 16 and out[11][16:] == [0] * 16


def test_barrier_variants_and_exited_threads(lib: ctypes.CDLL) -> None:
    out = torch.zeros(128, dtype=torch.int32)
    lib.t_barrier(ptr(out))
    for t in range(96):
        assert out[t] == 2 * ((t + 1) % 96) + 1000 + 10000 + 100000 + 0


def test_atomics(lib: ctypes.CDLL) -> None:
    i = torch.tensor([0, 0, -5, 5], dtype=torch.int32)
    u = torch.tensor([0xFFFFFFFF, 0, 0, 0, 3, 0, 0], dtype=torch.int64).to(torch.int32)
    f = torch.zeros(1)
    d = torch.zeros(1, dtype=torch.float64)
    ull = torch.zeros(1, dtype=torch.int64)
    lib.t_atomic(ptr(i), ptr(u), ptr(f), ptr(d), ptr(ull))
    n = 128
    assert i.tolist() == [n, -2 * n, 63, -63]
    uu = u.view(torch.uint32).to(torch.int64).tolist()
    assert uu[0] == 0 and uu[1] == 0xFFFFFFFF
    x = 0
    for t in list(range(64)) * 2:
        x ^= t
    assert uu[2] == x
    inc = 0
    for _ in range(n):
        inc = 0 if inc >= 9 else inc + 1
    assert uu[3] == inc
    dec = 3
    for _ in range(n):
        dec = 5 if dec == 0 or dec > 5 else dec - 1
    assert uu[4] == dec
    assert uu[5] == 42 and uu[6] == 1
    assert f.item() == 64.0 and d.item() == 32.0 and ull.item() == 3 * n


def _special_floats() -> torch.Tensor:
    vals = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        65504.0,
        65519.99,
        65520.0,
        1e9,
        -1e9,
        2.0**-24,
        2.0**-25,
        2.0**-25 * 1.0001,
        2.0**-14,
        2.0**-14 * 0.999,
        5.96e-8,
        1e-10,
        float("inf"),
        float("-inf"),
        1.0 + 2.0**-11,
        1.0 + 3 * 2.0**-11,
        3.0 * 2.0**-26,
        0.333333,
        1.00048828125,
        1.00146484375,
    ]
    rnd = torch.randn(20000, generator=torch.Generator().manual_seed(3)) * torch.exp2(
        torch.randint(-30, 20, (20000,), generator=torch.Generator().manual_seed(4)).float()
    )
    return torch.cat([torch.tensor(vals, dtype=torch.float32), rnd])


def test_float_to_half_and_bf16_round_to_nearest_even(lib: ctypes.CDLL) -> None:
    x = _special_floats()
    n = x.numel()
    h = torch.zeros(n, dtype=torch.int16)
    lib.t_f2h(ptr(x), ptr(h), n)
    assert torch.equal(h, x.half().view(torch.int16))
    b = torch.zeros(n, dtype=torch.int16)
    lib.t_f2bf(ptr(x), ptr(b), n)
    assert torch.equal(b, x.bfloat16().view(torch.int16))


def test_nan_converts_to_nan(lib: ctypes.CDLL) -> None:
    x = torch.tensor([float("nan"), -float("nan")])
    h = torch.zeros(2, dtype=torch.int16)
    lib.t_f2h(ptr(x), ptr(h), 2)
    assert torch.isnan(h.view(torch.float16)).all()
    lib.t_f2bf(ptr(x), ptr(h), 2)
    assert torch.isnan(h.view(torch.bfloat16)).all()


def test_every_half_and_bf16_bit_pattern_to_float(lib: ctypes.CDLL) -> None:
    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    out = torch.zeros(65536)
    lib.t_h2f(ptr(bits), ptr(out), 65536)
    want = bits.view(torch.float16).float()
    same = (out == want) | (torch.isnan(out) & torch.isnan(want))
    assert bool(same.all())
    lib.t_bf2f(ptr(bits), ptr(out), 65536)
    want = bits.view(torch.bfloat16).float()
    same = (out == want) | (torch.isnan(out) & torch.isnan(want))
    assert bool(same.all())


def test_half_and_bf16_arithmetic_matches_torch(lib: ctypes.CDLL) -> None:
    g = torch.Generator().manual_seed(7)
    a = (torch.randn(4000, generator=g) * 8).half()
    b = (torch.randn(4000, generator=g) * 8).half()
    out = torch.zeros(7 * 4000, dtype=torch.int16)
    lib.t_harith(ptr(a.view(torch.int16)), ptr(b.view(torch.int16)), ptr(out), 4000)
    o = out.view(4000, 7)
    assert torch.equal(o[:, 0], (a + b).view(torch.int16))
    assert torch.equal(o[:, 1], (a * b).view(torch.int16))
    fma = (a.double() * b.double() + a.double()).half()
    assert torch.equal(o[:, 2], fma.view(torch.int16))
    assert torch.equal(o[:, 3], (a + b).view(torch.int16))
    assert torch.equal(o[:, 4], (b * a).view(torch.int16))
    ab, bb = a.view(torch.bfloat16), b.view(torch.bfloat16)
    finite = torch.isfinite(ab) & torch.isfinite(bb)
    assert torch.equal(o[:, 5][finite], (ab + bb).view(torch.int16)[finite])
    bfma = (ab.double() * bb.double() + ab.double()).bfloat16()
    assert torch.equal(o[:, 6][finite], bfma.view(torch.int16)[finite])


def test_bit_and_math_intrinsics(lib: ctypes.CDLL) -> None:
    out = torch.zeros(11, dtype=torch.int32)
    x = 0x00F0_0100
    lib.t_bits(ctypes.c_uint(x), ptr(out))
    o = out.tolist()
    assert o[0] == bin(x).count("1")
    assert o[1] == 8
    assert o[2] == 9
    assert o[3] & 0xFFFFFFFF == int(f"{x:032b}"[::-1], 2)
    assert o[4] == 1
    assert o[5] & 0xFFFFFFFF == 0x33440100
    assert o[6] == 3 + 20
    assert o[7] == 200
    assert o[8] == 10
    assert o[9] == 250 + 25 + 1250
    assert o[10] == 1 + 0 + 700


def test_dynamic_smem_templates_2d_blocks(lib: ctypes.CDLL) -> None:
    n = 70
    out = torch.zeros(n)
    lib.t_dyn(ptr(out), n)
    blocks = (n + 31) // 32
    for g in range(n):
        t = g % 32
        assert out[g] == 3 * (31 - t) + 1000 * blocks


def test_cooperative_groups(lib: ctypes.CDLL) -> None:
    out = torch.zeros(64 * 8, dtype=torch.int32)
    lib.t_cg(ptr(out))
    o = out.view(64, 8).tolist()
    for r in range(64):
        base = r - r % 16
        rank = r % 16
        assert o[r][0] == sum(range(base, base + 16))
        assert o[r][1] == base + 15 and o[r][2] == base
        assert o[r][3] == (r if rank == 15 else r + 1)
        assert o[r][4] == base + (rank ^ 3)
        assert o[r][5] == base
        assert o[r][6] == (r // 16) * 100 + rank
        assert o[r][7] == rank + 1


def test_host_api_answers_as_h200(lib: ctypes.CDLL) -> None:
    out = torch.zeros(16, dtype=torch.int32)
    err = lib.t_host(ptr(out))
    o = out.tolist()
    assert err == 0
    assert o[0] == 0 and o[1] == 132 and o[2] == 228 * 1024 and o[3] == 90
    assert o[4] == 132 and o[5] == 227 * 1024 and o[6] == 228 * 1024 and o[7] == 60 * 1024 * 1024
    assert o[8] == 8
    assert o[9] == 15 + 1000 and o[10] == 0 + 1000
    assert o[11] == 32 and o[12] == 1024 and o[13] == 60 and o[14] == 2048 and o[15] == 65536


def test_schedules_reverse_thread_order_and_change_poison(lib: ctypes.CDLL) -> None:
    out = torch.zeros(64, dtype=torch.int32)
    lib.klemu_set_schedule(0)
    lib.t_order(ptr(out))
    fwd, poison0 = out[:32].tolist(), int(out[40]) & 0xFFFFFFFF
    lib.klemu_set_schedule(1)
    lib.t_order(ptr(out))
    rev, poison1 = out[:32].tolist(), int(out[40]) & 0xFFFFFFFF
    lib.klemu_set_schedule(0)
    assert fwd == list(range(32))
    assert rev == list(range(31, -1, -1))
    assert poison0 != poison1
    assert poison0 == 0xCBCBCBCB and poison1 == 0x7E7E7E7E


@pytest.mark.parametrize("schedule", [0, 1])
def test_blocks_run_in_index_order_in_both_schedules(lib: ctypes.CDLL, schedule: int) -> None:
    flags = torch.zeros(8, dtype=torch.int32)
    out = torch.zeros(8, dtype=torch.int32)
    lib.klemu_set_schedule(schedule)
    lib.t_lookback(ptr(flags), ptr(out))
    lib.klemu_set_schedule(0)
    assert out.tolist() == [sum(range(b + 1)) for b in range(8)]


def test_divergent_barrier_completes_when_other_threads_exit(lib: ctypes.CDLL) -> None:
    out = torch.zeros(64, dtype=torch.int32)
    lib.t_split_barrier(ptr(out))
    assert out.tolist() == [1 - t % 2 for t in range(64)]


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        ("t_too_many_threads", "2048 threads"),
        ("t_empty_grid", "empty grid"),
        ("t_smem_over_default", "cudaFuncSetAttribute"),
        ("t_smem_over_max", "device maximum"),
        ("t_exited_lane", "exited"),
        ("t_deadlock", "deadlock"),
    ],
)
def test_misuse_is_reported_not_hung(lib_path: Path, fn: str, words: str) -> None:
    args = () if fn.startswith(("t_too", "t_empty", "t_smem")) else ("buf",)
    rc, out = run_probe(lib_path, fn, *args)
    assert rc == 86, out
    cat, msg = backend.classify_failure(rc, out)
    assert cat == "crash"
    assert words in msg
    marker = {
        "t_exited_lane": "(int)threadIdx.x, 1);",
        "t_deadlock": "__shfl_xor_sync(0xffffffff, 1, 1)",
    }.get(fn)
    if marker:  # the message names the original .cu line of the collective
        line = next(i for i, t in enumerate(SRC.read_text().splitlines(), 1) if marker in t)
        assert f"line {line}" in msg, msg


def test_smem_attribute_raises_the_limit(lib_path: Path) -> None:
    rc, out = run_probe(lib_path, "t_smem_with_attribute")
    assert rc == 0 and "returned" in out


def test_watchdog_reports_a_spinning_launch_as_timeout(lib_path: Path) -> None:
    rc, out = run_probe(lib_path, "t_spin", "buf", env={"KLEMU_LAUNCH_CPU_S": "0.3"})
    assert rc == 86, out
    cat, msg = backend.classify_failure(rc, out)
    assert cat == "timeout"
    assert "kernel 'spin_kernel'" in msg and "block (" in msg and "CPU-seconds" in msg
    lines = [
        i for i, t in enumerate(SRC.read_text().splitlines(), 1) if "never_set == 0" in t or t.strip() == "}"
    ]
    assert any(f"kernel.cu:{n}" in msg for n in lines), msg  # where it spins


def test_dynamic_smem_overrun_is_out_of_bounds_without_asan(lib_path: Path) -> None:
    rc, out = run_probe(lib_path, "t_smem_overrun", "buf")
    assert rc == 86, out
    cat, msg = backend.classify_failure(rc, out)
    assert cat == "out_of_bounds" and "dynamic shared memory" in msg and "smem_overrun_kernel" in msg
