"""The Hopper gemm_bf16 expert (expert_kernels/gemm_bf16/variants/expert_wgmma.cu, issue 25 item 3):
the emulator refuses it as `unsupported` naming every construct it cannot run (TMA, mbarrier,
wgmma, setmaxnreg), mining a corpus that holds it skips it with that reason, it compiles for
sm_90a without spills, and the variant benchmark's host side builds the commands it should.
The GPU verdict is benchmarks/gemm_variants_bench.py's and the cuda gate's, on the device."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from klineage.gates.backend import GateOptions
from klineage.gates.emu.rewrite import Unsupported, translate
from klineage.gates.gate import gate
from klineage.mining import mine_corpus
from klineage.walker import find_workloads
from tests.conftest import REPO

GEMM = REPO / "expert_kernels" / "gemm_bf16"
HOPPER = GEMM / "variants" / "expert_wgmma.cu"
HEAD = "#include <cuda_runtime.h>\n__global__ void k(unsigned x) {\n"

_spec = importlib.util.spec_from_file_location(
    "gemm_variants_bench", REPO / "benchmarks/gemm_variants_bench.py"
)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench  # dataclasses look their module up there
_spec.loader.exec_module(bench)


def test_emu_gate_names_every_hopper_construct_of_the_expert() -> None:
    r = gate(HOPPER, GEMM, GateOptions(backend="emu"), use_cache=False)
    assert not r.accepted and r.category == "unsupported", f"{r.category}: {r.message}"
    for words in ("mbarrier", "TMA (CUtensorMap)", "TMA (cp.async.bulk)", "wgmma", "setmaxnreg"):
        assert words in r.message, (words, r.message)
    assert re.match(r"\S*expert_wgmma\.cu:\d+: ", r.message), r.message


def test_each_kind_is_named_once_at_its_first_line() -> None:
    src = (
        HEAD
        + '  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(x));\n'  # line 3
        + '  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(x));\n'
        + '  asm volatile("{\\n.reg .pred p;\\nsetp.ne.b32 p, %1, 0;\\n'
        + 'wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0}, %1, %1, p, 1, 1, 0, 1;\\n}\\n"'
        + ' : "+r"(x) : "r"(x));\n'  # line 5: named by its wgmma, not by the setp before it
        + '  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");\n'  # line 6
        + "}\n"
    )
    with pytest.raises(Unsupported) as e:
        translate(src, "h.cu")
    assert (e.value.file, e.value.line) == ("h.cu", 3) and "mbarrier" in e.value.construct
    assert [line for _, line in e.value.others] == [5, 6]
    assert "wgmma (warpgroup matrix multiply)" in e.value.others[0][0]
    assert "setmaxnreg" in e.value.others[1][0]
    text = str(e.value)
    assert text.startswith("h.cu:3: asynchronous barriers (mbarrier)") and text.count("mbarrier") == 2


def test_a_single_construct_keeps_the_one_line_message() -> None:
    with pytest.raises(Unsupported) as e:
        translate(HEAD + '  asm volatile("mov.u32 %0, %%laneid;" : "=r"(x));\n}\n', "h.cu")
    assert e.value.others == ()
    assert str(e.value) == 'h.cu:3: inline PTX asm ("mov.u32") cannot be emulated on the CPU (emu backend)'


def test_mining_skips_a_hopper_expert_with_the_reason(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    wl = corpus / "gemm_bf16_hopper"
    wl.mkdir(parents=True)
    shutil.copy(GEMM / "workload.py", wl / "workload.py")
    shutil.copy(GEMM / "naive.cu", wl / "naive.cu")
    shutil.copy(HOPPER, wl / "expert.cu")
    assert find_workloads([corpus]) == [wl]
    report = mine_corpus([corpus], db=tmp_path / "s.duckdb", workers=1, roundtrip=False, max_steps=2)
    (w,) = report["workloads"]
    assert w["skipped"].startswith("expert fails its own gate: unsupported: ")
    assert "wgmma" in w["skipped"] and "TMA" in w["skipped"]
    assert w["accepted"] == 0 and w["skills"] == [] and report["skills"] == 0


def test_the_variants_folder_is_no_workload_of_the_corpus() -> None:
    assert GEMM / "variants" not in find_workloads([REPO / "expert_kernels"])


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_hopper_expert_compiles_for_sm90a_without_spills(tmp_path: Path) -> None:
    cmd = ["nvcc", "-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-Xptxas", "-v"]
    proc = subprocess.run(
        [*cmd, "-o", str(tmp_path / "k.cubin"), str(HOPPER)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in proc.stderr, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr


def test_variant_specs_become_nvcc_macros() -> None:
    v = bench.Variant.parse(
        "n128=expert_kernels/gemm_bf16/variants/expert_wgmma.cu:KL_WGMMA_N=128,KL_STAGES=3"
    )
    assert v == bench.Variant(
        "n128", Path("expert_kernels/gemm_bf16/variants/expert_wgmma.cu"), ("KL_WGMMA_N=128", "KL_STAGES=3")
    )
    cmd = bench.nvcc_command(v, Path("lib.so"))
    assert "-gencode=arch=compute_90a,code=sm_90a" in cmd  # not -arch=sm_90a: its sm_90 pass rejects wgmma
    assert cmd[-3:] == ["-o", "lib.so", "expert_kernels/gemm_bf16/variants/expert_wgmma.cu"]
    assert [c for c in cmd if c.startswith("-D")] == ["-DKL_WGMMA_N=128", "-DKL_STAGES=3"]
    assert bench.Variant.parse("plain=x.cu").defines == ()


def test_table_reports_ratios_to_cublas() -> None:
    key = bench.shape_key(bench.TIME_SHAPES[0])
    rows = [
        bench.Outcome("cublas", "ok", times_ms={key: 0.2}),
        bench.Outcome("wgmma", "ok", checks=[{"rel_frobenius": 3e-3}], times_ms={key: 0.25}),
    ]
    line = bench.table(rows).splitlines()[-1]
    assert line.startswith("| wgmma | ok | 3.00e-03 | 0.2500 (0.80x, ")
