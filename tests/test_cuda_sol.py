"""Speed-of-light arithmetic and its disk cache (pure; no GPU)."""

import math

from klineage.gates.cuda import sol
from klineage.workload import Scalar, Tensor, Workload

H200 = sol.Ceilings("NVIDIA H200", "580.159.04", 4.3e12, {"bf16": 790e12, "tf32": 400e12, "fp32": 50e12})


def softmax_workload() -> Workload:
    return Workload(
        name="sm",
        args=[Tensor("x", ("M", "N")), Tensor("y", ("M", "N"), role="out"), Scalar("M"), Scalar("N")],
        reference=lambda x, M, N: x.softmax(-1),
        shapes={"test": [{"M": 2, "N": 3}]},
        flops=lambda b: 5.0 * b["M"] * b["N"],
    )


def test_memory_bound_floor_from_bytes_moved():
    wl = softmax_workload()
    b = {"M": 8192, "N": 4096}
    nbytes = wl.bytes_moved(b)
    assert nbytes == 2 * 8192 * 4096 * 4
    bound = sol.bound(nbytes, wl.flops(b), H200, wl.dtypes)
    assert math.isclose(bound.bytes_ms, 1000 * nbytes / 4.3e12)
    assert bound.limiter == "memory" and bound.floor_ms == bound.bytes_ms
    # fp32 work may use tf32 tensor cores: the compute ceiling is the tf32 rate
    assert math.isclose(bound.flops_ms, 1000 * 5.0 * 8192 * 4096 / 400e12)


def test_compute_bound_gemm_floor_uses_dtype_rate():
    flops = 2.0 * 8192**3
    b = sol.bound(3 * 8192 * 8192 * 2, flops, H200, ["bfloat16"])
    assert b.limiter == "compute"
    assert math.isclose(b.floor_ms, 1000 * flops / 790e12)
    assert H200.rate_for(["int8"]) == 2 * 790e12
    assert H200.rate_for([]) is None


def test_suspicious_only_beyond_margin():
    b = sol.Bound(bytes_ms=0.0624, flops_ms=None)
    assert not sol.is_suspicious(0.070, b)  # slower than the floor: fine
    assert not sol.is_suspicious(0.0600, b)  # a little faster than torch's copy: within margin
    assert sol.is_suspicious(0.004, b)  # 15x faster than physics
    assert not sol.is_suspicious(0.001, sol.Bound(0.0, None))  # no bound known: never flagged
    assert "faster than the speed of light" in sol.describe(0.004, b, H200)


def test_fractions():
    bw, fl = sol.fractions(1.0, 4.3e9, 400e9, H200, ["float32"])
    assert math.isclose(bw, 1.0) and math.isclose(fl, 1.0)
    assert sol.fractions(0.0, 1, 1, H200, ["float32"]) == (None, None)


def test_cache_roundtrip_keyed_by_device_and_driver(tmp_path):
    path = tmp_path / "sol.json"
    assert sol.load_cached(path, "NVIDIA H200", "580.159.04") is None
    sol.store_cached(path, H200)
    got = sol.load_cached(path, "NVIDIA H200", "580.159.04")
    assert got == H200
    assert sol.load_cached(path, "NVIDIA H200", "999.0") is None  # a new driver measures again
    other = sol.Ceilings("NVIDIA H100", "1", 3.3e12, {"bf16": 700e12})
    sol.store_cached(path, other)
    assert sol.load_cached(path, "NVIDIA H200", "580.159.04") == H200
    path.write_text("not json")
    assert sol.load_cached(path, "NVIDIA H200", "580.159.04") is None


def test_overrides_skip_measuring():
    c = sol.ceilings(overrides={"device": "x", "driver": "y", "copy_bytes_per_s": 1e12})
    assert c.copy_bytes_per_s == 1e12 and c.matmul_flops_per_s == {}
