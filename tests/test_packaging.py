"""The distribution installs one namespace: klineage, klineage.gates, klineage.materialize —
never top-level `gates` or `materialize` packages."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11


def _declared() -> tuple[list[str], dict[str, str]]:
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    return cfg["packages"], cfg["package-dir"]


def test_every_package_folder_is_declared() -> None:
    packages, mapping = _declared()
    found = set()
    for root_pkg, folder in mapping.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder)
            found.add(".".join([root_pkg, *rel.parts]) if rel.parts else root_pkg)
    assert found == set(packages), "pyproject.toml [tool.setuptools] packages must list every package folder"


def test_wheel_has_one_namespace(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("klineage-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.startswith("klineage-")}
    assert tops == {"klineage"}, tops
    assert "klineage/gates/gate.py" in names and "klineage/materialize/__init__.py" in names


def test_editable_install_imports() -> None:
    code = "import klineage.gates.gate, klineage.materialize, klineage.source.parser; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert out.stdout.strip() == "ok", out.stderr
