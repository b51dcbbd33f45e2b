"""The curriculum tries a matching tensor-core skill before the FMA tiling skills (issue 25).

Both rewrite a naive GEMM loop whole and both lineages put their step at the naive end, so only
a rule on structure orders them: the tensor-core skill matches only a loop of 16-bit factors
summed in float, and there the tiling skills wait for it. On fp32 operands it does not match and
the tiling skills keep their place.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from klineage.materialize.curriculum import order_curriculum
from klineage.materialize.matching import Target, match_skills
from klineage.source.model import CudaSource
from tests.test_materialize_helpers import make_skill

ROOT = Path(__file__).resolve().parents[1]


def _skills() -> list:
    """gemm_tiling earliest in its lineage (it would come first by position alone)."""
    tiling = make_skill("gemm_tiling", 1, skill_id="t", dtypes=["bfloat16", "float16", "float32"])
    tensor = make_skill("tensor_core", 6, skill_id="tc", dtypes=["bfloat16", "float16", "float32"])
    restrict = make_skill("restrict", 3, skill_id="re", dtypes=["bfloat16", "float16", "float32"])
    return [replace(s, scope={**s.scope, "workloads": ["elsewhere"]}) for s in (tiling, tensor, restrict)]


def _order(workload: str, dtype: str) -> list[str]:
    src = CudaSource.from_text((ROOT / "expert_kernels" / workload / "naive.cu").read_text(), "naive.cu")
    report = match_skills(src, _skills(), Target(workload, (dtype,), "cpu-emulator"))
    return [m.skill.skill_id for m in order_curriculum(report.applicable)]


def test_a_16_bit_gemm_loop_takes_tensor_cores_before_fma_tiling() -> None:
    order = _order("gemm_bf16", "bfloat16")
    assert "tc" in order and order.index("tc") < order.index("t")
    assert order.index("re") < order.index("tc")  # skills of other categories keep their position


def test_an_fp32_gemm_loop_keeps_the_position_order() -> None:
    order = _order("sgemm", "float32")
    assert "tc" not in order  # fp32 factors: the tensor-core skill does not match
    assert order.index("t") < order.index("re")


def test_once_tensor_cores_were_applied_position_decides_again() -> None:
    src = CudaSource.from_text((ROOT / "expert_kernels/gemm_bf16/naive.cu").read_text(), "naive.cu")
    report = match_skills(src, _skills(), Target("gemm_bf16", ("bfloat16",), "cpu-emulator"))
    order = [m.skill.skill_id for m in order_curriculum(report.applicable, ["tensor_core"])]
    assert order.index("t") < order.index("tc")
