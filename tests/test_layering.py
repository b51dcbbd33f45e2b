"""Where things live (issue 28): every SQL statement in klineage/store/, no long functions in the
walker and the materializer, operator modules that use one another's public names only. Static
checks over the source tree, with ast (no imports)."""

from __future__ import annotations

import ast
import re
import sys
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


# ---- operator modules import public names only (issue 28) ----------------------------------------

DEOPT = REPO / "klineage" / "deopt"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_module(dotted: str) -> bool:
    path = REPO.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def private_imports(path: Path) -> list[str]:
    """`file:line: name` for every private name of another klineage module that `path` uses:
    `from klineage.x import _name`, or `M._name` on a klineage module `M` it imported. Modules
    themselves may be private (`from klineage.deopt import _threads as T`): they are the package's
    shared helper layers, and what the operator reads from them is checked like any module."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(REPO).parent.parts)
    modules: dict[str, str] = {}  # local name -> dotted klineage module
    found: list[str] = []
    where = path.relative_to(REPO)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            mod = ".".join(p for p in (base, node.module or "") if p)
            if not mod.startswith("klineage"):
                continue
            for a in node.names:
                if _is_module(f"{mod}.{a.name}"):
                    modules[a.asname or a.name] = f"{mod}.{a.name}"
                elif _private(a.name):
                    found.append(f"{where}:{node.lineno}: from {mod} import {a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("klineage") and a.asname:
                    modules[a.asname] = a.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and _private(node.attr)
        ):
            found.append(f"{where}:{node.lineno}: {modules[node.value.id]}.{node.attr}")
    return found


def test_the_private_import_detector_sees_both_forms(tmp_path: Path, monkeypatch) -> None:
    pkg = tmp_path / "klineage" / "deopt"
    pkg.mkdir(parents=True)
    for name in ("__init__", "_threads", "rows", "op"):
        (pkg / f"{name}.py").write_text("")
    (pkg / "op.py").write_text(
        "from klineage.deopt import _threads as T\n"  # a private module: allowed
        "from klineage.deopt import rows as R\n"
        "from klineage.deopt.rows import _helper, public\n"  # flagged
        "from .rows import _other\n"  # flagged (relative)
        "x = R._cache + T.walk + R.public + T._inner\n"  # R._cache and T._inner flagged
        "y = self._mine\n"  # an object's own attribute: not an import
    )
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    got = [line.split(": ", 1)[1] for line in private_imports(pkg / "op.py")]
    assert sorted(got) == sorted(
        [
            "from klineage.deopt.rows import _helper",
            "from klineage.deopt.rows import _other",
            "klineage.deopt.rows._cache",
            "klineage.deopt._threads._inner",
        ]
    )


def test_operator_modules_import_public_names_only() -> None:
    found = [f for p in sorted(DEOPT.glob("*.py")) for f in private_imports(p)]
    assert not found, (
        "private names used across operator modules (make them public where defined):\n" + "\n".join(found)
    )
