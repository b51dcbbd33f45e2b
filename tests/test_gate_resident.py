"""The resident gate worker (gates/resident.py), on the CPU with the emu backend: the same verdicts
as the child per candidate, a worker replaced after a fault, a hang (the parent's watchdog) or a
candidate that leaves a host thread running, and a fault that never takes a later candidate's
verdict with it. The health comparison (gates/health.py) is tested on snapshots of a fake device."""

from __future__ import annotations

import os
import shutil
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from klineage.gates import child, health, resident
from klineage.gates.backend import BuildOutcome, GateOptions
from klineage.gates.emu import backend as emu_backend
from klineage.gates.gate import gate

VADD = Path(__file__).parent / "kernels" / "emu" / "vadd"

#: host code in `launch` misbehaves as MODE says: 'p' prints, 's' segfaults, 'h' hangs, 't' leaves
#: a thread running; the mode is in the source, so every variant runs under one environment
KERNEL = r"""
#include <cuda_runtime.h>
#include <cstdio>
#include <csignal>
#include <pthread.h>
#include <unistd.h>
__global__ void vadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
static void* sleeper(void*) { for (;;) pause(); return nullptr; }
extern "C" void launch(const float* a, const float* b, float* c, int N, cudaStream_t stream) {
  const char m = 'MODE';
  printf("launch N=%d\n", N);
  fprintf(stderr, "stderr N=%d\n", N);
  if (m == 's') raise(SIGSEGV);
  if (m == 'h') { for (;;) pause(); }
  if (m == 't') { pthread_t t; pthread_create(&t, nullptr, sleeper, nullptr); pthread_detach(t); }
  vadd<<<(N + 255) / 256, 256, 0, stream>>>(a, b, c, N);
}
"""


def kernel(mode: str) -> str:
    return KERNEL.replace("'MODE'", f"'{mode}'")


@pytest.fixture(autouse=True)
def built_once(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each variant is compiled once per session (the run stage is what these tests are about)."""
    memo: dict[str, BuildOutcome] = _BUILDS
    lock = threading.Lock()
    real = emu_backend.build

    def build(source: str, workdir: Path, options: GateOptions) -> BuildOutcome:
        with lock:
            if source not in memo:
                out = real(source, workdir, options)
                if out.ok:
                    keep = tmp_path_factory.mktemp("lib") / out.library.name
                    shutil.copy(out.library, keep)
                    out.library = keep
                memo[source] = out
            return memo[source]

    monkeypatch.setattr(emu_backend, "build", build)


_BUILDS: dict[str, BuildOutcome] = {}


@pytest.fixture()
def fresh_workers() -> None:
    resident.shutdown()
    resident.STATS.__init__()
    yield
    resident.shutdown()


def _verdicts(
    modes: list[str], path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timeout_s: float = 6.0
) -> list[dict]:
    monkeypatch.setenv("KLINEAGE_GATE_WORKER", path)
    out = []
    for i, mode in enumerate(modes):
        r = gate(
            kernel(mode),
            VADD,
            GateOptions(timeout_s=timeout_s),
            name="zt.cu",
            use_cache=False,
            cache_root=tmp_path / path / str(i),
        )
        d = r.to_dict()
        d.pop("elapsed_s")
        d.pop("stages_s")
        out.append(d)
    return out


def test_interleaved_faults_same_verdicts_as_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: list[child.ChildOutcome], fresh_workers: None
) -> None:
    """ok, segfault, ok, hang, ok, thread left, ok: each fault is its own candidate's verdict only,
    the worker is replaced after each, and every verdict equals the child path's."""
    modes = ["p", "s", "p", "h", "p", "t", "p"]
    got = _verdicts(modes, "resident", tmp_path, monkeypatch)
    assert [o.via for o in spy] == ["resident"] * len(modes)
    assert [d["category"] for d in got] == ["ok", "crash", "ok", "timeout", "ok", "ok", "ok"]
    assert "SIGSEGV" in got[1]["message"]
    assert spy[1].returncode == -signal.SIGSEGV and spy[3].timed_out and spy[3].returncode == -9
    assert "launch N=" in spy[0].stdout + spy[0].stderr and "stderr N=" in spy[1].stderr
    captured = [(o.stdout, o.stderr) for o in spy]
    retired = resident.STATS.retired
    assert retired[0] == "died (SIGSEGV)" and retired[1].startswith("timeout") and "host thread" in retired[2]
    assert resident.STATS.started == 4 and len(retired) == 3
    spy.clear()
    want = _verdicts(modes, "child", tmp_path, monkeypatch)
    assert [o.via for o in spy] == ["zygote"] * len(modes)
    assert got == want
    assert [(o.stdout, o.stderr) for o in spy] == captured


def test_one_worker_serves_concurrent_gates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: list[child.ChildOutcome], fresh_workers: None
) -> None:
    monkeypatch.setenv("KLINEAGE_GATE_WORKER", "resident")

    def one(i: int) -> str:
        return gate(
            kernel("p"),
            VADD,
            GateOptions(timeout_s=60),
            name=f"k{i}.cu",
            use_cache=False,
            cache_root=tmp_path / str(i),
        ).category

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(one, range(6))) == ["ok"] * 6
    assert resident.STATS.started == 1 and resident.STATS.runs == 6 and not resident.STATS.retired
    assert {o.via for o in spy} == {"resident"}


