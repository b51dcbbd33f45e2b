"""Pure pieces of the cuda profile stage: bench shape choice and energy arithmetic (no GPU)."""

from pathlib import Path

from klineage.gates.backend import GateOptions
from klineage.gates.cuda.energy import calls_for, integrate
from klineage.gates.cuda.profile_stage import bench_bindings
from klineage.workload import load_workload

CHECK = Path(__file__).resolve().parent.parent / "benchmarks" / "kernels" / "gpu_check"


def test_bench_shape_choice():
    wl = load_workload(CHECK)
    assert bench_bindings(wl, GateOptions(backend="cuda")) == {"M": 8192, "N": 4096}
    o = GateOptions(backend="cuda", extra={"bench_shape": {"M": "16", "N": 32}})
    assert bench_bindings(wl, o) == {"M": 16, "N": 32}
    wl.shapes = {"test": wl.shapes["test"]}
    assert bench_bindings(wl, GateOptions(backend="cuda")) == {"M": 64, "N": 4099}


def test_energy_integration():
    assert integrate([(0.0, 100.0), (1.0, 100.0), (2.0, 300.0)]) == 100.0 + 200.0
    assert integrate([(0.0, 5.0)]) == 0.0
    assert calls_for(1.0, 0.1) == 10_000
    assert calls_for(1.0, 500.0) == 20  # the floor
    assert calls_for(1.0, 0.0) == 20
