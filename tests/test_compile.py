"""The nvcc compile stage: ptxas resources and diagnostics parsed from real and recorded output."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from klineage.gates.compile import arch_flags, compile_cubin, parse_diagnostics, parse_ptxas

RECORDED = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z1kILi256EEvPKfPfi' for 'sm_90a'
ptxas info    : Function properties for _Z1kILi256EEvPKfPfi
    160 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 21 registers, used 1 barriers, 160 bytes cumulative stack size, 1024 bytes smem, 368 bytes cmem[0]
ptxas info    : Compile time = 15.313 ms
"""

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def test_parse_ptxas_recorded() -> None:
    res = parse_ptxas(RECORDED, demangle=False)
    r = res["_Z1kILi256EEvPKfPfi"]
    assert (r.registers, r.barriers, r.shared_bytes, r.constant_bytes) == (21, 1, 1024, 368)
    assert (r.stack_bytes, r.spill_stores, r.spill_loads) == (160, 8, 12)


def test_parse_diagnostics() -> None:
    log = 'kernel.cu(12): error: identifier "undefined_x" is undefined\nkernel.cu(3): warning #177-D: variable "v" was declared but never referenced\n'
    d = parse_diagnostics(log)
    assert [(x.file, x.line, x.severity) for x in d] == [
        ("kernel.cu", 12, "error"),
        ("kernel.cu", 3, "warning"),
    ]
    assert str(d[0]) == 'kernel.cu:12: error: identifier "undefined_x" is undefined'


def test_a_host_compiler_error_is_the_first_error_not_compilation_terminated() -> None:
    from klineage.gates.compile import first_error

    log = (
        "kernel.cu:12:9: warning: #pragma once in main file\n"
        "   12 | #pragma once\n"
        "kernel.cu:573:10: fatal error: cublas_v2.h: No such file or directory\n"
        "  573 | #include <cublas_v2.h>\n"
        "compilation terminated.\n"
    )
    assert first_error(log) == "kernel.cu:573: error: cublas_v2.h: No such file or directory"
    assert [(d.line, d.severity) for d in parse_diagnostics(log)] == [(12, "warning"), (573, "error")]
    assert not parse_diagnostics("nvcc fatal   : Unknown option '-foo'\n")


def test_arch_flags() -> None:
    assert arch_flags("sm_90a") == ["-gencode=arch=compute_90a,code=sm_90a"]


@needs_nvcc
def test_real_nvcc_resources(tmp_path: Path, repo: Path) -> None:
    src = (repo / "examples/row_sum/expert.cu").read_text()
    r = compile_cubin(src, tmp_path)
    assert r.ok, r.log
    ((name, res),) = [(k, v) for k, v in r.resources.items() if "row_sum_block" in k]
    assert "row_sum_block<256>" in name  # demangled
    assert res.registers > 0 and res.shared_bytes == 8 * 4 and res.barriers == 1


@needs_nvcc
def test_real_nvcc_error(tmp_path: Path) -> None:
    r = compile_cubin('extern "C" void launch() { undefined_x = 1; }\n', tmp_path)
    assert not r.ok
    assert r.first_error().startswith("kernel.cu:1: error:")