def test_worker_killed_between_runs_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_workers: None
) -> None:
    monkeypatch.setenv("KLINEAGE_GATE_WORKER", "resident")
    assert _verdicts(["p"], "resident", tmp_path / "a", monkeypatch)[0]["category"] == "ok"
    (w,) = resident._workers.values()
    os.kill(w.proc.pid, signal.SIGKILL)
    w.proc.wait()
    assert _verdicts(["p"], "resident", tmp_path / "b", monkeypatch)[0]["category"] == "ok"
    assert resident.STATS.started == 2


def test_which_path() -> None:
    env = {"KLEMU_LAUNCH_CPU_S": "2"}
    os.environ.pop("KLINEAGE_GATE_WORKER", None)
    assert resident.enabled("cuda", env) and not resident.enabled("emu", env)
    os.environ["KLINEAGE_GATE_WORKER"] = "child"
    try:
        assert not resident.enabled("cuda", env)
        os.environ["KLINEAGE_GATE_WORKER"] = "resident"
        assert resident.enabled("emu", env) and not resident.enabled("cuda", {"LD_PRELOAD": "libasan.so"})
    finally:
        os.environ.pop("KLINEAGE_GATE_WORKER", None)


# ---- the health comparison, on a fake device ---------------------------------------------------------

BASE = {
    "threads": 9,
    "free_bytes": 100 << 30,
    "reserved_bytes": 2 << 20,
    "context": 0x55,
    "device": 0,
    "limit.stack_size": 1024,
    "limit.persisting_l2_cache_size": 0,
    "cache_config": 0,
}


def test_unchanged_device_is_healthy() -> None:
    same = dict(BASE, threads=8)  # a thread of the warm-up that ended is no drift
    assert health.drift(BASE, same) is None
    # memory the allocator holds (cached blocks) is not a leak, nor a little module code
    held = dict(
        BASE, free_bytes=BASE["free_bytes"] - (600 << 20), reserved_bytes=BASE["reserved_bytes"] + (590 << 20)
    )
    assert health.drift(BASE, held) is None


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"error": "CUDA error: an illegal memory access was encountered"}, "unusable"),
        ({"threads": 10}, "1 host thread running"),
        ({"free_bytes": (100 << 30) - (300 << 20)}, "300 MiB of device memory left allocated"),
        ({"limit.persisting_l2_cache_size": 1 << 20}, "limit.persisting_l2_cache_size changed: 0 -> 1048576"),
        ({"limit.stack_size": 4096}, "limit.stack_size"),
        ({"cache_config": 2}, "cache_config"),
        ({"context": 0x77}, "context"),
        ({"device": 1}, "device"),
    ],
)
def test_drift_names_what_changed(change: dict, words: str) -> None:
    reason = health.drift(BASE, dict(BASE, **change))
    assert reason is not None and words in reason


def test_a_setting_the_driver_stops_reporting_is_a_change() -> None:
    after = dict(BASE)
    del after["cache_config"]
    assert "cache_config" in (health.drift(BASE, after) or "")


# ---- on a GPU (skipped without one) -------------------------------------------------------------------

CHECK = Path(__file__).resolve().parent.parent / "benchmarks" / "kernels" / "gpu_check"


