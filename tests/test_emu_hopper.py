"""Hopper on the CPU emulator (gates/emu/ptx_hopper.py, runtime/src/klemu_hopper.cpp): a TMA kernel
written here in the idioms of other authors (a PTX branch loop around try_wait, elect.sync, a
tiled bulk store, cudaLaunchKernelEx, the encoder reached through the runtime's driver entry point)
runs and is right, and each way of getting the asynchronous protocol wrong is caught: a read before
the phase completes reads poison, a wrong transaction count or an uninitialised barrier never
completes, a map the driver would refuse leaves the output unwritten, clusters stay unsupported;
stmatrix stores fragments in ldmatrix's layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.gates.backend import GateOptions
from klineage.gates.emu.rewrite import translate
from klineage.gates.gate import gate
from tests.conftest import REPO

FOLDER = REPO / "tests" / "kernels" / "emu" / "tma_scale"
GOOD = (FOLDER / "good.cu").read_text()


def _gate(tmp_path: Path, text: str):
    (tmp_path / "k.cu").write_text(text)
    return gate(tmp_path / "k.cu", FOLDER, GateOptions(backend="emu"), use_cache=False)


def _mutant(old: str, new: str) -> str:
    assert GOOD.count(old) == 1, old
    return GOOD.replace(old, new)


def test_a_tma_kernel_in_another_idiom_runs_and_is_right(tmp_path: Path) -> None:
    r = _gate(tmp_path, GOOD)
    assert r.accepted, f"{r.category}: {r.message}"


@pytest.mark.parametrize(
    ("old", "new", "categories", "words"),
    [
        # reads the tile before the copy's phase completes: the copy's bytes are poison until then
        ("    wait_phase(bar, 0);\n", "", ("mismatch", "nondeterministic"), ""),
        # waits on the parity of the phase before the first, which a fresh barrier counts as complete
        # (or, once the copy has landed, on a phase that never comes)
        (
            "    wait_phase(bar, 0);\n",
            "    wait_phase(bar, 1);\n",
            ("mismatch", "nondeterministic", "crash"),
            "",
        ),
        # expects half the bytes the copy brings: the count never returns to zero
        ('"r"(bar), "r"(kBytes) : "memory"', '"r"(bar), "r"(kBytes / 2) : "memory"', ("crash",), "deadlock"),
        # the barrier is used without its init
        (
            'asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(1) : "memory");',
            "",
            ("crash",),
            "before mbarrier.init",
        ),
        # a row stride that is not a multiple of 16 bytes: the encoder refuses the map, out is never written
        (
            "const cuuint64_t strides[1] = {(cuuint64_t)N * 4};",
            "const cuuint64_t strides[1] = {(cuuint64_t)N * 4 + 4};",
            ("unwritten_output", "mismatch"),
            "",
        ),
        # clusters of two blocks: blocks that may wait on each other cannot run one after another
        (
            "    cfg.stream = stream;\n",
            "    cfg.stream = stream;\n    cudaLaunchAttribute a[1];\n    a[0].id = cudaLaunchAttributeClusterDimension;\n"
            "    a[0].val.clusterDim.x = 2;\n    a[0].val.clusterDim.y = 1;\n    a[0].val.clusterDim.z = 1;\n"
            "    cfg.attrs = a;\n    cfg.numAttrs = 1;\n",
            ("unsupported",),
            "clusters of 2 x 1 x 1",
        ),
    ],
    ids=["no-wait", "wrong-parity", "short-expect-tx", "no-init", "bad-stride", "cluster-launch"],
)
def test_each_protocol_error_is_caught(
    tmp_path: Path, old: str, new: str, categories: tuple[str, ...], words: str
) -> None:
    r = _gate(tmp_path, _mutant(old, new))
    assert not r.accepted and r.category in categories, f"{r.category}: {r.message}"
    assert words in r.message, r.message


def test_a_branch_loop_gets_labels_of_its_own_at_every_expansion() -> None:
    """Two expansions of the same wait in one function: GNU local labels keep them apart."""
    src = GOOD.replace("    wait_phase(bar, 0);\n", "    wait_phase(bar, 0);\n    wait_phase(bar, 0);\n")
    out = translate(src, "k.cu").text
    assert out.count("__label__ DONE, WAIT;") == 1  # one asm statement, expanded where it is called
    assert "goto WAIT;" in out and "if (_t_ready) { goto DONE; }" in out


@pytest.mark.parametrize(
    ("asm", "words"),
    [
        # run-time operands (ptxas refuses such immediates before any run)
        ('asm volatile("bar.sync %0, %1;" :: "r"(1), "r"(blockDim.x - 80));', "among 48 threads"),
        ('asm volatile("bar.sync %0, %1;" :: "r"(blockDim.x / 8), "r"(64));', "named barrier 16"),
    ],
)
def test_named_barrier_misuse_is_a_crash(tmp_path: Path, asm: str, words: str) -> None:
    r = _gate(tmp_path, _mutant("    wait_phase(bar, 0);\n", f"    wait_phase(bar, 0);\n    {asm}\n"))
    assert r.category == "crash" and words in r.message, f"{r.category}: {r.message}"


STMATRIX = REPO / "tests" / "kernels" / "emu" / "scale_bf16"


@pytest.mark.parametrize(("defines", "passes"), [("", True), ("#define KL_TRANS 1\n", True), ("swap", False)])
def test_stmatrix_writes_the_ldmatrix_layout_back(tmp_path: Path, defines: str, passes: bool) -> None:
    """Fragments in ldmatrix's layout (or its transpose, with .trans) land in row order; the transposed
    store of untransposed fragments does not."""
    text = (STMATRIX / "stmatrix.cu").read_text()
    if defines == "swap":
        assert text.count("#if KL_TRANS\n") == 1
        text = "#define KL_TRANS 1\n" + text.replace("#if KL_TRANS\n", "#if !KL_TRANS\n")
    else:
        text = defines + text
    (tmp_path / "k.cu").write_text(text)
    r = gate(tmp_path / "k.cu", STMATRIX, GateOptions(backend="emu"), use_cache=False)
    assert r.accepted == passes, f"{r.category}: {r.message}"
    if not passes:
        assert r.category == "mismatch", f"{r.category}: {r.message}"


def test_bar_sync_0_is_the_block_barrier(tmp_path: Path) -> None:
    """`bar.sync 0` (no count) is barrier 0, __syncthreads' own: odd threads at one and even threads at
    the other meet, as on the GPU."""
    text = _mutant(
        "    __syncthreads();\n    if (threadIdx.x < 32",
        '    if (threadIdx.x % 2) asm volatile("bar.sync 0;" ::: "memory");\n'
        "    else __syncthreads();\n    if (threadIdx.x < 32",
    )
    r = _gate(tmp_path, text)
    assert r.accepted, f"{r.category}: {r.message}"
    assert '"bar.sync 0"' in translate(text, "k.cu").text
