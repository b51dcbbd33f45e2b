"""flash_fusion: a three-phase attention (scores into a scratch, row softmax, weighted sum) fused
into one online-softmax kernel over key tiles, read on structure in two idioms; the fused form read
back into three phases (the attention_gqa expert's lineage step)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from deopt_parallel_checks import DATA, apply_forward, assert_passes
from hypothesis import given, settings
from hypothesis import strategies as st

from klineage.deopt.flash_fusion import FlashFusion
from klineage.deopt.registry import get_operator
from klineage.source.model import CudaSource

OP = FlashFusion()
ROOT = Path(__file__).resolve().parents[1]
ATTN = ROOT / "expert_kernels" / "attention_fwd"
GQA = ROOT / "expert_kernels" / "attention_gqa"
FP32 = DATA / "flash_fusion" / "fp32_heads"


def _fuse(src: CudaSource) -> CudaSource:
    return apply_forward(OP, src)


def _launches(text: str) -> list[str]:
    return re.findall(r"(\w+)\s*<<<", text)


def test_attention_fwd_naive_fuses_and_passes_the_emu_gate(tmp_path: Path) -> None:
    out = _fuse(CudaSource.from_file(ATTN / "naive.cu"))
    assert _launches(out.text) == ["attn_scores_flash"]  # one kernel instead of three
    launch = out.text[out.text.index("attn_scores_flash<<<") :].split(";")[0]
    assert ", P" not in launch  # the scratch is no longer passed
    # a warp skips P V on masked tiles
    assert "__any_sync(0xffffffffu, kl_mt[0] != -INFINITY || kl_mt[1] != -INFINITY)" in out.text
    assert "kl_m[kl_i] = kl_mn;" in out.text  # running max per query row
    assert_passes(out.text, ATTN, tmp_path, "attn_flash.cu")  # both head dims, both masks


def test_another_idiom_with_tiles_spanning_heads_passes_the_emu_gate(tmp_path: Path) -> None:
    # size_t indices, direct scratch indexing, __expf, value width != key width, 37 rows per head
    out = _fuse(CudaSource.from_file(FP32 / "naive.cu"))
    assert _launches(out.text) == ["qk_flash"]
    assert "__expf(kl_s - kl_mn)" in out.text  # the row kernel's exp
    assert_passes(out.text, FP32, tmp_path, "fp32_flash.cu")


def test_fused_reads_back_into_three_phases_and_fuses_again() -> None:
    fused = _fuse(CudaSource.from_file(ATTN / "naive.cu"))
    (site,) = OP.find(fused)
    assert site.anchor.function == "launch"
    back = OP.remove(fused, site)
    assert len(_launches(back.text)) == 3 and "P);" in back.text  # the scratch is written again
    again = _fuse(back)
    assert len(OP.find(again)) == 1 and not OP.find(back)


def test_gqa_expert_unfuses_to_the_three_phase_form() -> None:
    expert = CudaSource.from_file(GQA / "expert.cu")
    ldg = get_operator("ldg")  # the walker takes __ldg out first (specialized_instruction)
    expert = ldg.remove(expert, ldg.find(expert)[0])
    (site,) = OP.find(expert)
    assert all(f.holds for f in OP.removal_preconditions(expert, site))
    back = OP.remove(expert, site)
    assert [n.split("_")[-1] for n in _launches(back.text)] == ["scores", "softmax", "weighted"]
    assert len(OP.find_forward(back)) == 1


def test_attention_fwd_ptx_expert_is_not_taken_apart() -> None:
    # its exponentials are inline-PTX ex2 and its MMAs PTX: no online softmax this operator reads,
    # so the walk takes no flash_fusion step there (a general un-fusing is future work)
    assert OP.find(CudaSource.from_file(ATTN / "expert.cu")) == []


@pytest.mark.parametrize(
    "change",
    [
        {"row[c] = __expf(row[c] - top) / z;": "row[c] = __expf(row[c] - top);"},  # not normalized
        {"s[t] = dot * alpha;": "s[t + 1] = dot * alpha;"},  # not stored at the thread's element
        {"out += s[r * n + j] * v": "out += s[j] * v"},  # weight not the row's element
        {"const int col = t % n;": "const int col = t % d;", "[(head * n + col)": "[(head * n + col % n)"},
        {"dot += q[r * d + x] * k[": "dot += q[r * d + x] + k["},  # not a product
    ],
    ids=["no_normalization", "shifted_store", "weight_not_row", "key_not_mod_length", "sum_not_product"],
)
def test_no_site_when_a_phase_is_not_what_the_fusion_needs(change: dict[str, str]) -> None:
    text = (FP32 / "naive.cu").read_text()
    assert len(OP.find_forward(CudaSource.from_text(text, "k.cu"))) == 1
    for a, b in change.items():
        assert a in text
        text = text.replace(a, b)
    assert OP.find_forward(CudaSource.from_text(text, "k.cu")) == []


_NAMES = ("qk", "rownorm", "pv", "dot", "col", "head", "top", "z", "out")
_IDENT = st.from_regex(r"[a-z][a-z0-9]{2,7}", fullmatch=True)


@settings(max_examples=15, deadline=None)
@given(st.lists(_IDENT, min_size=len(_NAMES), max_size=len(_NAMES), unique=True))
def test_names_do_not_matter(names: list[str]) -> None:
    text = (FP32 / "naive.cu").read_text()
    if any(re.search(rf"\b{n}\b", text) for n in names):
        return  # a fresh name only
    for old, new in zip(_NAMES, names, strict=True):
        text = re.sub(rf"\b{old}\b", new, text)
    out = _fuse(CudaSource.from_text(text, "k.cu"))
    assert _launches(out.text) == [f"{names[0]}_flash"]
    assert len(OP.find(out)) == 1


FP16 = DATA / "flash_fusion" / "fp16_heads"


@pytest.mark.parametrize(
    ("folder", "elem", "convert"),
    [
        (FP16, "f16", "__half_as_ushort(__float2half_rn"),
        (DATA / "flash_fusion" / "bf16_heads", "bf16", "__bfloat16_as_ushort(__float2bfloat16_rn"),
    ],
    ids=["fp16", "bf16"],
)
def test_16bit_attention_fuses_on_tensor_cores_and_passes_the_emu_gate(
    tmp_path: Path, folder: Path, elem: str, convert: str
) -> None:
    # odd rows per head (tiles span heads), keys not a multiple of the tile, head sizes 24 and 48
    out = _fuse(CudaSource.from_file(folder / "naive.cu"))
    assert _launches(out.text) == ["qk_flash"]
    # Q K^T (Q from registers, or shared memory past 128 columns); P V
    assert out.text.count(f"mma.sync.aligned.m16n8k16.row.col.f32.{elem}.{elem}.f32") == 6
    assert f"kl_pa[kl_k][0] = ((unsigned){convert}(kl_s[2 * kl_k][0]))" in out.text  # P in 16-bit registers
    assert "kl_m[kl_i] = kl_mn;" in out.text  # the online softmax stays fp32
    assert_passes(out.text, folder, tmp_path, f"{elem}_flash.cu")


def test_attention_fwd_naive_fuses_on_tensor_cores() -> None:
    out = _fuse(CudaSource.from_file(ATTN / "naive.cu"))
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in out.text and "wmma" not in out.text


def test_fp32_attention_keeps_the_simt_kernel() -> None:
    out = _fuse(CudaSource.from_file(FP32 / "naive.cu"))
    assert "wmma" not in out.text and "extern __shared__ float kl_smem[];" in out.text


def test_a_fixed_head_dim_not_a_multiple_of_16_refuses_with_a_reason() -> None:
    text = (
        (FP16 / "naive.cu")
        .read_text()
        .replace("(Q, K, S, BH, M, N, D, alpha)", "(Q, K, S, BH, M, N, 40, alpha)")
    )
    src = CudaSource.from_text(text, "k.cu")
    (site,) = OP.find_forward(src)
    facts = {f.name: f for f in OP.preconditions(src, site)}
    assert not facts["head_dim_16"].holds and "multiples of 16" in facts["head_dim_16"].reason
    assert facts["three_phase"].holds
