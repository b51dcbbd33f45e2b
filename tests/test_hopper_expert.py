"""The Hopper gemm_bf16 expert (expert_kernels/gemm_bf16/variants/expert_wgmma.cu, issue 25 item 3):
the emulator runs it as written (TMA, mbarrier, wgmma, setmaxnreg) and refuses its cluster build,
mining a corpus that holds it walks its Hopper steps on the CPU, it compiles for sm_90a without
spills, and the variant benchmark's host side builds the commands it should.
The GPU verdict is benchmarks/gemm_variants_bench.py's and the cuda gate's, on the device."""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from klineage.gates.backend import GateOptions
from klineage.gates.emu.rewrite import Unsupported, translate
from klineage.gates.gate import gate
from klineage.mining import mine_corpus
from klineage.store.db import Store
from klineage.store.lineage import taken_steps
from tests.conftest import REPO, define_lines, with_emu_shapes
from tests.hopper_models import (
    GEMM_CLUSTER_MODELS,
    GEMM_NO_MULTICAST,
    GEMM_WGMMA_MODELS,
    SYNC_MODELS,
    assert_emu_runs_hopper_kernel,
    copy_models,
    sm90a_ptxas,
    with_models,
)

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


def test_emu_gate_runs_the_hopper_expert() -> None:
    """TMA loads into a swizzled ring, mbarrier phases, setmaxnreg and wgmma as written: the emulator
    runs them (gates/emu/ptx_hopper.py) and the product is right."""
    assert_emu_runs_hopper_kernel(HOPPER, GEMM)


def test_a_cluster_launch_stays_unsupported(tmp_path: Path) -> None:
    """KL_CLUSTER = 2 launches clusters of two blocks through cudaLaunchKernelEx: blocks that wait on
    each other cannot run one after another, so the emulator says so rather than guess."""
    (tmp_path / "k.cu").write_text(define_lines("KL_CLUSTER=2") + HOPPER.read_text())
    r = gate(tmp_path / "k.cu", GEMM, GateOptions(backend="emu"), use_cache=False)
    assert r.category == "unsupported" and "clusters of 2 x 1 x 1 blocks" in r.message, (
        f"{r.category}: {r.message}"
    )


def test_each_kind_is_named_once_at_its_first_line() -> None:
    src = (
        HEAD
        + '  asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %1}], [%1];"'
        + ' :: "l"(x), "r"(x));\n'  # line 3
        + '  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes'
        + ' [%0], [%1, {%0, %0}], [%0], {%0};" :: "r"(x), "l"(x));\n'  # line 4: the same kind (TMA), not named again
        + '  asm volatile("{\\n.reg .pred p;\\nsetp.ne.b32 p, %1, 0;\\n'
        + 'wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0}, %1, %1, p, 1, 1;\\n}\\n"'
        + ' : "+r"(x) : "r"(x));\n'  # line 5: named by its wgmma (an fp8 form), not by the setp before it
        + "  __nanosleep(100);\n"  # line 6
        + '  asm volatile("stmatrix.sync.aligned.m16n8.x2.trans.shared.b8 [%0], {%0, %0};" :: "r"(x));\n'  # line 7
        + "}\n"
    )
    with pytest.raises(Unsupported) as e:
        translate(src, "h.cu")
    assert (e.value.file, e.value.line) == ("h.cu", 3) and "TMA" in e.value.construct
    assert [line for _, line in e.value.others] == [5, 6, 7]
    assert "wgmma (warpgroup matrix multiply)" in e.value.others[0][0]
    assert "__nanosleep" in e.value.others[1][0]
    assert "stmatrix" in e.value.others[2][0]
    text = str(e.value)
    assert text.startswith("h.cu:3: TMA (cp.async.bulk)") and text.count("TMA") == 1


def test_a_single_construct_keeps_the_one_line_message() -> None:
    with pytest.raises(Unsupported) as e:
        translate(HEAD + '  asm volatile("mov.u32 %0, %%smid;" : "=r"(x));\n}\n', "h.cu")
    assert e.value.others == ()
    assert str(e.value) == (
        'h.cu:3: inline PTX asm ("mov.u32") in `mov.u32 %0, %%smid` cannot be emulated on the CPU (emu backend)'
    )


@pytest.mark.slow
def test_mining_walks_a_hopper_expert_through_its_hopper_steps(tmp_path: Path) -> None:
    """On the CPU, the walk from the Hopper expert takes its Hopper steps: setmaxnreg removed, then
    (after the steps that stand in front of them) the TMA copies made synchronous and each wgmma done
    as per-warp mma.sync."""
    corpus = tmp_path / "corpus"
    wl = corpus / "gemm_bf16_hopper"
    wl.mkdir(parents=True)
    shutil.copy(GEMM / "workload.py", wl / "workload.py")
    shutil.copy(GEMM / "naive.cu", wl / "naive.cu")
    shutil.copy(HOPPER, wl / "expert.cu")
    report = mine_corpus([corpus], db=tmp_path / "s.duckdb", workers=2, roundtrip=False, max_steps=14)
    (w,) = report["workloads"]
    assert not w["skipped"] and w["accepted"] == 14, w
    with Store(tmp_path / "s.duckdb", read_only=True) as store:
        taken = [row["operator"] for row in taken_steps(store, "gemm_bf16")]
    assert {"setmaxnreg", "tma", "wgmma"} <= set(taken), taken
    assert taken.index("setmaxnreg") < taken.index("tma") < taken.index("wgmma"), taken  # expert first


