"""Interop: KernelBench problems/solutions and FlashInfer-Bench definitions in, solutions out,
round trips, and one clear line for every kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from klineage.cards import CardError, from_markdown
from klineage.errors import WorkloadError
from klineage.gates.gate import gate
from klineage.interop.flashinfer import export_solution, import_definition, kernel_from_solution
from klineage.interop.kernelbench import import_problem
from klineage.interop.solution import WrapError, export_model_new, wrap_solution
from klineage.workload import load_workload
from tests.conftest import REPO

DATA = REPO / "tests/data/interop"


def _signature(folder: Path) -> tuple:
    wl = load_workload(folder)
    return wl.name, wl.c_signature(), {k: list(v) for k, v in wl.shapes.items()}


@pytest.mark.parametrize("name", ["add", "rowsum", "linear"])
def test_kernelbench_problem_and_solution_gate_on_emu(name: str, tmp_path: Path) -> None:
    out = tmp_path / name
    wl = import_problem(DATA / f"kb_{name}_problem.py", out)
    kernel = wrap_solution(DATA / f"kb_{name}_solution.py", wl)
    r = gate(kernel, load_workload(out), name=f"{name}.cu")
    assert r.accepted, (r.category, r.message)
    # export back and import again: the same workload and the same kernel
    model_new = export_model_new(kernel, wl, out / "problem.py")
    compile(model_new, "ModelNew.py", "exec")
    # load_inline compiles with torch's own headers: the stand-in shim (its own torch::Tensor)
    # must not travel, the adapter on real tensors does (the H200 run caught the collision)
    assert "namespace torch {" not in model_new and "klshim::wrap" in model_new
    assert "torch::from_blob" in model_new
    (tmp_path / "ModelNew.py").write_text(model_new)
    again = tmp_path / "again"
    wl2 = import_problem(out / "problem.py", again, name=wl.name)
    assert wrap_solution(tmp_path / "ModelNew.py", wl2) == kernel
    assert _signature(again) == _signature(out)


def test_linear_parameters_are_seeded_inputs(tmp_path: Path) -> None:
    wl = import_problem(DATA / "kb_linear_problem.py", tmp_path / "lin")
    names = [a.name for a in wl.args]
    assert names[:3] == ["x0", "p_linear_weight", "p_linear_bias"]
    a = wl.make_inputs(wl.shape_set("test")[0], seed=0)["p_linear_weight"]
    b = wl.make_inputs(wl.shape_set("test")[0], seed=1)["p_linear_weight"]
    assert a.equal(b)  # weights are the model's, the same for every seed


def test_flashinfer_definition_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "fi"
    wl = import_definition(DATA / "fi_rms_h256.json", out, DATA / "fi_rms_h256.jsonl")
    assert wl.c_signature() == (
        'extern "C" void launch(const __nv_bfloat16* x, const __nv_bfloat16* weight, __nv_bfloat16* y, '
        "long long rows, cudaStream_t stream)"
    )
    assert {"rows": 3000} in wl.shapes["bench"]
    kernel = (DATA / "fi_rms_h256_naive.cu").read_text()
    r = gate(kernel, load_workload(out), name="naive.cu")
    assert r.accepted, (r.category, r.message)
    sol = tmp_path / "sol.json"
    sol.write_text(json.dumps(export_solution(kernel, wl, "naive")))
    doc = json.loads(sol.read_text())
    assert doc["spec"]["language"] == "cuda" and doc["spec"]["entry_point"] == "kernel.cu::launch"
    assert kernel_from_solution(sol) == kernel


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "import torch\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n",
            "defines no Model",
        ),
        (
            "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n"
            "def get_inputs():\n    return [torch.randn(4, device='cuda')]\ndef get_init_inputs():\n    return []\n",
            r"get_inputs\(\) raised.*needs a GPU",
        ),
        ("raise ImportError('no such thing')\n", "the problem file raised ImportError"),
    ],
)
def test_bad_problem_files(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(WorkloadError, match=needle):
        import_problem(_write(tmp_path, "p.py", text), tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written half


def test_solution_without_cuda(tmp_path: Path) -> None:
    wl = import_problem(DATA / "kb_add_problem.py", tmp_path / "w")
    sol = _write(
        tmp_path,
        "s.py",
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n        return a + b\n",
    )
    with pytest.raises(WrapError, match="no CUDA string"):
        wrap_solution(sol, wl)


def test_solution_that_cannot_be_wrapped_says_why(tmp_path: Path) -> None:
    wl = import_problem(DATA / "kb_add_problem.py", tmp_path / "w")
    text = (
        (DATA / "kb_add_solution.py")
        .read_text()
        .replace(
            "return self.elementwise_add.elementwise_add_cuda(a, b)",
            "return self.elementwise_add.elementwise_add_cuda(a * 2, b)",
        )
    )
    with pytest.raises(WrapError, match=r"binding argument `a \* 2` is an expression"):
        wrap_solution(_write(tmp_path, "s.py", text), wl)


def test_definition_with_unused_axis(tmp_path: Path) -> None:
    d = json.loads((DATA / "fi_rms_h256.json").read_text())
    d["axes"]["spare"] = {"type": "var"}
    with pytest.raises(WorkloadError, match="axis spare is used by no input or output"):
        import_definition(_write(tmp_path, "d.json", json.dumps(d)), tmp_path / "out")


def test_card_without_front_matter() -> None:
    with pytest.raises(CardError, match="no YAML front matter"):
        from_markdown("# Overview\nno front matter here\n", "card.md")


def test_published_style_card_imports_unverified() -> None:
    card = """---
