"""KernelBench and FlashInfer-Bench as they are: value domains, sizes scaled from the problem's own
constants, the forms real solutions take, whole suites, and upstream cards kept intact. Every
problem, definition and card here is written for these tests in the suites' forms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from klineage.domains import Domain
from klineage.errors import WorkloadError
from klineage.gates.gate import gate
from klineage.interop.flashinfer import import_definition, kernel_from_solution
from klineage.interop.kernelbench import import_problem
from klineage.workload import Tensor, load_workload
from tests.conftest import REPO

DATA = REPO / "tests/data/interop"
LEVEL = DATA / "kb_level"


# ---- value domains ------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), total=st.integers(0, 200), hi=st.integers(1, 50), seed=st.integers(0, 2**31 - 1))
def test_domains_draw_inside_their_domain(n: int, total: int, hi: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    b = {"N": hi}
    ints = Domain("integers", 0, "N").draw((n, 3), torch.int64, gen, b)
    assert int(ints.min()) >= 0 and int(ints.max()) < hi
    p = Domain("softmax", dim=-1, of="uniform").draw((n, 5), torch.float32, gen, b)
    assert bool((p > 0).all()) and torch.allclose(p.sum(-1), torch.ones(n), atol=1e-5)
    u = Domain("uniform", 0, 1).draw((n,), torch.float32, gen, b)
    assert bool((u >= 0).all()) and bool((u < 1).all())
    if n >= 2 or total == 0:
        ptr = Domain("indptr", total="T").draw((n,), torch.int32, gen, {"T": total})
        assert int(ptr[0]) == 0 and int(ptr[-1]) == total and bool((ptr[1:] >= ptr[:-1]).all())
        if total >= n - 1 and n >= 2:
            assert bool((ptr[1:] > ptr[:-1]).all())  # non-empty segments when the total allows


def test_domain_problems_are_named() -> None:
    assert Domain("integers", 0, 4).problems("x", "float32") == [
        "tensor 'x': domain 'integers' needs an integer dtype, not float32"
    ]
    assert "unknown domain kind 'gauss'" in Domain("gauss").problems("x", "float32")[0]


# ---- KernelBench problems at today's sizes --------------------------------------------------------


def test_sizes_scaled_from_the_constants_and_the_own_size_kept_for_bench(tmp_path: Path) -> None:
    """4096 x 65536 floats (1 GiB) are never made on the CPU: emu and test scale the size
    constants, bench keeps them (shapes from the meta device)."""
    wl = import_problem(LEVEL / "1_RowMax.py", tmp_path / "w")
    x0 = next(t for t in wl.tensors if t.name == "x0")
    assert wl.tensor_shape(x0, wl.shapes["bench"][0]) == (4096, 65536)
    for sset in ("emu", "test"):
        for b in wl.shapes[sset]:
            assert 0 < torch.Size(wl.tensor_shape(x0, b)).numel() <= 1 << 21
    assert x0.domain == Domain("uniform", 0, 1)  # torch.rand, read from get_inputs()
    text = (tmp_path / "w/workload.py").read_text()
    assert "SIZES = " in text and "'features': 65536" in text and "Domain(kind='uniform'" in text


def test_class_indices_and_probabilities_follow_get_inputs(tmp_path: Path) -> None:
    """Signed random targets make cross entropy crash and log of negatives make KL divergence NaN:
    the gate draws what get_inputs() draws, with bounds that follow the scaled class count."""
    xent = import_problem(LEVEL / "2_CrossEntropy.py", tmp_path / "xent")
    assert next(t for t in xent.tensors if t.name == "x1").domain == Domain("integers", 0, "num_classes")
    for b in xent.shape_set("test") + xent.shape_set("emu"):
        x = xent.make_inputs(b, seed=3)
        assert int(x["x1"].min()) >= 0 and int(x["x1"].max()) < b["num_classes"] == x["x0"].shape[1]
    kl = import_problem(LEVEL / "3_KLDiv.py", tmp_path / "kl")
    b = kl.shape_set("emu")[0]
    x = kl.make_inputs(b, seed=1)
    assert torch.allclose(x["x0"].sum(-1), torch.ones(x["x0"].shape[0]), atol=1e-5) and bool(
        (x["x1"] > 0).all()
    )
    assert bool(torch.isfinite(kl.run_reference(x)["out0"]).all())


def test_sizes_tied_by_the_problem_scale_together(tmp_path: Path) -> None:
    """LayerNorm(out_channels) over the last axis works only while width == out_channels: every
    size constant is divided by one factor, so the relation survives."""
    wl = import_problem(LEVEL / "4_LayerNormLast.py", tmp_path / "w")
    for b in wl.shape_set("emu") + wl.shape_set("test"):
        assert b["width"] == b["out_channels"] < 128


def test_a_reference_failing_on_its_own_inputs_is_a_workload_problem(tmp_path: Path) -> None:
    with pytest.raises(
        WorkloadError,
        match=r"the reference fails on its own inputs at the problem's own sizes.*"
        r"same reduction dim",
    ):
        import_problem(LEVEL / "5_BrokenReference.py", tmp_path / "w")
    assert not (tmp_path / "w").exists()


# ---- KernelBench solutions in the forms they take -------------------------------------------------


def test_solution_forms_wrap_and_gate_on_emu(tmp_path: Path) -> None:
    """AT_DISPATCH, <cassert>, view, autograd.Function, x.cuda()/x.contiguous(), self.dim and
    several statements in forward: wrapped mechanically, and the kernel is right."""
    wl = import_problem(LEVEL / "1_RowMax.py", tmp_path / "w", solution=DATA / "kb_level_rowmax_solution.py")
    kernel = (tmp_path / "w/solution.cu").read_text()
    assert "row_max_cuda(klshim::wrap((void*)x0" in kernel and ", 1);" in kernel  # self.dim -> 1
    r = gate(kernel, load_workload(tmp_path / "w"), name="rowmax.cu")
    assert r.accepted, (r.category, r.message)
    assert not wl.verdict_note


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (
            (
                "        y = RowMaxFunction",
                "        for _ in range(1):\n            pass\n        y = RowMaxFunction",
            ),
            r"ModelNew.forward has a `for _ in range\(1\):` block",
        ),
        (("x.contiguous(), self.dim", "x * 2, self.dim"), r"binding argument `x \* 2` is an expression"),
        (("self.dim = dim", "self.dim = dim + 0"), r"self.dim is neither a parameter"),
    ],
    ids=["loop", "expression", "attribute"],
)
def test_a_refused_solution_names_the_construct_and_writes_nothing(
    tmp_path: Path, edit: tuple[str, str], needle: str, monkeypatch, capsys
) -> None:
    from klineage.cli import main

    text = (DATA / "kb_level_rowmax_solution.py").read_text()
    assert edit[0] in text
    sol = tmp_path / "sol.py"
    sol.write_text(text.replace(edit[0], edit[1]))
    monkeypatch.setattr(
        "sys.argv",
        [
            "klineage",
            "import",
            "kernelbench",
            str(LEVEL / "1_RowMax.py"),
            "--out",
            str(tmp_path / "w"),
            "--solution",
            str(sol),
        ],
    )
    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err
    assert e.value.code == 2 and len([ln for ln in err.splitlines() if ln.strip()]) == 1, err
    import re

    assert re.search(needle, err.replace("\n", " ")), err
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (
            (
                ("#include <cassert>", "#include <cassert>\n#define FEATURES 96"),
                ("int cols = flat.size(1);", "int cols = FEATURES;"),
            ),
            "FEATURES = 96",
        ),
        ((("for (int c = 1; c < cols; ++c)", "for (int c = 1; c < 96; ++c)"),), "loop bound c < 96"),
    ],
    ids=["define", "literal-loop-bound"],
)
def test_shape_specialised_solution_is_judged_at_the_problems_own_size(
    tmp_path: Path, edit: tuple[tuple[str, str], ...], named: str
) -> None:
    problem = tmp_path / "6_RowMaxSmall.py"
    problem.write_text(
        (LEVEL / "1_RowMax.py")
        .read_text()
        .replace("batch_size = 4096", "batch_size = 16")
        .replace("features = 65536", "features = 96")
    )
    text = (DATA / "kb_level_rowmax_solution.py").read_text()
    sol = tmp_path / "sol.py"
    for old, new in edit:
        assert old in text
        text = text.replace(old, new)
    sol.write_text(text)
    wl = import_problem(problem, tmp_path / "w", solution=sol)
    assert named in wl.verdict_note
    assert all(b == wl.shapes["bench"][0] for s in ("emu", "test") for b in wl.shapes[s])
    r = gate((tmp_path / "w/solution.cu").read_text(), load_workload(tmp_path / "w"), name="fixed.cu")
    assert r.accepted and "judged at the problem's own sizes only" in r.message, (r.category, r.message)


def test_kernelbench_suite_in_one_command(tmp_path: Path, monkeypatch, capsys) -> None:
    from klineage.cli import main

    monkeypatch.setattr(
        "sys.argv", ["klineage", "import", "kernelbench", "--suite", str(LEVEL), "--out", str(tmp_path)]
    )
    with pytest.raises(SystemExit) as e:
        main()
    out = capsys.readouterr().out
    assert e.value.code == 0, out
    assert "4 of 5 imported" in " ".join(out.split()), out
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "1_RowMax",
        "2_CrossEntropy",
        "3_KLDiv",
        "4_LayerNormLast",
    ]


# ---- FlashInfer definitions with constraints -----------------------------------------------------


def test_flashinfer_constraints_give_valid_inputs_and_the_kernel_passes(tmp_path: Path) -> None:
    wl = import_definition(DATA / "fi_paged_gather_d8.json", tmp_path / "w")
    for b in wl.shape_set("test") + wl.shape_set("emu"):
        assert b["len_indptr"] == b["batch_size"] + 1
        x = wl.make_inputs(b, seed=2)
        ptr, idx = x["kv_indptr"], x["kv_indices"]
        assert int(ptr[0]) == 0 and int(ptr[-1]) == b["num_kv_indices"] and bool((ptr[1:] >= ptr[:-1]).all())
        assert 0 <= int(idx.min()) and int(idx.max()) < b["num_pages"]
    r = gate(DATA / "fi_paged_gather_d8_naive.cu", load_workload(tmp_path / "w"), use_cache=False)
    assert r.accepted, (r.category, r.message)


def test_flashinfer_constraint_it_cannot_satisfy_is_refused(tmp_path: Path) -> None:
    d = json.loads((DATA / "fi_paged_gather_d8.json").read_text())
    d["constraints"].append("num_pages >= kv_indices.max().item() + 1")
    (tmp_path / "d.json").write_text(json.dumps(d))
    with pytest.raises(
        WorkloadError, match=r"constraint `num_pages >= kv_indices.max\(\).item\(\) \+ 1` is not one"
    ):
        import_definition(tmp_path / "d.json", tmp_path / "w")
    assert not (tmp_path / "w").exists()


def test_tvm_ffi_solution_is_named_as_such(tmp_path: Path) -> None:
    doc = {
        "name": "s",
        "definition": "paged_gather_d8",
        "spec": {"language": "cuda", "entry_point": "kernel.cu::paged_gather", "binding": "tvm-ffi"},
        "sources": [
            {
                "path": "kernel.cu",
                "content": "void paged_gather(tvm::ffi::TensorView q) {}\n"
                "TVM_FFI_DLL_EXPORT_TYPED_FUNC(paged_gather, paged_gather);\n",
            }
        ],
    }
    (tmp_path / "s.json").write_text(json.dumps(doc))
    with pytest.raises(WorkloadError, match="is a TVM-FFI function"):
        kernel_from_solution(tmp_path / "s.json")


def test_flashinfer_suite_in_one_command(tmp_path: Path, monkeypatch, capsys) -> None:
    from klineage.cli import main

    ds = tmp_path / "ds"
    (ds / "definitions/paged").mkdir(parents=True)
    (ds / "definitions/paged/paged_gather_d8.json").write_text((DATA / "fi_paged_gather_d8.json").read_text())
    bad = json.loads((DATA / "fi_paged_gather_d8.json").read_text()) | {"name": "broken"}
    bad["reference"] = bad["reference"].replace("return out", "return out / 0 * 0")  # NaN everywhere
    (ds / "definitions/paged/broken.json").write_text(json.dumps(bad))
    monkeypatch.setattr(
        "sys.argv", ["klineage", "import", "flashinfer", "--suite", str(ds), "--out", str(tmp_path / "o")]
    )
    with pytest.raises(SystemExit) as e:
        main()
    out = capsys.readouterr().out
    assert e.value.code == 0 and "1 of 2 imported" in out and "NaN" in out, out
    assert [p.name for p in (tmp_path / "o").iterdir()] == ["paged_gather_d8"]


# ---- cards -------------------------------------------------------------------------------------

UPSTREAM = """---
skill_id: vectorized-loads
intent: Load four floats at once.
preconditions:
  - "Layout: rows 16-byte aligned"
