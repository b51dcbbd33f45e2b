#!/usr/bin/env bash
# Wheels the GPU machine lacks, fetched HERE (it cannot reach a registry) into .whl/ (ignored),
# carried with the device call (`carry: [".whl"]`), installed THERE by benchmarks/gpu_env.sh.
#
#   bash benchmarks/gpu_setup.sh            # on this machine, once
#   source benchmarks/gpu_env.sh            # first thing in every device command
#
# The device image already has torch, numpy, networkx, jinja2, typer, rich, pyyaml, pytest,
# nvidia-ml-py (KINDS.md's package list); klineage also imports the packages below, and
# benchmarks/kernelbench_gpu_check.py's load_inline needs ninja. The
# anthropic SDK is left out: only the LLM provider uses it, never the gate.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
WHEELS=(
  "tree-sitter==0.26.1"
  "tree-sitter-cuda==0.21.2"
  "duckdb==2.0.1"
  "libcst==1.9.0"
  "ninja==1.13.2"   # torch load_inline builds with it (KernelBench ModelNew check)
  # the CLI (`python3 -m klineage heldout|mine|gate` there): typer and rich with their deps, each
  # wheel's Requires-Dist followed (typer 0.29 parses options with pydantic; pydantic pins its core
  # and needs typing-extensions >= 4.16, newer than the image's)
  "typer==0.29.2"
  "pydantic==2.14.4"
  "pydantic-core==2.50.5"
  "annotated-types==0.8.0"
  "typing-inspection==0.4.5"
  "typing-extensions==4.16.0"
  "annotated-doc==0.0.7"
  "click==8.5.1"
  "shellingham==1.5.4"
  "rich==15.0.0"
  "markdown-it-py==4.3.0"
  "mdurl==0.1.2"
  "pygments==2.21.0"
)
PLATFORMS=()
for n in 2_28 2_27 2_24 2_17; do PLATFORMS+=(--platform "manylinux_${n}_x86_64"); done
PLATFORMS+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)

# a worktree's .git is a file: its excludes live in the common git folder
exclude="$(git rev-parse --git-common-dir 2>/dev/null || echo .git)/info/exclude"
grep -qxF '/.whl/' "$exclude" 2>/dev/null || { mkdir -p "$(dirname "$exclude")"; echo '/.whl/' >> "$exclude"; }
mkdir -p .whl
for spec in "${WHEELS[@]}"; do
  name=${spec%%==*}
  stem=${name//-/_}
  if ls .whl/"${stem}"-"${spec##*==}"-*.whl >/dev/null 2>&1; then
    echo "have $spec"
    continue
  fi
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${PLATFORMS[@]}" -d .whl "$spec"
  echo "got $spec"
done
ls -la .whl
