"""CudaSource on real CUDA fixtures: kernels, templates, launches, shared memory, pragmas, calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.errors import SourceError
from klineage.source.model import CudaSource

DATA = Path(__file__).parent / "data" / "source"


@pytest.fixture(scope="module")
def softmax() -> CudaSource:
    return CudaSource.from_file(DATA / "softmax.cu")


@pytest.fixture(scope="module")
def transpose() -> CudaSource:
    return CudaSource.from_file(DATA / "transpose.cu")


@pytest.fixture(scope="module")
def gemm() -> CudaSource:
    return CudaSource.from_file(DATA / "gemm_tiled.cu")


def test_template_kernel_with_launch_bounds(softmax: CudaSource) -> None:
    (k,) = softmax.kernels
    assert k.name == "softmax_kernel" and k.kind == "kernel"
    assert k.launch_bounds == ("256", "2")
    assert [(p.name, p.kind, p.type) for p in k.template_params] == [
        ("BLOCK", "value", "int"),
        ("T", "type", "typename"),
    ]
    x, y, cols = k.params
    assert (x.name, x.type, x.is_pointer, x.has_restrict, x.is_const) == (
        "x",
        "const T* __restrict__",
        True,
        True,
        True,
    )
    assert (y.is_pointer, y.has_restrict, y.is_const) == (True, True, False)
    assert (cols.type, cols.is_pointer) == ("int", False)
    assert softmax.text_of(k).lstrip().startswith("__global__") and k.line == 30


def test_device_functions_and_templates(softmax: CudaSource) -> None:
    assert [f.name for f in softmax.device_functions] == ["to_float", "to_float", "warp_max", "warp_sum"]
    assert "__forceinline__" in softmax.device_functions[2].qualifiers
    kinds = [(t.name, t.kind, len(t.params)) for t in softmax.templates]
    assert kinds == [("to_float", "device", 1), ("to_float", "device", 0), ("softmax_kernel", "kernel", 2)]


def test_template_default_and_expression_launch_bounds(gemm: CudaSource) -> None:
    (k,) = gemm.kernels
    assert k.template_params[-1].name == "TM" and k.template_params[-1].default == "8"
    assert k.launch_bounds == ("(BM / TM) * (BN / TM)",)
    assert [p.name for p in k.params] == ["M", "N", "K", "A", "B", "C"]
    assert gemm.launchers == ()  # plain C++ host function, not extern "C"
    assert [f.kind for f in gemm.functions] == ["kernel", "host"]


def test_launch_sites_with_template_args_and_four_config_args(softmax: CudaSource) -> None:
    a, b = softmax.launch_sites
    assert (a.name, a.template_args, a.config, a.args) == (
        "softmax_kernel",
        ("256", "float"),
        ("rows", "256", "0", "stream"),
        ("x", "y", "cols"),
    )
    assert (a.grid, a.block, a.smem, a.stream, a.function) == ("rows", "256", "0", "stream", "softmax_f32")
    assert b.template_args == ("128", "__half") and b.grid == "dim3(rows)" and b.function == "softmax_f16"


def test_launch_sites_with_two_and_three_config_args(transpose: CudaSource) -> None:
    two, three = transpose.launch_sites
    assert two.config == ("grid", "block") and two.smem is None and two.stream is None
    assert three.config == ("(n / 2 + threads - 1) / threads", "threads", "threads * sizeof(__half2)")
    assert three.smem == "threads * sizeof(__half2)" and three.stream is None
    assert transpose.text_of(three).startswith("scale_half2<<<")


def test_extern_c_block_and_single_launchers(softmax: CudaSource, transpose: CudaSource) -> None:
    assert [f.name for f in softmax.launchers] == ["softmax_f32", "softmax_f16"]
    assert all(f.is_extern_c for f in softmax.launchers)
    assert softmax.launchers[0].params[-1].type == "cudaStream_t"
    assert [f.name for f in transpose.launchers] == ["launch_transpose", "launch_scale"]


def test_shared_static_padded_and_dynamic(transpose: CudaSource, gemm: CudaSource) -> None:
    tile, raw = transpose.shared_decls
    assert (tile.name, tile.element_type, tile.dims, tile.dims_text) == (
        "tile",
        "float",
        ("32", "33"),
        "[32][33]",
    )
    assert not tile.is_extern and not tile.is_dynamic and tile.function == "transpose_kernel"
    assert (raw.name, raw.element_type, raw.dims, raw.align) == ("smem_raw", "unsigned char", ("",), "16")
    assert raw.is_extern and raw.is_dynamic
    assert transpose.text_of(raw) == "extern __shared__ __align__(16) unsigned char smem_raw[];"
    assert [d.dims for d in gemm.shared_decls] == [("2", "BK", "BM"), ("2", "BK", "BN")]


def test_pragmas_attach_to_their_loops(softmax: CudaSource, transpose: CudaSource, gemm: CudaSource) -> None:
    p = softmax.pragmas[2]
    assert (p.name, p.value, p.text, p.function) == ("unroll", "4", "#pragma unroll 4", "softmax_kernel")
    assert p.loop is not None and p.loop.header == "for (int c = threadIdx.x; c < cols; c += BLOCK)"
    assert softmax.pragma_of(p.loop) == p
    assert softmax.pragmas[0].value is None and softmax.pragmas[0].function == "warp_max"
    # a pragma that is the body of a brace-less loop (grammar gap, masked) still finds its loop
    inner = transpose.pragmas[-1]
    assert inner.value == "2" and inner.loop is not None and inner.loop.depth == 1
    assert [q.loop.header.split(";")[0] for q in gemm.pragmas if q.loop] == [
        "for (int kk = 0",
        "for (int i = 0",
        "for (int j = 0",
    ]


def test_calls_by_pattern(softmax: CudaSource) -> None:
    shfl = softmax.calls(r"__shfl_\w*sync")
    assert [(c.name, c.function) for c in shfl] == [
        ("__shfl_xor_sync", "warp_max"),
        ("__shfl_down_sync", "warp_sum"),
        ("__shfl_sync", "softmax_kernel"),
    ]
    assert shfl[2].args == ("0xffffffff", "warp_sum(s)", "0")
    assert len(softmax.calls("__syncthreads")) == 5
    assert softmax.calls("softmax_kernel") == ()  # launches are launch_sites, not calls


def test_vector_types_and_half_bf16(transpose: CudaSource) -> None:
    casts = transpose.calls("reinterpret_cast")
    assert [c.template_args for c in casts][:2] == [("__half2*",), ("__half2*",)]
    assert ("const float2*",) in [c.template_args for c in casts]
    assert transpose.calls("__float2bfloat16")[0].function == "copy_bf16_vec4"
    assert transpose.kernels[2].params[0].type == "const __nv_bfloat16* __restrict__"


def test_loops_depth_and_header(gemm: CudaSource) -> None:
    headers = [(lp.name, lp.depth) for lp in gemm.loops]
    assert headers == [("for", 0), ("for", 1), ("for", 2), ("for", 3), ("for", 0), ("for", 1)]


def test_line_of_and_node_for(softmax: CudaSource) -> None:
    k = softmax.kernels[0]
    assert softmax.line_of(k.start) == k.line and softmax.line_of(0) == 1
    node = softmax.node_for(k)
    assert node.type == "function_definition" and softmax.text_of(node) == softmax.text_of(k)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file"):
        CudaSource.from_file(tmp_path / "nope.cu")


def test_non_utf8_names_offset(tmp_path: Path) -> None:
    f = tmp_path / "bad.cu"
    f.write_bytes(b"__global__ void k() {}\n// caf\xe9\n")
    with pytest.raises(SourceError, match=r"bad.cu:2: not UTF-8 \(byte 0xe9 at offset 29\)"):
        CudaSource.from_file(f)


def test_parse_error_names_file_line_col(tmp_path: Path) -> None:
    f = tmp_path / "broken.cu"
    f.write_text("__global__ void k(float* x) {\n    x[0] = (1 + ;\n}\n")
    with pytest.raises(SourceError, match=r"broken.cu:2:\d+: parse error") as e:
        CudaSource.from_file(f)
    assert "\n" not in str(e.value)


def test_grammar_gaps_parse() -> None:
    src = CudaSource.from_text(
        "struct __align__(8) V { float a, b; };\n"
        "__global__ void k(float* o) { auto f = [=] __device__ (int i) { return i; }; o[0] = f(1); }\n"
        "template <int S>\n"
        "__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128, 1, 2) tma(float* o) {\n"
        "    __shared__ alignas(128) char buf[S][1024];\n"
        "}\n"
        "__global__ void __maxnreg__(64) capped(float* o) {}\n"
    )
    assert [k.name for k in src.kernels] == ["k", "tma", "capped"]
    assert src.text_of(src.tree.root_node).startswith("struct __align__(8)")
    tma = src.kernels[1]
    assert tma.launch_bounds == ("128", "1", "2")
    assert [(a.name, a.args) for a in tma.attributes] == [
        ("__cluster_dims__", ("2", "1", "1")),
        ("__launch_bounds__", ("128", "1", "2")),
    ]
    assert src.text_of((tma.attributes[0].start, tma.attributes[0].end)) == "__cluster_dims__(2, 1, 1)"
    assert [(a.name, a.args) for a in src.kernels[2].attributes] == [("__maxnreg__", ("64",))]
    assert src.shared_decls[0].align == "128" and src.shared_decls[0].dims == ("S", "1024")
