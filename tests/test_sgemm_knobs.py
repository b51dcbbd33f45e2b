"""The sgemm expert's knob file (expert_kernels/sgemm/variants/expert_knobs.cu, issue 25): without
any define it is the expert (the same PTX up to virtual register names, so the GPU sweep's baseline
is the corpus kernel), a define does change the build, and knob paths the GPU sweep times pass the
emulator's gate with the large config forced onto shapes that cover several tiles, M, N and K tails,
the scalar path and a cp.async ring that wraps."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from tests.conftest import REPO, define_lines, with_emu_shapes

SGEMM = REPO / "expert_kernels" / "sgemm"
KNOBS = SGEMM / "variants" / "expert_knobs.cu"

#: 2 x 2 tiles on the scalar path (K = 67: 5 slices of 16, 9 of 8); 3 x 3 tiles (128 x 128) on the
#: 128-bit path with M, N and K tails (K = 100: 7 slices, so a three-stage ring wraps twice)
TILE_SHAPES = '[{"M": 131, "N": 135, "K": 67}, {"M": 300, "N": 264, "K": 100}]'


def _ptx(path: Path, tmp_path: Path, defines: tuple[str, ...] = ()) -> str:
    """The file's PTX for sm_90a with the kernel names' file-specific prefix and the virtual
    registers renamed in order of first use, so that two sources of one kernel compare equal."""
    out = tmp_path / f"{path.stem}.ptx"
    cmd = ["nvcc", "-O3", "-std=c++17", "-arch=sm_90a", "-ptx", *(f"-D{d}" for d in defines)]
    proc = subprocess.run([*cmd, "-o", str(out), str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    text = re.sub(r"_ZZ?N\d+_GLOBAL__N__[0-9a-f]+_\d+_\w+?_cu_", "K", out.read_text())
    text = re.sub(r"ILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi2ELb", r"ILi\1ELi\2ELi\3ELi\4ELb", text)  # MINB = 2
    text = "\n".join(line for line in text.splitlines() if not line.startswith("//"))
    return ".entry".join(_renamed(kernel) for kernel in text.split(".entry"))


def _renamed(kernel: str) -> str:
    """One kernel's PTX with its virtual registers numbered in order of first use."""
    names: dict[str, str] = {}

    def rename(m: re.Match[str]) -> str:
        return names.setdefault(m.group(0), f"%{m.group(1)}#{len(names)}")

    return re.sub(r"%(rd|r|f|p|fd)\d+", rename, kernel)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_without_defines_the_knob_file_is_the_expert(tmp_path: Path) -> None:
    expert = _ptx(SGEMM / "expert.cu", tmp_path)
    assert _ptx(KNOBS, tmp_path) == expert
    assert _ptx(KNOBS, tmp_path, ("SGEMM_BK=8",)) != expert  # the comparison sees a knob


@pytest.mark.parametrize(
    "defines",
    [
        "SGEMM_A_TRANS=0,SGEMM_STAGES=3,SGEMM_SWIZZLE=2",
        "SGEMM_BN=256,SGEMM_WN=64,SGEMM_MIN_BLOCKS=1,SGEMM_BK=8",
    ],
    ids=["cp-async-ring-untransposed-swizzled", "tile-128x256-thread-8x16-bk8"],
)
def test_knob_variants_pass_the_emulator_gate(tmp_path: Path, defines: str) -> None:
    (tmp_path / "k.cu").write_text(define_lines("SGEMM_BIG_ALWAYS=1," + defines) + KNOBS.read_text())
    r = gate(
        tmp_path / "k.cu",
        with_emu_shapes(SGEMM, TILE_SHAPES, tmp_path / "wl"),
        GateOptions(backend="emu"),
        use_cache=False,
    )
    assert r.accepted, f"{r.category}: {r.message}"
