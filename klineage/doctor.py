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


def _llm_checks() -> list[Check]:
    """The anthropic provider's default model (from the installed SDK), the price table's date
    and the base URL (set or not: the value may carry credentials, so it is never printed)."""
    try:
        from klineage.llm.models import default_model
        from klineage.llm.pricing import PRICES_AS_OF, price_for

        model = default_model()
        price = price_for(model)
        priced = (
            f"${price.input:g} in / ${price.output:g} out per MTok" if price is not None else "unknown price"
        )
        out = [
            Check("LLM default model", True, f"{model} ({priced})"),
            Check("LLM pricing table", True, f"taken {PRICES_AS_OF}"),
        ]
    except Exception as e:  # an SDK without a model list is a finding, not a crash
        out = [Check("LLM default model", False, f"unavailable: {e}")]
    url = os.environ.get("ANTHROPIC_BASE_URL")
    out.append(Check("ANTHROPIC_BASE_URL", bool(url), "set" if url else "not set (the public API)"))
    return out


def run_checks() -> list[Check]:
    checks: list[Check] = []
    gxx = shutil.which("g++")
    checks.append(
        Check("g++ (emu backend)", bool(gxx), _version_line([gxx, "--version"]) if gxx else "not found", True)
    )
    nvcc = shutil.which("nvcc")
    if nvcc:
        from klineage.gates.compile import nvcc_version

        checks.append(Check("nvcc (compile stage)", True, f"{nvcc_version()} at {nvcc}"))
    else:
        checks.append(
            Check("nvcc (compile stage)", False, "not found: resources unmeasured, cuda backend unavailable")
        )
    try:
        import torch

        cuda = torch.cuda.is_available()
        gpu = torch.cuda.get_device_name(0) if cuda else "no CUDA device visible"
        checks.append(
            Check("torch", True, f"{torch.__version__} (CUDA build {torch.version.cuda or 'none'})", True)
        )
        checks.append(Check("GPU", cuda, gpu))
    except Exception as e:  # a broken torch install is a finding, not a crash
        checks.append(Check("torch", False, f"import failed: {e}", True))
    try:
        from klineage.source.parser import parse

        ok = not parse("__global__ void __launch_bounds__(32) k() { k<<<1, 1>>>(); }").root_node.has_error
        checks.append(
            Check(
                "tree-sitter-cuda",
                ok,
                md.version("tree-sitter-cuda") + ("" if ok else " (parse failed)"),
                True,
            )
        )
    except Exception as e:
        checks.append(Check("tree-sitter-cuda", False, f"failed: {e}", True))
    for name, required in (
        ("libcst", True),
        ("duckdb", True),
        ("networkx", True),
        ("jinja2", True),
        ("anthropic", False),
    ):
        checks.append(_package(name, required))
    key = os.environ.get("ANTHROPIC_API_KEY")
    checks.append(
        Check(
            "ANTHROPIC_API_KEY", bool(key), "present" if key else "not set (the anthropic provider needs it)"
        )
    )
    checks += _llm_checks()
    try:
        from klineage.gates.backends import get_backend

        emu = get_backend("emu")
        checks.append(Check("emu backend", True, emu.toolchain(), True))
    except Exception as e:
        checks.append(Check("emu backend", False, str(e), True))
    return checks