def test_a_consumer_that_reads_its_stage_before_the_phase_completes_is_rejected(tmp_path: Path) -> None:
    """Without its wait on the stage's `full` barrier, a consumer reads the ring before the TMA
    copies land: the emulator lands them only when the barrier's phase completes, so it reads poison
    (and the landing changes the operands before the wgmmas' wait)."""
    wait = "mbar_wait(ring.full(s), (it / kStages) & 1);"
    assert HOPPER.read_text().count(wait) == 1
    (tmp_path / "k.cu").write_text(HOPPER.read_text().replace(wait, ";"))
    r = gate(tmp_path / "k.cu", GEMM, GateOptions(backend="emu"), use_cache=False)
    # the copy's bytes land under the wgmmas that already read the poison: caught at their wait, or as a
    # wrong product
    assert not r.accepted and r.category in ("crash", "mismatch", "nondeterministic"), (
        f"{r.category}: {r.message}"
    )


def test_a_stage_released_before_its_wgmmas_retire_is_caught(tmp_path: Path) -> None:
    """Waiting for all but two groups instead of one releases a stage whose wgmmas may still read it:
    the producer refills it, and the wait that retires the group finds its operand changed."""
    wait = "wgmma_wait<1>();  // the previous slice's MMAs are done"
    assert HOPPER.read_text().count(wait) == 1
    (tmp_path / "k.cu").write_text(HOPPER.read_text().replace(wait, "wgmma_wait<2>();  //"))
    wl = with_emu_shapes(GEMM, '[{"M": 192, "N": 320, "K": 512}]', tmp_path / "wl")
    r = gate(tmp_path / "k.cu", wl, GateOptions(backend="emu"), use_cache=False)
    assert r.category == "crash" and "changed before wgmma.wait_group retired its group" in r.message, (
        r.message
    )


