"""The cuda backend on a real GPU (skipped without one): runner, protocol, timing, the checks
that catch pointer-keyed caches and side streams, and the ceilings."""

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from klineage.gates.backend import GateOptions
from klineage.gates.protocol import check_workload
from klineage.workload import load_workload

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc"),
]

CHECK = Path(__file__).resolve().parent.parent / "benchmarks" / "kernels" / "gpu_check"
KERNELS = ("honest", "stale_tail", "pointer_cache", "side_stream", "racy", "oob")
SMALL = {"M": 512, "N": 1000}


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    from klineage.gates.cuda import backend

    root = tmp_path_factory.mktemp("cuda_libs")

    def one(name):
        out = backend.build((CHECK / f"{name}.cu").read_text(), root / name, GateOptions(backend="cuda"))
        assert out.ok, out.message
        return name, out.library

    with ThreadPoolExecutor(4) as pool:
        return dict(pool.map(one, KERNELS))


@pytest.fixture(scope="module")
def workload():
    return load_workload(CHECK)


def runner_for(libs, workload, name):
    from klineage.gates.cuda.backend import make_runner

    return make_runner(libs[name], workload, GateOptions(backend="cuda"))


def test_protocol_accepts_honest_and_rejects_stale(libs, workload):
    assert check_workload(workload, runner_for(libs, workload, "honest")).ok
    v = check_workload(workload, runner_for(libs, workload, "stale_tail"))
    assert v.category == "unwritten_output", v.message


def test_timing_keeps_pointers_and_changes_values(libs, workload):
    from klineage.gates.cuda import timing

    r = runner_for(libs, workload, "honest")
    bench = timing.Bench(workload, SMALL, r.device)
    x = bench.live["x"]
    ptr = x.data_ptr()
    bench.refill(0)
    v0 = x.clone()
    bench.refill(1)
    torch.cuda.synchronize()
    assert x.data_ptr() == ptr and not torch.equal(v0, x)
    assert bench.flush.numel() >= 2 * timing.l2_bytes(r.device)
    stream = torch.cuda.Stream()
    t = timing.timed(
        lambda: r.launch_async(bench.values, stream.cuda_stream), bench.refill, stream, reps=10, trials=3
    )
    assert t.summary.trials == 3 and t.summary.reps_per_trial == 10
    assert 0 < t.summary.min_ms <= t.summary.median_ms <= t.summary.max_ms
    assert timing.verify_after_timing(r, bench, stream) is None
    assert bench.breach() is None


def test_a_very_slow_kernels_one_timed_launch_is_checked_itself(libs, workload):
    """The very slow rule's single launch (value set 0, outputs poisoned) is compared with the
    reference: an honest kernel passes, one that leaves its tail unwritten is caught."""
    from klineage.gates.cuda import timing

    for name, ok in (("honest", True), ("stale_tail", False)):
        r = runner_for(libs, workload, name)
        bench = timing.Bench(workload, SMALL, r.device)
        stream = torch.cuda.Stream()
        timing.one_launch_ms(
            lambda r=r, b=bench, s=stream: r.launch_async(b.values, s.cuda_stream), bench.refill, stream
        )
        r.synchronize()
        msg = timing.check_timed_launch(bench)
        assert (msg is None) is ok, msg


def test_pointer_cache_is_caught_after_timing(libs, workload):
    from klineage.gates.cuda import timing

    r = runner_for(libs, workload, "pointer_cache")
    bench = timing.Bench(workload, SMALL, r.device)
    stream = torch.cuda.Stream()
    timing.timed(
        lambda: r.launch_async(bench.values, stream.cuda_stream), bench.refill, stream, reps=5, trials=3
    )
    msg = timing.verify_after_timing(r, bench, stream)
    assert msg is not None and "cached" in msg


def test_cupti_window_flags_side_stream_only(libs, workload):
    from klineage.gates.cuda import sidestream, timing

    for name, ok in (("honest", True), ("side_stream", False)):
        r = runner_for(libs, workload, name)
        bench = timing.Bench(workload, SMALL, r.device)
        stream = torch.cuda.Stream()
        rep = sidestream.trace_one(
            lambda r=r, b=bench, s=stream: r.launch_async(b.values, s.cuda_stream), r.library.marker, stream
        )
        r.synchronize()
        assert rep.traced, rep.note
        assert rep.ok is ok, rep.message()
        if ok:
            assert rep.kernel_ms > 0 and len(rep.inside) == 1


def test_launch_error_is_reported_in_words(tmp_path, workload):
    from klineage.gates.cuda import backend
    from klineage.gates.cuda.runner import CudaKernelError

    src = (
        (CHECK / "honest.cu").read_text().replace("<<<M, kThreads, 0, stream>>>", "<<<M, 4096, 0, stream>>>")
    )
    out = backend.build(src, tmp_path, GateOptions(backend="cuda"))
    assert out.ok, out.message
    r = backend.make_runner(out.library, workload, GateOptions(backend="cuda"))
    with pytest.raises(CudaKernelError, match="cudaErrorInvalid"):
        check_workload(workload, r)


def test_ceilings_are_plausible(tmp_path):
    from klineage.gates.cuda import sol

    sol._MEMO.clear()
    c = sol.ceilings(path=tmp_path / "sol.json")
    assert c.copy_bytes_per_s > 5e11
    assert c.matmul_flops_per_s["bf16"] > c.matmul_flops_per_s["fp32"] > 1e12
    assert sol.load_cached(tmp_path / "sol.json", c.device, c.driver) == c


def test_sanitizers_name_the_kernel_line(libs):
    """memcheck finds the out-of-bounds read, racecheck the shared-memory race; with
    KLINEAGE_SAMPLE_DIR set, the raw reports are kept (tests/data's recorded samples)."""
    from klineage.gates.cuda import sanitize
    from klineage.gates.cuda.probe import probe_command

    env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1")
    jobs = {"memcheck": "oob", "racecheck": "racy"}
    with ThreadPoolExecutor(2) as pool:
        runs = dict(
            pool.map(
                lambda tk: (
                    tk[0],
                    sanitize.run_tool(tk[0], probe_command(libs[tk[1]], CHECK, {"M": 3, "N": 300}), 240, env),
                ),
                jobs.items(),
            )
        )
    keep = os.environ.get("KLINEAGE_SAMPLE_DIR")
    for tool, run in runs.items():
        if keep:
            Path(keep, f"sanitizer_{tool}_sample.txt").write_text(run.output)
        assert run.finding is not None, run.output[-2000:]
        assert run.finding.category == sanitize.TOOLS[tool]
        assert run.finding.location.startswith("kernel.cu:"), run.finding.message()
