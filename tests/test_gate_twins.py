"""Binary twins (gates/twins.py): a cuda candidate whose device code compiles to the same bytes as
an earlier one's, with the same host code, reuses that verdict instead of a device run. No GPU:
the device run is a fake that counts itself; nvcc builds the real cubins."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from klineage.gates import gate as gate_mod
from klineage.gates.backend import GateOptions
from klineage.gates.child import ChildOutcome
from klineage.gates.twins import host_text

VADD = Path(__file__).parent / "kernels" / "emu" / "vadd"
GOOD = (VADD / "good.cu").read_text()

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def test_host_text_drops_device_code_and_comments_only() -> None:
    a = host_text(GOOD)
    assert a is not None and "vadd(const float*" not in a and "launch(" in a
    commented = GOOD.replace("int i =", "// the element\n  int i =").replace("extern", "/* host */ extern")
    assert host_text(commented) == a
    respaced = GOOD.replace("<<<(N + 255) / 256, 256, 0, stream>>>", "<<< (N+255)/256 ,256,0,stream >>>")
    assert host_text(respaced) != a  # spacing inside a token run is text: only runs of spaces collapse
    other_launch = GOOD.replace("(N + 255) / 256, 256", "(N + 127) / 128, 128")
    assert host_text(other_launch) != a
    both = "__host__ __device__ inline float twice(float x) { return 2.0f * x; }\n" + GOOD
    changed = both.replace("2.0f * x", "x + x")
    assert host_text(both) != host_text(changed)  # compiled for the host too: it is host code
    assert host_text("this is not CUDA {") is None


class _Runs:
    def __init__(self) -> None:
        self.n = 0

    def __call__(
        self, payload: dict[str, Any], workdir: Path, timeout_s: float, env: Any = None
    ) -> ChildOutcome:
        self.n += 1
        result = {
            "category": "ok",
            "stage": "done",
            "message": f"run {self.n}",
            "checks": [],
            "timing": {
                "median_ms": 1.0 + self.n,
                "min_ms": 1.0,
                "max_ms": 9.0,
                "trials": 3,
                "reps_per_trial": 50,
            },
        }
        return ChildOutcome(0, result, "", "", False, 0.1)


@pytest.fixture
def fake_device(monkeypatch: pytest.MonkeyPatch) -> _Runs:
    runs = _Runs()
    monkeypatch.setattr(gate_mod, "_require_gpu", lambda: None)
    monkeypatch.setattr(gate_mod, "run_worker", runs)
    monkeypatch.setattr(gate_mod, "device_slot", lambda: _NoLock())
    return runs


class _NoLock:
    def __enter__(self) -> float:
        return 0.0

    def __exit__(self, *exc: object) -> None:
        return None


def _gate(text: str, root: Path, **kw: Any) -> Any:
    return gate_mod.gate(text, VADD, GateOptions(backend="cuda"), name="k.cu", cache_root=root, **kw)


@needs_nvcc
def test_a_text_change_that_compiles_to_the_same_bytes_reuses_the_verdict(
    tmp_path: Path, fake_device: _Runs
) -> None:
    first = _gate(GOOD, tmp_path)
    assert fake_device.n == 1 and first.accepted and not first.twin_of
    # a comment in the kernel: other text, same binary
    same_binary = GOOD.replace("int i =", "// one element per thread\n  int i =")
    twin = _gate(same_binary, tmp_path)
    assert fake_device.n == 1, "a binary twin was run on the device"
    assert twin.twin_of == first.artifact_id and twin.artifact_id != first.artifact_id
    assert twin.timing is not None and first.timing is not None
    assert twin.timing.median_ms == first.timing.median_ms and twin.accepted
    assert "nvcc_s" in twin.stages_s and "run_s" not in twin.stages_s
    assert _gate(same_binary, tmp_path).cached  # and it is filed under its own text too


@needs_nvcc
def test_device_or_host_changes_and_no_cache_are_run(tmp_path: Path, fake_device: _Runs) -> None:
    _gate(GOOD, tmp_path)
    other_device = GOOD.replace("__ldg(a + i) + __ldg(b + i)", "__ldg(b + i) + __ldg(a + i) * 1.0f")
    assert not _gate(other_device, tmp_path).twin_of and fake_device.n == 2
    other_host = GOOD.replace("(N + 255) / 256, 256", "(N + 127) / 128, 128")
    assert not _gate(other_host, tmp_path).twin_of and fake_device.n == 3
    commented = GOOD.replace("int i =", "/* no cache asked */ int i =")
    assert not _gate(commented, tmp_path, use_cache=False).twin_of and fake_device.n == 4
    other_options = gate_mod.gate(
        commented, VADD, GateOptions(backend="cuda", extra={"reps": 7}), name="k.cu", cache_root=tmp_path
    )
    assert not other_options.twin_of and fake_device.n == 5


@needs_nvcc
def test_an_emu_gate_never_reuses_a_twin(tmp_path: Path) -> None:
    """The emulator reads the text (its aliasing and race checks), so only cuda verdicts are shared."""
    first = gate_mod.gate(GOOD, VADD, GateOptions(backend="emu"), name="k.cu", cache_root=tmp_path)
    again = gate_mod.gate(
        GOOD.replace("int i =", "// x\n  int i ="),
        VADD,
        GateOptions(backend="emu"),
        name="k.cu",
        cache_root=tmp_path,
    )
    assert first.accepted and again.accepted and not again.twin_of and not again.cached


@needs_nvcc
def test_a_cuda_gate_parses_its_candidate_once(
    tmp_path: Path, fake_device: _Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parse stage's tree is what the twin check reads after the compile stage."""
    from klineage.source.model import CudaSource

    parses: list[str] = []
    real = CudaSource.from_text.__func__  # type: ignore[attr-defined]

    def counting(cls: type[CudaSource], text: str, *a: Any, **kw: Any) -> CudaSource:
        parses.append(text)
        return real(cls, text, *a, **kw)

    monkeypatch.setattr(CudaSource, "from_text", classmethod(counting))
    _gate(GOOD, tmp_path)
    assert parses.count(GOOD) == 1 and fake_device.n == 1
    assert host_text(CudaSource.from_text(GOOD)) == host_text(GOOD)
