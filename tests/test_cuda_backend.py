"""The cuda backend's CPU-testable parts: module interface, nvcc command lines, building with the
local nvcc (no GPU needed), ctypes marshalling, support functions, failure classification."""

import ctypes
import shutil
from pathlib import Path

import pytest
import torch

from klineage.gates.backend import GateOptions
from klineage.gates.compile import arch_flags, first_error
from klineage.gates.cuda import backend, build
from klineage.gates.protocol import ctypes_args
from klineage.workload import load_workload

REPO = Path(__file__).resolve().parent.parent
CHECK = REPO / "benchmarks" / "kernels" / "gpu_check"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def test_module_implements_the_backend_interface():
    assert backend.NAME == "cuda" and backend.DEFAULT_SHAPE_SET == "test"
    for fn in ("toolchain", "build", "make_runner", "profile", "classify_failure", "child_env"):
        assert callable(getattr(backend, fn))
    env = backend.child_env(GateOptions(backend="cuda"))
    assert env["CUDA_MODULE_LOADING"] == "LAZY"


def test_arch_flags():
    assert arch_flags("sm_90a") == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert arch_flags("sm_80") == ["-gencode=arch=compute_80,code=sm_80"]
    assert arch_flags("native") == ["-arch=native"]


def test_nvcc_command_default_flags():
    o = GateOptions(backend="cuda")
    cmd = build.nvcc_command("nvcc", o.arch, o.nvcc_flags)
    assert cmd[:3] == ["nvcc", "-O3", "-std=c++17"]
    assert "-gencode=arch=compute_90a,code=sm_90a" in cmd
    for f in ("-Xcompiler", "-fPIC", "-shared", "-lineinfo"):
        assert f in cmd
    assert cmd[cmd.index("-o") + 1] == "libcandidate.so"
    assert cmd[-2:] == ["kernel.cu", "klineage_support.cu"]


def test_first_error_is_file_line():
    log = 'kernel.cu(12): error: identifier "foo" is undefined\n\n1 error detected'
    assert first_error(log) == 'kernel.cu:12: error: identifier "foo" is undefined'
    assert first_error("") == "nvcc failed"


def test_marshalling_of_softmax_arguments():
    wl = load_workload(CHECK)
    x, y = torch.zeros(2, 3), torch.zeros(2, 3)
    args = ctypes_args(wl, [x, y, 2, 3], 1234)
    assert [type(a) for a in args] == [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int32,
        ctypes.c_int32,
        ctypes.c_void_p,
    ]
    assert args[0].value == x.data_ptr() and args[2].value == 2 and args[4].value == 1234
    assert (
        wl.c_signature()
        == 'extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream)'
    )


@pytest.mark.parametrize(
    "stderr,category,words",
    [
        (
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "crash",
            "illegal memory access",
        ),
        ("CUDA error: misaligned address", "crash", "misaligned"),
        (
            "CUDA error: operation not supported on global/shared address space",
            "crash",
            "__ldg of a register",
        ),
        ("torch.AcceleratorError: CUDA error: unspecified launch failure", "crash", "faulted"),
        (
            "cudaErrorNoKernelImageForDevice: no kernel image is available for execution",
            "unsupported",
            "arch",
        ),
        (
            "kernel launch failed: cudaErrorInvalidConfiguration (invalid configuration argument)",
            "crash",
            "launch configuration",
        ),
        ("CUDA error: the launch timed out and was terminated", "timeout", "watchdog"),
    ],
)
def test_classify_dead_child(stderr, category, words):
    got = backend.classify_failure(-6, "Traceback...\n" + stderr + "\n")
    assert got is not None and got[0] == category and words in got[1]
    assert stderr.strip() in got[1]


def test_unknown_death_is_left_to_the_gate():
    assert backend.classify_failure(-9, "Killed") is None


@needs_nvcc
def test_build_honest_kernel_and_load_support(tmp_path):
    out = backend.build((CHECK / "honest.cu").read_text(), tmp_path, GateOptions(backend="cuda"))
    assert out.ok, out.message
    assert out.library == tmp_path / "libcandidate.so" and build.exports_launch(out.library) is True
    from klineage.gates.cuda.runner import CandidateLibrary

    lib = CandidateLibrary(out.library)  # loading needs no GPU
    assert "cudaErrorIllegalAddress" in lib.describe(700)
    assert "-lineinfo" in (tmp_path / "build.log").read_text()


@needs_nvcc
def test_support_file_compiled_once(tmp_path, monkeypatch):
    """The support file becomes one object per toolchain and flags, linked into every build (its
    functions still read the candidate's launch errors); other flags, another object."""
    monkeypatch.setenv("KLINEAGE_HOME", str(tmp_path / "home"))
    src = (CHECK / "honest.cu").read_text()
    opts = GateOptions(backend="cuda")
    outs = [backend.build(src, tmp_path / d, opts) for d in ("a", "b")]
    assert all(o.ok for o in outs), [o.message for o in outs]
    objects = list((tmp_path / "home" / "cuda-support").glob("*/klineage_support.o"))
    assert len(objects) == 1
    for d in ("a", "b"):
        assert str(objects[0]) in (tmp_path / d / "build.log").read_text().splitlines()[0]
        assert not (tmp_path / d / "klineage_support.cu").exists()
    from klineage.gates.cuda.runner import CandidateLibrary

    assert "cudaErrorIllegalAddress" in CandidateLibrary(outs[1].library).describe(700)
    other = backend.build(src, tmp_path / "c", GateOptions(backend="cuda", nvcc_flags=("-O2", "-std=c++17")))
    assert other.ok and len(list((tmp_path / "home" / "cuda-support").glob("*/klineage_support.o"))) == 2


@needs_nvcc
def test_build_errors(tmp_path):
    bad = backend.build(
        'extern "C" void launch(float* x, cudaStream_t s) { x = 1; }',
        tmp_path / "a",
        GateOptions(backend="cuda"),
    )
    assert not bad.ok and bad.category == "compile_error" and bad.message.startswith("kernel.cu:1: error:")
    nolaunch = backend.build(
        'extern "C" void start(float* x, cudaStream_t s) {}', tmp_path / "b", GateOptions(backend="cuda")
    )
    assert not nolaunch.ok and "launch" in nolaunch.message


def test_missing_nvcc_is_unsupported(tmp_path, monkeypatch):
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    out = build.build("x", tmp_path, GateOptions(backend="cuda"))
    assert not out.ok and out.category == "unsupported"
