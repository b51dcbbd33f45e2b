"""`syntax.local_decls` and `syntax.init_text` are cached by subtree text (the forward analyses ask
about the same kernel bodies thousands of times a step): the answer must still be the nodes and
text of the tree asked about, wherever the same text stands, before and after an edit."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from klineage.source import nodes as N
from klineage.source import syntax as S
from klineage.source.model import CudaSource

BODY = "{ int t = i * 2; float* q = a + t; int u; u = t; q[0] = 1.0f; }"


def _blocks(src: CudaSource) -> list:
    return [
        n for n in N.walk(src.tree.root_node) if n.type == "compound_statement" and src.text_of(n) == BODY
    ]


def _kernel(prefix: str) -> CudaSource:
    return CudaSource.from_text(
        f"__global__ void k(float* a, int n) {{\n    int i = threadIdx.x;{prefix}\n"
        f"    if (i < n) {BODY}\n    if (i > n) {BODY}\n}}\n"
    )


def _check(src: CudaSource) -> None:
    blocks = _blocks(src)
    assert len(blocks) == 2
    for b in blocks:  # the second block's answer comes from the cache the first one filled
        cached, walked = S.local_decls(b), S._local_decls(b)
        assert cached.keys() == walked.keys() == {"t", "q", "u"}
        assert all(cached[k] == walked[k] for k in cached)  # this tree's nodes, not the cache's
        assert [S.init_text(src, b, n) for n in ("t", "q", "u", "i")] == ["i * 2", "a + t", None, None]


def test_the_same_body_at_two_places_answers_with_each_place_s_own_nodes() -> None:
    _check(_kernel(""))


@settings(max_examples=25, deadline=None)
@given(st.text(alphabet=" \n", max_size=40))
def test_a_shifted_copy_of_the_kernel_answers_at_its_own_offsets(pad: str) -> None:
    _check(_kernel(""))  # fills the cache at one offset
    _check(_kernel(pad + "    int w = 1;"))  # the same bodies further down the file


def test_an_initializer_written_twice_or_assigned_has_no_init_text() -> None:
    src = CudaSource.from_text(
        "__global__ void k(int* a) { int x = 1; { int x = 2; } int y = 3; y += 1; a[0] = x + y; }"
    )
    fn = next(n for n in N.walk(src.tree.root_node) if n.type == "function_definition")
    assert S.init_text(src, fn, "x") is None and S.init_text(src, fn, "y") is None


def test_file_constants_are_remembered_per_text_and_each_caller_gets_its_own_copy() -> None:
    src = CudaSource.from_text(
        "#define TILE 32\nconstexpr int kRows = TILE * 2;\n__global__ void k(int* a) { a[0] = kRows; }\n"
    )
    first = S.file_constants(src)
    assert first["TILE"] == 32 and first["kRows"] == 64
    first["kRows"] = 1  # a caller adding or changing its own names
    assert S.file_constants(CudaSource.from_text(src.text))["kRows"] == 64
    other = CudaSource.from_text(src.text.replace("32", "16"))
    assert S.file_constants(other)["kRows"] == 32


@given(
    st.sets(st.sampled_from(["kl_v", "kl_v_2", "kl_v_3", "kl_v_5", "kl_v2", "x"])),
    st.sampled_from(["", "_"]),
    st.integers(1, 3),
)
def test_a_numbered_fresh_name_is_new_and_taken_once_given(taken: set[str], sep: str, first: int) -> None:
    before = set(taken)
    a = S.fresh_numbered(taken, "kl_v", sep, first)
    b = S.fresh_numbered(taken, "kl_v", sep, first)
    assert a not in before and b not in before and a != b and {a, b} <= taken
    assert a == "kl_v" or a.startswith(f"kl_v{sep}")