scope:
  cases: [elementwise]
  languages: [cuda]
  platforms: [nvidia-sm90a-cuda13]
---
# Overview
Wide loads cut the number of memory instructions by four.

# Precondition
Rows start on 16-byte boundaries.

# Scope
Element-wise kernels.

# Code Change Snippet
## Before
The scalar loop, one float per thread and iteration:

```cuda
y[i] = x[i] * 2.0f;
```

## After
```cuda
reinterpret_cast<float4*>(y)[i] = scale(reinterpret_cast<const float4*>(x)[i]);
```
"""


def test_upstream_card_keeps_prose_and_code() -> None:
    from klineage.cards import from_markdown, to_markdown

    s = from_markdown(UPSTREAM, "vec.md")
    assert "-y[i] = x[i] * 2.0f;" in s.carrier and "+reinterpret_cast<float4*>(y)[i]" in s.carrier
    again = to_markdown(s)
    body = UPSTREAM.split("---\n", 2)[2]
    assert body.strip() in again  # Overview, Precondition, Scope, Before/After and the prose, verbatim
    assert "Layout: rows 16-byte aligned" in again


def test_exported_card_states_general_preconditions_by_kind() -> None:
    from klineage.cards import front_matter, to_markdown
    from klineage.skills import Skill

    pre = [
        {
            "name": "no_aliasing",
            "holds": True,
            "reason": f"launch at line {n} passes distinct pointers",
            "kind": "Storage",
        }
        for n in range(17)
    ]
    pre.append(
        {"name": "fp32_accumulation", "holds": True, "reason": "acc is float at line 3", "kind": "Data types"}
    )
    s = Skill(
        skill_id="restrict", operator="restrict", intent="Mark pointers __restrict__.", preconditions=pre
    )
    fm = front_matter(s, "nvidia-sm90a-cuda13")
    assert fm["preconditions"] == ["Data types: fp32 accumulation", "Storage: no aliasing"]
    card = to_markdown(s)
    head, _, evidence = card.partition("# KLineage Evidence")
    assert "line 5" not in head and "launch at line 5 passes distinct pointers" in evidence


def test_tensor_domain_is_part_of_the_spec() -> None:
    t = Tensor("x", ("N",), "int32", domain=Domain("integers", 0, "N"))
    assert t.domain is not None and t.domain.symbols() == {"N"}


def test_a_shim_abort_says_why(tmp_path: Path) -> None:
    """A binding that returns a tensor of another shape stops in the shim; the verdict names
    the shim's reason instead of a bare SIGABRT whose cause sits in an archived stderr."""
    text = (DATA / "kb_level_rowmax_solution.py").read_text()
    sol = tmp_path / "sol.py"
    sol.write_text(text.replace("torch::empty({rows}, x.options())", "torch::empty({rows + 1}, x.options())"))
    import_problem(LEVEL / "1_RowMax.py", tmp_path / "w", solution=sol)
    r = gate((tmp_path / "w/solution.cu").read_text(), load_workload(tmp_path / "w"), name="bad.cu")
    assert r.category == "crash" and "another size or dtype than the workload" in r.message, (
        r.category,
        r.message,
    )


def test_standard_names_torch_extension_h_brings_compile_through_the_shim(tmp_path: Path) -> None:
    """A binding that throws std::runtime_error / std::invalid_argument and reads
    std::numeric_limits with only <torch/extension.h> included (which brings <stdexcept> and
    <limits>) compiles against the shim as it does against torch (l1 p49 gpt-o1 was a false
    compile_error)."""
    text = (DATA / "kb_level_rowmax_solution.py").read_text()
    sol = tmp_path / "sol.py"
    sol.write_text(
        text.replace("#include <cassert>\n", "")
        .replace(
            "    assert(dim == 1);",
            '    if (dim != 1) throw std::runtime_error("dim " + std::to_string(dim));',
        )
        .replace(
            "    int rows = flat.size(0);",
            '    if (flat.size(0) > std::numeric_limits<int>::max()) throw std::invalid_argument("rows");\n    int rows = flat.size(0);',
        )
    )
    import_problem(LEVEL / "1_RowMax.py", tmp_path / "w", solution=sol)
    r = gate((tmp_path / "w/solution.cu").read_text(), load_workload(tmp_path / "w"), name="std.cu")
    assert r.accepted, (r.category, r.message)
