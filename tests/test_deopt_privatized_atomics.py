"""privatized_atomics: scattered global atomics -> a per-block copy in shared memory, and back."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes, fixture, only_site
from hypothesis import given, settings
from hypothesis import strategies as st

from klineage.deopt.base import Refused
from klineage.deopt.privatized_atomics import PrivatizedAtomics
from klineage.deopt.registry import get_operator
from klineage.paths import repo_root
from klineage.source.canon import canonical_form
from klineage.source.model import CudaSource

OP = PrivatizedAtomics()
CORPUS = repo_root() / "expert_kernels" / "class_weight_share"


def _forward(src: CudaSource) -> CudaSource:
    (site,) = OP.find_forward(src)
    facts = OP.preconditions(src, site)
    assert all(f.holds for f in facts), [(f.name, f.reason) for f in facts if not f.holds]
    return OP.apply(src, site)


def test_registered() -> None:
    assert get_operator("privatized_atomics").category == "staging"


@pytest.mark.parametrize("name", ["byte_count", "bucket_max"])
def test_forward_on_naive_kernels_passes_the_gate(name: str, tmp_path: Path) -> None:
    src, wl = fixture("privatized_atomics", name)
    out = _forward(src)
    assert "__shared__" in out.text and "__syncthreads();" in out.text
    (site,) = OP.find(out)
    assert all(f.holds for f in OP.removal_preconditions(out, site))
    assert_passes(out.text, wl, tmp_path, f"{name}_private.cu")


def test_byte_keys_one_per_thread_become_grid_stride() -> None:
    src, _ = fixture("privatized_atomics", "byte_count")
    facts = {f.name: f for f in OP.preconditions(src, OP.find_forward(src)[0])}
    assert facts["extent_known"].reason == "an 8-bit unsigned index"
    out = _forward(src)
    assert "__shared__ int counts_priv[256];" in out.text
    assert "gridDim.x" in out.text and "132 * 8" in out.text  # a block must see many keys
    assert "atomicAdd(&counts_priv[keys[t]], 1)" in out.text


def test_max_starts_from_its_identity() -> None:
    src, _ = fixture("privatized_atomics", "bucket_max")
    out = _forward(src)
    assert "out_priv[bin] = (-2147483647 - 1);" in out.text
    assert "atomicMax(&out[bin], bin_value)" in out.text and "atomicMax(&out_priv[b], values[i])" in out.text


def test_remove_on_the_corpus_expert_and_roundtrip(tmp_path: Path) -> None:
    src = CudaSource.from_file(CORPUS / "expert.cu")
    site = only_site(OP, src)
    assert site.details == {"kernel": "class_weight_sum_kernel", "shared": "sums"}
    simple = OP.remove(src, site)
    kernel = simple.text_of(simple.node_for(simple.kernel("class_weight_sum_kernel")))
    assert "__shared__" not in kernel and "__syncthreads" not in kernel
    assert "atomicAdd(&out[c[k]], v[k])" in simple.text
    assert_passes(simple.text, CORPUS, tmp_path, "cws_global.cu")
    again = _forward(simple)
    facts = {f.name: f for f in OP.preconditions(simple, OP.find_forward(simple)[0])}
    assert "clears 1000 elements" in facts["extent_known"].reason
    assert "reorders the rounding" in facts["associative_update"].reason
    assert len(OP.find(again)) == 1
    assert_passes(again.text, CORPUS, tmp_path, "cws_roundtrip.cu")


def test_two_private_tables_of_the_second_lineage_come_off_one_at_a_time(tmp_path: Path) -> None:
    """group_mean's expert privatizes an fp32 sum and an int32 count, each between its own
    barriers: each is a removable site, and after both the kernel updates global memory only."""
    corpus = repo_root() / "expert_kernels" / "group_mean"
    src = CudaSource.from_file(corpus / "expert.cu")
    sites = OP.find(src)
    assert sorted(s.details["shared"] for s in sites) == ["block_counts", "block_sums"]
    assert all(f.holds for s in sites for f in OP.removal_preconditions(src, s))
    first = OP.remove(src, next(s for s in sites if s.details["shared"] == "block_sums"))
    (rest,) = OP.find(first)
    assert rest.details["shared"] == "block_counts"
    simple = OP.remove(first, rest)
    kernel = simple.text_of(simple.node_for(simple.kernel("group_accumulate_kernel")))
    assert "__shared__" not in kernel and "__syncthreads" not in kernel
    assert "atomicAdd(&means[gs[k]], vs[k])" in kernel and "atomicAdd(&counts[gs[k]], 1)" in kernel
    assert_passes(simple.text, corpus, tmp_path, "group_mean_global.cu")


def test_a_second_output_is_privatized_around_the_first(tmp_path: Path) -> None:
    """Forward on group_mean's naive: the sum, then the count (the first copy's barriers do not
    hold the second back), and the kernel with both copies passes the gate."""
    corpus = repo_root() / "expert_kernels" / "group_mean"
    src = CudaSource.from_file(corpus / "naive.cu")
    out = src
    for base in ("means", "counts"):
        site = next(f for f in OP.find_forward(out) if f.details["out"] == base)
        facts = OP.preconditions(out, site)
        assert all(f.holds for f in facts), [(f.name, f.reason) for f in facts if not f.holds]
        out = OP.apply(out, site)
    kernel = out.text_of(out.node_for(out.kernel("group_accumulate_naive")))
    assert "__shared__ float means_priv[500];" in kernel and "__shared__ int counts_priv[500];" in kernel
    assert sorted(p.details["shared"] for p in OP.find(out)) == ["counts_priv", "means_priv"]
    assert_passes(out.text, corpus, tmp_path, "group_mean_private.cu")


def test_a_barrier_of_the_kernel_itself_still_holds_the_copy_back() -> None:
    src = CudaSource.from_text(
        "__global__ void k(const int* key, int* out, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    __syncthreads();\n"
        "    if (i < n) atomicAdd(&out[key[i] & 255], 1);\n"
        "}\n",
        "k.cu",
    )
    (site,) = OP.find_forward(src)
    facts = {f.name: f for f in OP.preconditions(src, site)}
    assert not facts["barriers_reachable"].holds


def test_an_index_declared_in_the_vector_loop_and_its_tail_reads_the_data() -> None:
    """After a vectorize step each of the two loops declares its own `c`: both initializers read
    memory, so the scattered update still qualifies."""
    src = CudaSource.from_text(
        "__global__ void k(const int* key, float* out, int n) {\n"
        "    for (int i = 0; i + 3 < n; i += 4) {\n"
        "        const int4 pack = *reinterpret_cast<const int4*>(key + i);\n"
        "        const int* lane = reinterpret_cast<const int*>(&pack);\n"
        "        for (int j = 0; j < 4; ++j) { int c = lane[j]; atomicAdd(&out[c], 1.0f); }\n"
        "    }\n"
        "    for (int i = n / 4 * 4; i < n; ++i) { int c = key[i]; atomicAdd(&out[c], 1.0f); }\n"
        "}\n",
        "k.cu",
    )
    (site,) = OP.find_forward(src)
    facts = {f.name: f for f in OP.preconditions(src, site)}
    assert facts["data_dependent_index"].holds, facts["data_dependent_index"].reason


_KERNEL = """
#define NB {k}
__global__ void scatter({ty}* out, const int* key, const {ty}* val, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    {body}
}}
extern "C" void launch({ty}* out, const int* key, const {ty}* val, int n, cudaStream_t s) {{
    scatter<<<(n + 255) / 256, 256, 0, s>>>(out, key, val, n);
}}
"""

REFUSALS = {
    "index not from the data": ("int", "if (i < n) atomicAdd(&out[i % NB], val[i]);", "data_dependent_index"),
    "output also read": (
        "int",
        "if (i < n && out[0] >= 0) atomicAdd(&out[key[i]], val[i]);",
        "written_only_by",
    ),
    "nothing bounds the index": ("int", "if (i < n) atomicAdd(&out[key[i]], val[i]);", "extent_known"),
    "too large for shared memory": (
        "int",
        "if (i >= n) return; int b = key[i]; if (b < 65536) atomicAdd(&out[b], val[i]);",
        "fits_shared_memory",
    ),
    "float max": (
        "float",
        "if (i >= n) return; int b = key[i]; if (b < NB) atomicMax(&out[b], val[i]);",
        "assoc",
    ),
    "already synchronizes": (
        "int",
        "__syncthreads(); if (i >= n) return; int b = key[i]; if (b < NB) atomicAdd(&out[b], val[i]);",
        "barriers_reachable",
    ),
    "return inside a branch": (
        "int",
        "if (i < n) { int b = key[i]; if (b >= NB) return; atomicAdd(&out[b], val[i]); }",
        "barriers_reachable",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals(case: str) -> None:
    ty, body, fact = REFUSALS[case]
    src = CudaSource.from_text(_KERNEL.format(k=64, ty=ty, body=body), "r.cu")
    (site,) = OP.find_forward(src)
    failed = [f.name for f in OP.preconditions(src, site) if not f.holds]
    assert any(n.startswith(fact) for n in failed), failed
    with pytest.raises(Refused):
        OP.apply(src, site)


_GUARDS = {
    "if": "if (i < n) {{ const int b = key[i]; if (b < NB) {atomic}(&out[b], val[i]); }}",
    "early return": "if (i >= n) return;\n    const int b = key[i];\n    if (b >= NB) return;\n    {atomic}(out + b, val[i]);",
    "and": "if (i < n) {{ int b = key[i]; if (b >= 0 && b < NB) {atomic}(&out[b], val[i]); }}",
}


@settings(max_examples=40, deadline=None)
@given(
    k=st.sampled_from([1, 7, 64, 256, 1000, 4096]),
    ty=st.sampled_from(["int", "unsigned int", "float", "unsigned long long"]),
    atomic=st.sampled_from(["atomicAdd", "atomicMax", "atomicMin", "atomicOr"]),
    guard=st.sampled_from(sorted(_GUARDS)),
)
def test_forward_and_back_on_any_small_table(k: int, ty: str, atomic: str, guard: str) -> None:
    body = _GUARDS[guard].format(atomic=atomic)
    src = CudaSource.from_text(_KERNEL.format(k=k, ty=ty, body=body), "p.cu")
    (site,) = OP.find_forward(src)
    facts = {f.name: f for f in OP.preconditions(src, site)}
    supported = atomic == "atomicAdd" or (
        ty != "float" and (atomic == "atomicOr" or ty != "unsigned long long")
    )
    assert facts["associative_update"].holds == supported
    assert facts["extent_known"].holds and f"< {k}" in facts["extent_known"].reason
    if not all(f.holds for f in facts.values()):
        with pytest.raises(Refused):
            OP.apply(src, site)
        return
    out = OP.apply(src, site)
    assert f"__shared__ {ty} out_priv[{k}];" in out.text
    (back_site,) = OP.find(out)
    back = OP.remove(out, back_site)
    assert "__shared__" not in back.text and "__syncthreads" not in back.text
    assert OP.find_forward(back) and not OP.find(back)


def test_heldout_histogram_takes_it(tmp_path: Path) -> None:
    folder = repo_root() / "heldout" / "histogram"
    src = canonical_form(CudaSource.from_file(folder / "naive.cu")).source
    out = _forward(src)
    assert "__shared__ int counts_priv[256];" in out.text and "132 * 8" in out.text
    assert_passes(out.text, folder, tmp_path, "histogram_private.cu")