def _gpu() -> bool:
    import shutil as sh

    import torch

    return torch.cuda.is_available() and sh.which("nvcc") is not None


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs a CUDA GPU and nvcc")
def test_cuda_fault_never_takes_a_later_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: list[child.ChildOutcome], fresh_workers: None
) -> None:
    """An illegal address kills the CUDA context: its own verdict is `crash`, the worker is replaced,
    the honest kernel after it is accepted and timed; the child path gives the same categories."""
    honest, crash = (CHECK / "honest.cu").read_text(), (CHECK / "crash.cu").read_text()
    seq = [honest, crash, honest + "\n// again\n"]
    got = {}
    for path in ("resident", "child"):
        monkeypatch.setenv("KLINEAGE_GATE_WORKER", path)
        got[path] = [
            gate(
                src,
                CHECK,
                GateOptions(backend="cuda", timeout_s=120),
                name=f"k{i}.cu",
                use_cache=False,
                cache_root=tmp_path / path / str(i),
            )
            for i, src in enumerate(seq)
        ]
    assert (
        [r.category for r in got["resident"]] == ["ok", "crash", "ok"] == [r.category for r in got["child"]]
    )
    assert got["resident"][2].timing is not None
    assert resident.STATS.retired and "unusable" in resident.STATS.retired[0]


