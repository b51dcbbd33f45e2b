"""The gate's account of where a candidate's time went (`GateResult.stages_s`): compile, waiting for
the device, the run and the worker's phases — what a materializer's loop on a GPU needs to know
when it is slow, kept with the verdict."""

from __future__ import annotations

from pathlib import Path

from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from klineage.gates.result import GateResult

VADD = Path(__file__).parent / "kernels" / "emu" / "vadd"


def test_an_accepted_gate_names_its_stages(tmp_path: Path) -> None:
    r = gate(VADD / "good.cu", VADD, GateOptions(backend="emu"), use_cache=False, cache_root=tmp_path)
    assert r.accepted, r.message
    s = r.stages_s
    for key in (
        "nvcc_s",
        "build_s",
        "compile_s",
        "device_wait_s",
        "run_s",
        "worker_load_s",
        "worker_correctness_s",
    ):
        assert key in s and s[key] >= 0.0, (key, s)
    # the compile pair runs side by side: its wall is at least the longer of the two
    assert s["compile_s"] >= max(s["nvcc_s"], s["build_s"]) - 1e-3
    assert s["run_s"] >= s["worker_correctness_s"]
    assert s["compile_s"] + s["run_s"] <= r.elapsed_s + 1e-3
    # kept with the verdict: a cached answer gives back the stages of the run that produced it
    again = GateResult.from_dict(r.to_dict())
    assert again.stages_s == s


def test_a_compile_error_keeps_its_compile_stages(tmp_path: Path) -> None:
    text = (VADD / "good.cu").read_text().replace("__ldg(b + i)", "undeclared_name", 1)
    r = gate(text, VADD, GateOptions(backend="emu"), name="bad.cu", use_cache=False, cache_root=tmp_path)
    assert r.stage == "compile" and not r.accepted, (r.stage, r.message)
    assert "compile_s" in r.stages_s and "run_s" not in r.stages_s
