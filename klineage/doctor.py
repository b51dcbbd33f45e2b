"""`klineage doctor`: what this machine can do for KLineage (never prints a key)."""

from __future__ import annotations

import importlib.metadata as md
import os
import shutil
import subprocess
from dataclasses import dataclass


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    required: bool = False


def _version_line(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"failed: {e}"
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
    return lines[0] if cmd[0].endswith("++") else (lines[-1] if lines else "")


def _package(name: str, required: bool) -> Check:
    try:
        return Check(name, True, md.version(name), required)
    except md.PackageNotFoundError:
        return Check(name, False, "not installed", required)


def run_checks() -> list[Check]:
    checks: list[Check] = []
    gxx = shutil.which("g++")
    checks.append(Check("g++ (emu backend)", bool(gxx), _version_line([gxx, "--version"]) if gxx else "not found", True))
    nvcc = shutil.which("nvcc")
    if nvcc:
        from klineage.gates.compile import nvcc_version

        checks.append(Check("nvcc (compile stage)", True, f"{nvcc_version()} at {nvcc}"))
    else:
        checks.append(Check("nvcc (compile stage)", False, "not found: resources unmeasured, cuda backend unavailable"))
    try:
        import torch

        cuda = torch.cuda.is_available()
        gpu = torch.cuda.get_device_name(0) if cuda else "no CUDA device visible"
        checks.append(Check("torch", True, f"{torch.__version__} (CUDA build {torch.version.cuda or 'none'})", True))
        checks.append(Check("GPU", cuda, gpu))
    except Exception as e:  # a broken torch install is a finding, not a crash
        checks.append(Check("torch", False, f"import failed: {e}", True))
    try:
        from klineage.source.parser import parse

        ok = not parse("__global__ void __launch_bounds__(32) k() { k<<<1, 1>>>(); }").root_node.has_error
        checks.append(Check("tree-sitter-cuda", ok, md.version("tree-sitter-cuda") + ("" if ok else " (parse failed)"), True))
    except Exception as e:
        checks.append(Check("tree-sitter-cuda", False, f"failed: {e}", True))
    for name, required in (("libcst", True), ("duckdb", True), ("networkx", True), ("jinja2", True), ("anthropic", False)):
        checks.append(_package(name, required))
    key = os.environ.get("ANTHROPIC_API_KEY")
    checks.append(Check("ANTHROPIC_API_KEY", bool(key), "present" if key else "not set (the anthropic provider needs it)"))
    try:
        from klineage.gates.backends import get_backend

        emu = get_backend("emu")
        checks.append(Check("emu backend", True, emu.toolchain(), True))
    except Exception as e:
        checks.append(Check("emu backend", False, str(e), True))
    return checks