def test_kept_inputs_are_copies_of_the_generated_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's input sets (protocol.host_inputs) hold make_inputs' values; a caller that writes
    into its copy changes nothing for the next caller."""
    import torch

    from klineage.gates import protocol
    from klineage.workload import load_workload

    wl = load_workload(VADD)
    bindings = wl.shape_set("emu")[0]
    monkeypatch.setattr(protocol, "INPUT_MEMO_BYTES", 1 << 30)
    monkeypatch.setattr(protocol, "_memo", type(protocol._memo)())
    first = protocol.host_inputs(wl, bindings, 0)
    for v in first.values():
        if isinstance(v, torch.Tensor):
            v.fill_(7)
    again, fresh = protocol.host_inputs(wl, bindings, 0), wl.make_inputs(bindings, 0)
    assert len(protocol._memo) == 1
    for k, v in fresh.items():
        assert torch.equal(again[k], v) if isinstance(v, torch.Tensor) else again[k] == v
    other = protocol.host_inputs(wl, bindings, 1)
    assert len(protocol._memo) == 2 and not torch.equal(other["a"], again["a"])


def test_device_kept_inputs_are_the_seeds_values_and_guarded(monkeypatch: pytest.MonkeyPatch) -> None:
    """protocol.device_inputs (the worker's sets kept on the device; run here on the CPU): the
    values of make_inputs for the seed, copies handed out, a write into the kept set found by
    memo_intact (the worker then retires), the oldest set dropped past the byte budget."""
    import torch

    from klineage.gates import protocol
    from klineage.workload import load_workload

    wl = load_workload(VADD)
    bindings = wl.shape_set("emu")[0]
    cpu = torch.device("cpu")
    monkeypatch.setattr(protocol, "DEVICE_MEMO_BYTES", 1 << 30)
    monkeypatch.setattr(protocol, "_dev_memo", type(protocol._dev_memo)())
    first = protocol.device_inputs(wl, bindings, 0, cpu)
    for v in first.values():
        if isinstance(v, torch.Tensor):
            v.fill_(7)
    again, fresh = protocol.device_inputs(wl, bindings, 0, cpu), wl.make_inputs(bindings, 0)
    assert len(protocol._dev_memo) == 1
    for k, v in fresh.items():
        assert torch.equal(again[k], v) if isinstance(v, torch.Tensor) else again[k] == v
    assert protocol.memo_intact() is None
    kept = next(iter(protocol._dev_memo.values())).values["a"]
    kept.view(-1)[3] += 1.0  # what a stray write from a candidate would do
    assert "overwritten" in (protocol.memo_intact() or "")
    # the budget: room for one set only
    size = next(iter(protocol._dev_memo.values())).nbytes
    monkeypatch.setattr(protocol, "DEVICE_MEMO_BYTES", size)
    protocol.device_inputs(wl, bindings, 1, cpu)
    assert [k[0][4] for k in protocol._dev_memo] == [1]


def test_the_kept_input_sets_take_a_third_of_the_device_at_most() -> None:
    """An H200 keeps about 47 GB of generated sets (the corpus's bench-shape sets all fit, so a
    materializer's loop does not regenerate them with the GPU lock held); a 24 GB card keeps 8."""
    from klineage.gates import resident

    h200 = 150_000_000_000
    assert resident.device_memo_bytes(h200) == h200 // 3 <= resident.DEVICE_MEMO_BYTES
    assert resident.device_memo_bytes(24 << 30) == 8 << 30
    assert resident.device_memo_bytes(1 << 40) == resident.DEVICE_MEMO_BYTES == 48 << 30


def test_a_workloads_first_reference_calls_are_forgiven_and_nothing_else() -> None:
    """The worker's own first reference/vendor calls of a workload take module memory and may
    start a thread: the baseline moves by exactly that; a candidate's leak after it still shows."""
    before = dict(BASE)
    after_warm = dict(BASE, free_bytes=BASE["free_bytes"] - (700 << 20), threads=10)
    assert health.drift(BASE, after_warm) is not None  # what used to retire the worker
    moved = health.forgive(BASE, before, after_warm)
    assert health.drift(moved, after_warm) is None
    leaked = dict(after_warm, free_bytes=after_warm["free_bytes"] - (300 << 20))
    assert "left allocated" in (health.drift(moved, leaked) or "")
    assert "thread" in (health.drift(moved, dict(after_warm, threads=11)) or "")
    changed = dict(after_warm, cache_config=1)  # a setting the warm-up changed is never forgiven
    assert "cache_config" in (health.drift(health.forgive(BASE, before, changed), changed) or "")


class _FakeDevice:
    """A backend whose `warm_up_workload` takes 700 MiB the allocator does not hold."""

    def __init__(self) -> None:
        self.free = BASE["free_bytes"]
        self.calls: list[str] = []

    def device_state(self) -> dict:
        return dict(BASE, free_bytes=self.free, threads=BASE["threads"])

    def warm_up_workload(self, workload, options) -> None:  # noqa: ANN001
        self.calls.append(workload.name)
        self.free -= 700 << 20


def test_first_look_runs_once_per_workload_and_moves_the_baseline(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    import json

    monkeypatch.setattr(health, "threads", lambda: BASE["threads"])
    dev = _FakeDevice()
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps({"workload_dir": str(VADD), "options": {"backend": "cuda"}}))
    seen: set = set()
    base = health.snapshot(dev)  # type: ignore[arg-type]
    moved = resident._first_look(dev, str(payload), base, seen)
    assert dev.calls == ["emu_vadd"] and health.drift(moved, health.snapshot(dev)) is None  # type: ignore[arg-type]
    again = resident._first_look(dev, str(payload), moved, seen)
    assert dev.calls == ["emu_vadd"] and again is moved
    untimed = tmp_path / "untimed.json"
    untimed.write_text(
        json.dumps({"workload_dir": str(VADD), "options": {"backend": "cuda", "time_kernel": False}})
    )
    assert resident._first_look(dev, str(untimed), moved, set()) is moved and dev.calls == ["emu_vadd"]


def test_the_candidate_that_took_device_memory_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    """A retirement for held memory says how much; the log says which run folders took it."""
    grown = dict(BASE, free_bytes=BASE["free_bytes"] - (40 << 20))
    held = resident._note_held(BASE, grown, 0, "/runs/cand-a")
    assert held == 40 << 20 and "40 MiB more" in capsys.readouterr().out
    same = resident._note_held(
        BASE, dict(grown, free_bytes=grown["free_bytes"] - (1 << 20)), held, "/runs/cand-b"
    )
    assert same == 41 << 20 and capsys.readouterr().out == ""  # a little module code is not named


def test_another_workers_memory_between_candidates_is_not_this_workers_leak() -> None:
    """Two loops share one GPU, each with its resident worker, taking turns through the device
    lock: what the other worker takes or gives back while this one is idle moves this one's
    baseline; what this worker's candidate keeps still retires it."""
    idle = BASE["free_bytes"]
    others_took = idle - (2000 << 20)  # the other worker's input sets
    moved = health.rebase(BASE, idle, others_took)
    after = dict(BASE, free_bytes=others_took)  # this candidate kept nothing
    assert health.drift(BASE, after) is not None  # what retired the worker before
    assert health.drift(moved, after) is None
    kept = dict(after, free_bytes=others_took - (300 << 20))
    assert "300 MiB of device memory left allocated" in (health.drift(moved, kept) or "")
    gave_back = health.rebase(moved, others_took, idle)  # the other worker retired: its memory came back
    assert health.drift(gave_back, dict(BASE)) is None
    assert "left allocated" in (health.drift(gave_back, dict(BASE, free_bytes=idle - (300 << 20))) or "")
    assert health.rebase(BASE, None, idle) is BASE  # a backend that cannot say: unchanged
