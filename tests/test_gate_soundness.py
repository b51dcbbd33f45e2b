"""Verdicts that do not depend on luck (issue 27): a kernel that returns a result kept from an
earlier call, keyed by its input pointer, is rejected on every run of the emu gate, whatever
addresses the allocator hands out; a launcher whose signature is not the workload's is refused
at the parse stage; a skill's resource effect counts the kernel instantiations launched."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.gates.backend import GateOptions
from klineage.gates.child import run_worker
from klineage.gates.emu import backend as emu
from klineage.gates.gate import check_parse, gate
from klineage.gates.result import instance_key, launched_resources
from klineage.skills import resource_delta
from klineage.workload import load_workload

K = Path(__file__).parent / "kernels" / "emu"
VADD = K / "vadd"


def test_pointer_keyed_cache_is_rejected_on_every_run(tmp_path: Path) -> None:
    """Built once, run 20 times in 20 child processes (each one a full protocol, no cache)."""
    opts = GateOptions(backend="emu")
    build = emu.build((VADD / "pointer_cache.cu").read_text(), tmp_path / "build", opts)
    assert build.ok, build.message
    payload = {
        "library": str(build.library),
        "workload_dir": str(VADD),
        "options": opts.key_fields() | {"timeout_s": opts.timeout_s},
    }
    results = []
    for i in range(20):
        child = run_worker(payload, tmp_path / f"run{i}", 60.0, env=emu.child_env(opts))
        assert child.result is not None, child.stderr[-2000:]
        results.append(child.result)
    assert [r["category"] for r in results] == ["mismatch"] * 20
    assert all("inputs refilled in place" in r["message"] for r in results), results[0]["message"]


def test_pointer_keyed_cache_through_the_gate(tmp_path: Path) -> None:
    r = gate(
        VADD / "pointer_cache.cu", VADD, GateOptions(backend="emu"), use_cache=False, cache_root=tmp_path
    )
    assert r.category == "mismatch", r.message
    assert "keyed by input pointer" in r.message


SIG = '#include <cuda_runtime.h>\nextern "C" void launch({}) {{}}\n'
GOOD = "const float* a, const float* b, float* c, int N, cudaStream_t stream"


@pytest.mark.parametrize(
    ("params", "words"),
    [
        (
            "const double* a, const float* b, float* c, long long N, cudaStream_t s",
            ("parameter 1 'a'", "`const double*`"),
        ),
        (
            "const float* b, const float* a, float* c, int N, cudaStream_t s",
            ("parameter 1 'b'", "order swapped"),
        ),
        ("const float* a, const float* b, float* c, int N", ("no cudaStream_t parameter", "default stream")),
        (
            "const float* a, const float* b, int N, float* c, cudaStream_t s",
            ("parameter 3 'N'", "tensor 'c'"),
        ),
        (
            "const float* a, const float* b, float* c, long long N, cudaStream_t s",
            ("parameter 4 'N'", "int32"),
        ),
        ("const float* a, const float* b, float* c, int N, cudaStream_t s, int x", ("1 more", "'x'")),
        ("const float* a, const float* b, float* c, cudaStream_t s", ("parameter 4 's'", "'N'")),
    ],
)
def test_launcher_signature_is_checked_at_parse(params: str, words: tuple[str, ...], tmp_path: Path) -> None:
    wl = load_workload(VADD)
    r = gate(
        SIG.format(params), wl, GateOptions(backend="emu"), name="k.cu", use_cache=False, cache_root=tmp_path
    )
    assert (r.stage, r.category) == ("parse", "parse_error"), r.message
    assert r.message.startswith("k.cu:2: ")
    for w in words:
        assert w in r.message, r.message
    assert 'expected extern "C" void launch(const float* a' in r.message


def test_matching_signatures_pass_the_parse_stage() -> None:
    wl = load_workload(VADD)
    for params in (
        GOOD,
        "const float* __restrict__ a, float const* b, float* __restrict__ c, int32_t n, cudaStream_t s",
        "float* a, const float* b, float* c, int N, CUstream stream",
    ):
        assert check_parse(SIG.format(params), "k.cu", wl) is None, params


def test_effects_count_the_instantiations_the_launches_used(tmp_path: Path) -> None:
    """A size dispatch compiles vadd_t<128> and vadd_t<1024>; the emu shapes launch only <128>:
    the gate names it, and the resources a skill's effect is computed from are its alone."""
    r = gate(
        VADD / "size_dispatch.cu", VADD, GateOptions(backend="emu"), use_cache=False, cache_root=tmp_path
    )
    assert r.accepted, r.message
    assert r.profile["launched"] == ["vadd_t<128>"]
    if not r.resources:
        pytest.skip("nvcc not found: no ptxas resources to pick from")
    assert len(r.resources) == 2
    used = launched_resources(r.to_dict())
    assert [instance_key(k) for k in used] == ["vadd_t<128>"]
    assert next(iter(used.values()))["shared_bytes"] == 128 * 8 * 4


def test_instance_key_and_launched_resources() -> None:
    assert instance_key("void (anonymous namespace)::k<32, false>(__half const*, int)") == "k<32, false>"
    assert instance_key("{anonymous}::k<32, false>") == "k<32, false>"
    assert instance_key("vadd(float const*, float const*, float*, int)") == "vadd"
    assert instance_key("void ns::q<4>(int)") == instance_key("ns::q<4>") == "q<4>"
    res = {"void k<1>(float*)": {"registers": 10}, "void k<2>(float*)": {"registers": 84}}
    assert launched_resources({"resources": res, "profile": {"launched": ["k<1>"]}}) == {
        "void k<1>(float*)": {"registers": 10}
    }
    assert launched_resources({"resources": res, "profile": {}}) == res  # nothing recorded: every kernel
    assert launched_resources({"resources": res, "profile": {"launched": ["other"]}}) == res
    assert (
        resource_delta(
            launched_resources({"resources": res, "profile": {"launched": ["k<2>"]}}),
            {"k": {"registers": 40}},
        )["registers"]
        == 44
    )