def test_a_producer_that_refills_a_stage_in_use_deadlocks_on_its_barrier(tmp_path: Path) -> None:
    """Without its wait on the stage's `empty` barrier, the producer refills stages the consumers still
    read; K = 512 (eight slices in a four-deep ring) wraps the ring, and the consumers' arrivals then
    outrun the barrier's phases: a deadlock naming the wait, where the GPU would hang or compute garbage."""
    wait = "if (it >= kStages) mbar_wait(ring.empty(s), ((it / kStages) - 1) & 1);"
    assert HOPPER.read_text().count(wait) == 1
    (tmp_path / "k.cu").write_text(HOPPER.read_text().replace(wait, ";"))
    wl = with_emu_shapes(GEMM, '[{"M": 192, "N": 320, "K": 512}]', tmp_path / "wl")
    assert gate(HOPPER, wl, GateOptions(backend="emu"), use_cache=False).accepted
    r = gate(tmp_path / "k.cu", wl, GateOptions(backend="emu"), use_cache=False)
    assert r.category == "crash" and "deadlock" in r.message and "mbarrier.try_wait" in r.message, r.message


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_hopper_expert_compiles_for_sm90a_without_spills(tmp_path: Path) -> None:
    report = sm90a_ptxas(HOPPER, tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in report, report
    assert "warning" not in report.lower(), report


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


# ---- the kernel's logic on the emulator, its PTX replaced by models -------------------------------

#: the gemm's own PTX helpers beside the shared models (tests/hopper_models.py): clusters of one
#: block, and a wgmma that reads A (K-major) and B (MN-major) through their descriptors, each thread
#: adding into its own fragment.
GEMM_MODELS = GEMM_CLUSTER_MODELS + GEMM_NO_MULTICAST + GEMM_WGMMA_MODELS
PTX_MODELS = SYNC_MODELS + copy_models("bf16") + GEMM_MODELS

HOST_MODEL = r"""
int resident_clusters() { return KL_TEST_SMS; }
void launch_clusters(int clusters, const KlTensorMap& a, const KlTensorMap& b, __nv_bfloat16* C, int M, int N, int K,
                     cudaStream_t stream) {
    gemm_bf16_wgmma<<<clusters, kThreads, kSmemBytes, stream>>>(a, b, C, M, N, K);
}
bool tensor_map(KlTensorMap* map, const void* ptr, int rows, int cols, int box_rows, int box_cols) {
    *map = KlTensorMap{static_cast<const __nv_bfloat16*>(ptr), rows, cols, box_rows, box_cols};
    return true;
}

"""


def _with_models(src: str, sms: int) -> str:
    """The expert with its PTX helpers and its host side (tensor maps, resident blocks) replaced by
    the models above, with room for `sms` blocks (fewer than tiles: each block walks several).
    Clusters of one block only: the emulator has no clusters, so KL_CLUSTER = 2 is not run here."""
    return with_models(src, PTX_MODELS, HOST_MODEL.replace("KL_TEST_SMS", str(sms)), "}  // namespace")


#: shapes that walk the ring past its 4 stages (6 and 5 slices), partial tiles in M and N (a B box
#: wholly past N), a box taller than the matrix (M = 64), and 4 tiles on 2 blocks
MODEL_SHAPES = '[{"M": 64, "N": 64, "K": 64}, {"M": 192, "N": 320, "K": 384}, {"M": 256, "N": 512, "K": 320}]'


def _model_workload(tmp_path: Path) -> Path:
    return with_emu_shapes(GEMM, MODEL_SHAPES, tmp_path / "wl")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("defines", "passes"),
    [
        ("", True),
        ("KL_WGMMA_N=128", True),
        ("KL_BN=128,KL_WGMMA_N=128,KL_STAGES=6", True),
        ("KL_PERSISTENT=0", True),
        ("KL_B_SWAP_OFFSETS=1", False),
    ],
    ids=["n256", "n128", "bn128", "per-tile", "swapped-B-offsets"],
)
def test_hopper_expert_logic_on_the_emulator_with_ptx_models(
    tmp_path: Path, defines: str, passes: bool
) -> None:
    (tmp_path / "k.cu").write_text(define_lines(defines) + _with_models(HOPPER.read_text(), sms=2))
    r = gate(tmp_path / "k.cu", _model_workload(tmp_path), GateOptions(backend="emu"), use_cache=False)
    assert r.accepted == passes, f"{r.category}: {r.message}"
    if not passes:  # B read at the wrong places: wrong values, or shared memory no copy wrote (poison)
        assert r.category in ("mismatch", "nondeterministic", "nan"), f"{r.category}: {r.message}"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("if (it >= kStages) mbar_wait(ring.empty(s), ((it / kStages) - 1) & 1);", ""),
        ("mbar_wait(ring.full(s), (it / kStages) & 1);", "mbar_wait(ring.full(s), (t / kStages) & 1);"),
    ],
    ids=["producer-never-waits-for-a-free-stage", "consumer-phase-restarts-every-tile"],
)
def test_the_models_catch_ring_bugs(tmp_path: Path, old: str, new: str) -> None:
    src = HOPPER.read_text()
    assert src.count(old) == 1
    (tmp_path / "k.cu").write_text(_with_models(src.replace(old, new), sms=2))
    quick = GateOptions(backend="emu", timeout_s=40)  # a hang is told after 5 CPU-seconds, not 15
    r = gate(tmp_path / "k.cu", _model_workload(tmp_path), quick, use_cache=False)
    assert not r.accepted and r.category in ("timeout", "mismatch", "nondeterministic"), (
        f"{r.category}: {r.message}"
    )


def test_the_gated_variant_is_the_fastest_correct_one() -> None:
    key = bench.shape_key(bench.TIME_SHAPES[0])
    rows = [
        bench.Outcome("cublas", "ok", times_ms={key: 0.1}),  # no source: never gated
        bench.Outcome("wgmma", "ok", source="k.cu", times_ms={key: 0.3}),
        bench.Outcome("wgmma_c2", "ok", source="k.cu", defines=["KL_CLUSTER=2"], times_ms={key: 0.2}),
        bench.Outcome("wgmma_fast_but_wrong", "wrong", source="k.cu", times_ms={key: 0.05}),
        bench.Outcome("mma_sync", "ok", source="e.cu", times_ms={key: 0.15}),
    ]
    assert bench.fastest_correct(rows, prefix="wgmma").name == "wgmma_c2"
    assert bench.fastest_correct(rows).name == "mma_sync"
    assert bench.fastest_correct(rows[:1]) is None


def test_save_writes_the_gated_file_with_its_macros_first(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text("// kernel\n")
    key = bench.shape_key(bench.TIME_SHAPES[0])
    rows = [bench.Outcome("wgmma_c2", "ok", source=str(src), defines=["KL_CLUSTER=2"], times_ms={key: 0.2})]
    args = argparse.Namespace(out=tmp_path, gate_prefix="wgmma", gate_file=tmp_path / "gated.cu")
    bench.save(rows, args)
    assert (tmp_path / "gated.cu").read_text() == "#define KL_CLUSTER 2\n// kernel\n"
    assert json.loads((tmp_path / "bench.json").read_text())[0]["defines"] == ["KL_CLUSTER=2"]
    assert (tmp_path / "table.md").read_text().startswith("| variant |")
