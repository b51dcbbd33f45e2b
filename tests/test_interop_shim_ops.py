"""Torch operators that KernelBench bindings call from C++ (issue 29): `x.mean({2, 3}, true)`,
`var`, broadcasting arithmetic, `sqrt`, `select`, `sum()`, `cpu().item<T>()`, `torch::device`.
The stand-in shim (klineage/interop/torch_shim.h) computes them with small kernels, so such a
solution compiles and gates like the real thing; a 0-dimensional output (a loss) gates too.
Problems and solutions are written here in KernelBench's form (tests/data/interop/kb_ops/)."""

from __future__ import annotations

from pathlib import Path

from klineage.gates.gate import gate
from klineage.interop.kernelbench import import_problem
from klineage.workload import load_workload
from tests.conftest import REPO

OPS = REPO / "tests/data/interop/kb_ops"


def _gate(name: str, tmp_path: Path, solution: str | None = None):
    sol = OPS / f"{name}_solution.py"
    if solution is not None:
        sol = tmp_path / "solution.py"
        sol.write_text(solution)
    import_problem(OPS / f"{name}_problem.py", tmp_path / "w", solution=sol)
    kernel = (tmp_path / "w/solution.cu").read_text()
    return gate(kernel, load_workload(tmp_path / "w"), name=f"{name}.cu")


def test_statistics_from_torch_calls_in_cpp_gate_ok(tmp_path: Path) -> None:
    """mean/var over two axes with keepdim, broadcasting arithmetic, sqrt, select, torch::device."""
    r = _gate("instance_norm", tmp_path)
    assert r.accepted, (r.category, r.message)


def test_a_loss_reduced_by_sum_and_read_on_the_host_gates_ok(tmp_path: Path) -> None:
    """losses.sum(), total.cpu().item<float>(), a tensor divided by a number; 0-dim output."""
    r = _gate("huber", tmp_path)
    assert r.accepted, (r.category, r.message)


def test_a_wrong_reduction_is_caught(tmp_path: Path) -> None:
    """The shim's operators feed the verdict: a solution that divides by the wrong count fails."""
    text = (OPS / "huber_solution.py").read_text()
    assert "return total / n;" in text
    r = _gate("huber", tmp_path, text.replace("return total / n;", "return total / (2 * n);"))
    assert r.category == "mismatch", (r.category, r.message)
