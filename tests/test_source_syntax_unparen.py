"""`syntax.unparenthesized`: the one helper the operators use to read an expression through its
parentheses (and, when asked, a condition clause), whatever comments sit inside."""

from __future__ import annotations

import pytest

from klineage.source import nodes as N
from klineage.source.model import CudaSource
from klineage.source.syntax import unparenthesized


def _if_condition(body: str):
    src = CudaSource.from_text(f"__global__ void k(int* a, int n) {{\n{body}\n}}\n")
    node = next(n for n in N.walk(src.tree.root_node) if n.type == "if_statement")
    return src, node.child_by_field_name("condition")


@pytest.mark.parametrize(
    "cond",
    ["i < n", "(i < n)", "((i < n))", "( /* bound */ i < n)", "((i < n) /* bound */)", "int i = a[0]; i < n"],
)
def test_the_condition_is_read_through_parentheses_clauses_and_comments(cond: str) -> None:
    src, clause = _if_condition(f"int i = 0; if ({cond}) a[0] = 1;")
    inner = unparenthesized(clause, clause=True)
    assert inner.type == "binary_expression" and src.text_of(inner) == "i < n"


def test_without_clause_a_condition_clause_is_kept() -> None:
    _, clause = _if_condition("if ((n)) a[0] = 1;")
    assert unparenthesized(clause).type == "condition_clause"


def test_a_commented_guard_is_the_same_copy() -> None:
    """strided_copy reads the guard through the helper: a comment after the bound changes nothing
    (the condition clause's last named child was the comment before)."""
    from klineage.deopt import strided_copy as SC
    from tests.deopt_kernel_checks import load

    src, _ = load("smem_staging", "nchw_to_nhwc", "naive.cu")
    commented = CudaSource.from_text(src.text.replace("if (i < total) {", "if (i < total /* in range */) {"))
    assert commented.text != src.text
    a, b = SC.analyze(src, src.kernels[0]), SC.analyze(commented, commented.kernels[0])
    assert [(c.label, SC.c_text(c.extent)) for c in a.coords] == [
        (c.label, SC.c_text(c.extent)) for c in b.coords
    ]
    assert (b.transposed[0].label, b.transposed[1].label) == ("pix", "ch")  # type: ignore[index]
