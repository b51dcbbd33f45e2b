"""The memory-bound expert corpus (expert_kernels/, issue 6): every workload spec is valid and
keeps the corpus rules, and every kernel's launcher takes the workload's arguments in order."""

from __future__ import annotations

import math
import re

import pytest
import torch

from klineage import Tensor, load_workload
from klineage.corpus import MEMORY_BOUND, corpus_dir
from klineage.workload import DEFAULT_TOLERANCES

CORPUS = corpus_dir()
WORKLOADS = MEMORY_BOUND
L2_BYTES = 60 * 2**20
EMU_MAX_ELEMENTS = 1 << 16
_LAUNCH = re.compile(r'extern\s+"C"\s+void\s+launch\s*\(([^)]*)\)', re.S)


def _params(source: str) -> list[str]:
    m = _LAUNCH.search(source)
    assert m, 'no extern "C" void launch(...)'
    return [re.split(r"[\s*&]+", p.strip())[-1] for p in m.group(1).split(",")]


@pytest.mark.parametrize("name", WORKLOADS)
def test_workload_spec(name: str) -> None:
    wl = load_workload(CORPUS / name)
    assert wl.name == name
    assert wl.vendor is not None
    assert len(wl.shape_set("test")) >= 3
    for b in wl.shape_set("emu"):
        for t in wl.tensors:
            assert math.prod(wl.tensor_shape(t, b)) <= 2 * EMU_MAX_ELEMENTS, (t.name, b)
    bench = wl.shape_set("bench")
    assert bench and wl.bytes_moved(bench[0]) >= 2 * L2_BYTES
    # no tolerance looser than torch's default for its dtype
    for t in wl.outputs:
        tol, default = wl.tolerance_for(t), DEFAULT_TOLERANCES[t.dtype]
        assert tol.atol <= default.atol and tol.rtol <= default.rtol, t.name


@pytest.mark.parametrize("name", WORKLOADS)
def test_test_shapes_include_ragged_sizes(name: str) -> None:
    """At least one test shape has a dimension that is odd (no tile or vector width divides it)."""
    wl = load_workload(CORPUS / name)
    assert any(any(v % 2 == 1 and v > 1 for v in b.values()) for b in wl.shape_set("test"))


@pytest.mark.parametrize("name", WORKLOADS)
@pytest.mark.parametrize("variant", ["expert", "naive"])
def test_launcher_arguments_follow_the_workload(name: str, variant: str) -> None:
    wl = load_workload(CORPUS / name)
    params = _params((CORPUS / name / f"{variant}.cu").read_text())
    assert params == [a.name for a in wl.args] + ["stream"]


@pytest.mark.parametrize("name", WORKLOADS)
def test_reference_runs_on_the_smallest_test_shape(name: str) -> None:
    wl = load_workload(CORPUS / name)
    b = min(wl.shape_set("test"), key=lambda s: math.prod(s.values()))
    out = wl.run_reference(wl.make_inputs(b, 0))
    for t in wl.outputs:
        assert isinstance(t, Tensor)
        assert tuple(out[t.name].shape) == wl.tensor_shape(t, b)
        assert out[t.name].dtype == t.torch_dtype
        assert not torch.isnan(out[t.name].double()).any()


def test_topk_reference_breaks_ties_by_smaller_index() -> None:
    wl = load_workload(CORPUS / "topk")
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0, 3.0]])
    out = wl.reference(x=x, M=1, N=5, K=4)
    assert out["indices"].tolist() == [[1, 2, 4, 3]]
    assert out["values"].tolist() == [[3.0, 3.0, 3.0, 2.0]]


def test_the_corpus_lists_name_every_folder_once() -> None:
    """klineage.corpus is the one list the benchmarks and tests use: it must match the folders."""
    from klineage.corpus import COMPUTE_BOUND

    folders = {
        p.parent.name for p in corpus_dir().glob("*/workload.py") if (p.parent / "expert.cu").is_file()
    }
    listed = MEMORY_BOUND + COMPUTE_BOUND
    assert len(listed) == len(set(listed))
    assert set(listed) == folders


@pytest.mark.parametrize(
    "folder", sorted({p.parent.parent.name for p in corpus_dir().glob("*/variants/*.cu")})
)
def test_a_variants_folder_is_no_workload_of_the_corpus(folder: str) -> None:
    """Expert variants (knob files, Hopper forms, earlier designs) sit beside their expert; mining
    and the materializer's leave-one-out must not take them for workloads."""
    from klineage.walker import find_workloads

    variants = corpus_dir() / folder / "variants"
    assert variants.is_dir() and variants not in find_workloads([corpus_dir()])
