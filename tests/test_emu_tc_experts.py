"""The inline-PTX experts of the compute-bound corpus (expert_kernels/gemm_bf16, attention_fwd:
mma.sync + ldmatrix + cp.async) pass the emu gate as written, at their emu shapes (issue 11).
Skipped while an expert is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate

CORPUS = Path(__file__).resolve().parent.parent / "expert_kernels"
CASES = [("gemm_bf16", ""), ("gemm_bf16", "if (big_tiles >= 8LL * sms)"), ("attention_fwd", "")]


@pytest.mark.parametrize(("name", "force"), CASES, ids=["gemm_bf16", "gemm_bf16-128x256", "attention_fwd"])
def test_ptx_expert_passes_the_emu_gate(tmp_path: Path, name: str, force: str) -> None:
    src_path = CORPUS / name / "expert.cu"
    if not src_path.exists():
        pytest.skip(f"{src_path} not written yet")
    src = src_path.read_text()
    if force:  # the large-tile configuration, which only GPU-filling shapes select
        if src.count(force) != 1:
            pytest.skip(f"{name}: launcher changed ({force!r} not found)")
        src = src.replace(force, "if (true)")
    (tmp_path / "expert.cu").write_text(src)
    r = gate(
        tmp_path / "expert.cu", CORPUS / name, GateOptions(backend="emu", timeout_s=300.0), use_cache=False
    )
    assert r.accepted and r.category == "ok", f"{r.category}: {r.message}"
