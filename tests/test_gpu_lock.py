"""The cuda gate holds its GPU exclusively while a child runs (gates/cuda/device_lock.py): two
gates' kernels on one device at once would corrupt each other's timings."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import klineage.gates.gate as gate_mod
from klineage.gates.backend import GateOptions
from klineage.gates.child import ChildOutcome
from klineage.gates.cuda.device_lock import device_slot, is_held, lock_path

REPO = Path(__file__).resolve().parent.parent


def test_one_holder_at_a_time_per_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KLINEAGE_GPU_LOCK_DIR", str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    spans: list[tuple[float, float]] = []

    def hold() -> None:
        with device_slot():
            t0 = time.perf_counter()
            time.sleep(0.2)
            spans.append((t0, time.perf_counter()))

    threads = [threading.Thread(target=hold) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), spans  # no overlap


def test_devices_named_by_visible_devices_do_not_block_each_other(tmp_path: Path) -> None:
    env0 = {"KLINEAGE_GPU_LOCK_DIR": str(tmp_path), "CUDA_VISIBLE_DEVICES": "0"}
    env1 = {"KLINEAGE_GPU_LOCK_DIR": str(tmp_path), "CUDA_VISIBLE_DEVICES": "1"}
    assert lock_path(env0) != lock_path(env1)
    assert lock_path({"KLINEAGE_GPU_LOCK_DIR": str(tmp_path)}).name == "gpu-all.lock"
    with device_slot(env0) as waited:
        assert waited < 1.0
        assert is_held(env0) and not is_held(env1)
    assert not is_held(env0)


def test_cuda_gate_child_runs_inside_the_slot_and_emu_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent takes the slot around the child (so waiting is not child time); emu never does."""
    monkeypatch.setenv("KLINEAGE_GPU_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(gate_mod, "_require_gpu", lambda: None)
    seen: list[bool] = []

    def fake_run_worker(payload, workdir, timeout_s, env=None):  # noqa: ANN001, ANN202
        (tmp_path / "locks").mkdir(exist_ok=True)
        seen.append(is_held())
        return ChildOutcome(
            result={"category": "ok", "message": "", "checks": [], "timing": None, "profile": {}},
            returncode=0,
            stdout="",
            stderr="",
            timed_out=False,
            elapsed_s=0.0,
        )

    monkeypatch.setattr(gate_mod, "run_worker", fake_run_worker)
    src = REPO / "examples" / "vector_add" / "naive.cu"
    for backend in ("cuda", "emu"):
        gate_mod.gate(
            src,
            REPO / "examples" / "vector_add",
            GateOptions(backend=backend),
            use_cache=False,
            cache_root=tmp_path / "cache",
        )
    assert seen == [True, False]