skill_id: warp-shuffle-row-reduce
intent: Reduce each row with warp shuffles instead of shared memory.
preconditions:
  - "Data types: fp32 accumulation"
  - "Hardware: 32-lane warps"
scope:
  cases: [softmax, rmsnorm]
  languages: [cuda]
  platforms: [nvidia-sm90a-cuda13]
---
# Overview
Use shuffles.
## Example configuration
rows of 4096
# Precondition
fp32
# Scope
rows
# Code Change Snippet
## Before
```cuda
smem[t] += smem[t + s];
```
## After
```cuda
v += __shfl_xor_sync(0xffffffff, v, s);
```
"""
    s = from_markdown(card, "warp.md")
    assert s.origin == "imported" and s.verification["status"] == "unverified"
    assert [p["kind"] for p in s.preconditions] == ["Data types", "Hardware"]
    assert "+v += __shfl_xor_sync" in s.carrier


# ---- FlashInfer-Trace workloads with safetensors inputs ----------------------------------------


def _trace_dataset(root: Path, **tensors: object) -> Path:
    """A FlashInfer-Trace dataset: definitions/, workloads/ and the recorded record's tensors under
    blob/ (x: 5 rows, row 2 all zeros; weight); keyword arguments replace tensors (None drops one)."""
    import torch
    from safetensors.torch import save_file

    (root / "definitions").mkdir(parents=True)
    (root / "workloads").mkdir()
    (root / "definitions/rms_h256.json").write_text((DATA / "fi_rms_h256.json").read_text())
    (root / "workloads/rms_h256.jsonl").write_text((DATA / "fi_rms_h256_recorded.jsonl").read_text())
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(5, 256, generator=gen).to(torch.bfloat16)
    x[2] = 0
    values = {"x": x, "weight": (1 + 0.1 * torch.randn(256, generator=gen)).to(torch.bfloat16), **tensors}
    blob = root / "blob/workloads/rms_h256"
    blob.mkdir(parents=True)
    save_file({k: v for k, v in values.items() if v is not None}, str(blob / "r1.safetensors"))
    return root


def test_flashinfer_safetensors_inputs_load_and_gate(tmp_path: Path, monkeypatch, capsys) -> None:
    from safetensors.torch import load_file

    from klineage.cli import main
    from klineage.interop.flashinfer import FIXED

    ds = _trace_dataset(tmp_path / "ds")
    out = tmp_path / "fi"
    monkeypatch.setattr(
        "sys.argv",
        ["klineage", "import", "flashinfer", str(ds / "definitions/rms_h256.json"), "--out", str(out)],
    )
    with pytest.raises(SystemExit) as e:  # the CLI finds workloads/rms_h256.jsonl beside definitions/
        main()
    assert e.value.code == 0, capsys.readouterr().err
    assert (out / "blob/workloads/rms_h256/r1.safetensors").is_file()  # the folder stands alone
    wl = load_workload(out)
    recorded = {"rows": 5, FIXED: 0}
    assert recorded in wl.shapes["emu"] and recorded in wl.shapes["test"] and {"rows": 7} in wl.shapes["test"]
    want = load_file(str(ds / "blob/workloads/rms_h256/r1.safetensors"))
    got = wl.make_inputs(recorded, seed=1)
    assert got["x"].equal(want["x"]) and got["weight"].equal(want["weight"]) and got["rows"] == 5
    kernel = (DATA / "fi_rms_h256_naive.cu").read_text()
    r = gate(kernel, wl, name="naive.cu")
    assert r.accepted, (r.category, r.message)
    # dropping eps is right on random rows; the recorded all-zero row makes it NaN
    no_eps = kernel.replace("sqrtf(ss / 256.0f + 1e-6f)", "sqrtf(ss / 256.0f)")
    assert no_eps != kernel
    r = gate(no_eps, wl, name="no_eps.cu")
    assert not r.accepted and "'@fixed': 0" in r.message, (r.category, r.message)


def test_flashinfer_tensor_file_is_part_of_the_cache_key(tmp_path: Path) -> None:
    import torch
    from safetensors.torch import save_file

    ds = _trace_dataset(tmp_path / "ds")
    import_definition(ds / "definitions/rms_h256.json", tmp_path / "fi", ds / "workloads/rms_h256.jsonl")
    before = load_workload(tmp_path / "fi").fingerprint()
    assert load_workload(tmp_path / "fi").fingerprint() == before
    tensors = {"x": torch.ones(5, 256, dtype=torch.bfloat16), "weight": torch.ones(256, dtype=torch.bfloat16)}
    save_file(tensors, str(tmp_path / "fi/blob/workloads/rms_h256/r1.safetensors"))
    assert load_workload(tmp_path / "fi").fingerprint() != before


def test_flashinfer_absolute_safetensors_path_is_copied_in(tmp_path: Path) -> None:
    ds = _trace_dataset(tmp_path / "ds")
    jsonl = ds / "workloads/rms_h256.jsonl"
    jsonl.write_text(jsonl.read_text().replace('"blob/', f'"{ds}/blob/'))
    import_definition(ds / "definitions/rms_h256.json", tmp_path / "fi", jsonl)
    (ds / "blob/workloads/rms_h256/r1.safetensors").unlink()  # the folder needs the dataset no more
    wl = load_workload(tmp_path / "fi")
    assert len(wl.fixed_inputs) == 1 and str(ds) not in (tmp_path / "fi/workloads.jsonl").read_text()


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ("missing_file", r"rms_h256\.jsonl:2: input 'x': safetensors file .*r1\.safetensors not found"),
        ("missing_key", r"rms_h256\.jsonl:2: input 'weight': .*r1\.safetensors holds no tensor 'weight'"),
        (
            "shape",
            r"rms_h256\.jsonl:2: input 'x': tensor 'x' in .* has shape \[5, 128\]; the definition at axes "
            r"\{'rows': 5\} says \[5, 256\]",
        ),
        (
            "dtype",
            r"rms_h256\.jsonl:2: input 'weight': tensor 'weight' in .* is float32; the definition says bfloat16",
        ),
    ],
    ids=["missing_file", "missing_key", "shape", "dtype"],
)
def test_flashinfer_bad_safetensors_inputs(
    tmp_path: Path, change: str, needle: str, monkeypatch, capsys
) -> None:
    import torch

    from klineage.cli import main

    tensors = {
        "missing_file": {},
        "missing_key": {"weight": None},
        "shape": {"x": torch.zeros(5, 128, dtype=torch.bfloat16)},
        "dtype": {"weight": torch.ones(256)},
    }[change]
    ds = _trace_dataset(tmp_path / "ds", **tensors)
    if change == "missing_file":
        (ds / "blob/workloads/rms_h256/r1.safetensors").unlink()
    with pytest.raises(WorkloadError, match=needle):
        import_definition(ds / "definitions/rms_h256.json", tmp_path / "out", ds / "workloads/rms_h256.jsonl")
    assert not (tmp_path / "out").exists()
    monkeypatch.setattr(
        "sys.argv",
        [
            "klineage",
            "import",
            "flashinfer",
            str(ds / "definitions/rms_h256.json"),
            "--out",
            str(tmp_path / "out"),
        ],
    )
    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert e.value.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err


def test_launches_without_a_stream_are_routed_to_the_current_stream() -> None:
    """The cuda gate rejects work on the legacy default stream (side_stream); the wrapper routes
    `<<<g, b>>>` and `<<<g, b, smem>>>` to the launcher's stream and leaves a named stream alone."""
    from klineage.interop.solution import route_launches_to_current_stream

    cuda = (
        "__global__ void k(float* y) { y[0] = 1.f; }\n"
        "void f(float* y, cudaStream_t s) {\n"
        "    k<<<1, 32>>>(y);\n"
        "    k<<<dim3(1), 32, 128>>>(y);\n"
        "    k<<<1, 32, 0, s>>>(y);\n"
        "}\n"
    )
    out, n = route_launches_to_current_stream(cuda, "t.cu")
    assert n == 2
    assert "k<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(y);" in out
    assert "k<<<dim3(1), 32, 128, at::cuda::getCurrentCUDAStream()>>>(y);" in out
    assert "k<<<1, 32, 0, s>>>(y);" in out
    from klineage.interop.kernelbench import workload_from_problem
    from klineage.source.model import CudaSource

    for name in ("add", "rowsum", "linear"):
        wl = workload_from_problem(DATA / f"kb_{name}_problem.py")
        sites = CudaSource.from_text(wrap_solution(DATA / f"kb_{name}_solution.py", wl), "w.cu").launch_sites
        assert sites and all(site.stream for site in sites), [site.config for site in sites]


def test_problem_file_is_part_of_the_cache_key(tmp_path: Path) -> None:
    """The reference lives in problem.py beside workload.py: editing it changes the fingerprint."""
    import_problem(DATA / "kb_add_problem.py", tmp_path / "w")
    before = load_workload(tmp_path / "w").fingerprint()
    assert load_workload(tmp_path / "w").fingerprint() == before  # stable
    problem = tmp_path / "w" / "problem.py"
    problem.write_text(problem.read_text().replace("return a + b", "return a + b + 0"))
    assert load_workload(tmp_path / "w").fingerprint() != before
