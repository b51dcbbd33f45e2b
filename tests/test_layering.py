"""Where things live (issue 28): every SQL statement in klineage/store/, no long functions in the
walker and the materializer. Static checks over the source tree, with ast (no imports)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import REPO

#: a statement as this code base writes them (keywords in capitals), not prose that names a verb
SQL = re.compile(
    r"\bSELECT\b[\s\S]*\bFROM\b|\bINSERT\s+(OR\s+\w+\s+)?INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b"
    r"|\b(CREATE|ALTER|DROP)\s+TABLE\b"
)
CODE = ("klineage", "gates", "materialize", "benchmarks")
STORE = REPO / "klineage" / "store"


def _python_files(folders: tuple[str, ...]) -> list[Path]:
    return sorted(p for d in folders for p in (REPO / d).rglob("*.py"))


def sql_literals(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal in `path` that holds a SQL statement (an f-string's
    replacement fields read as a name)."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(
                v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "X"
                for v in node.values
            )
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if SQL.search(text):
            found.append((node.lineno, " ".join(text.split())[:80]))
    return found


def test_the_detector_sees_statements_and_not_prose(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        'A = "SELECT a FROM t WHERE b = ?"\n'
        'B = ("INSERT OR REPLACE INTO t (a) "\n     "VALUES (?)")\n'
        'C = f"UPDATE {T} SET a = 1"\n'
        'D = "UPDATE skills SET x = ?"\n'
        'E = "select the first candidate from the list"\n'
        'F = "the walker records an UPDATE of the state"\n'
    )
    assert [line for line, _ in sql_literals(src)] == [1, 2, 4, 5]


def test_no_sql_outside_the_store() -> None:
    outside = [
        f"{p.relative_to(REPO)}:{line}: {text}"
        for p in _python_files(CODE)
        if STORE not in p.parents
        for line, text in sql_literals(p)
    ]
    assert not outside, "SQL outside klineage/store/ (give the store a function for it):\n" + "\n".join(
        outside
    )


def test_the_store_holds_sql() -> None:  # the detector runs on the files it is meant for
    assert sum(len(sql_literals(p)) for p in STORE.rglob("*.py")) > 20


def long_functions(paths: list[Path], limit: int) -> list[str]:
    out = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > limit:
                    out.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.name} ({n} lines)")
    return out


def test_no_function_over_80_lines_in_the_walker_and_the_materializer() -> None:
    paths = [REPO / "klineage" / "walker.py", *_python_files(("materialize",))]
    too_long = long_functions(paths, 80)
    assert not too_long, "functions over 80 lines (split them):\n" + "\n".join(too_long)
