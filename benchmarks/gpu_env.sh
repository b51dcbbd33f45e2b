# Source this first in every device command (bash): installs the carried wheels (.whl/, made by
# benchmarks/gpu_setup.sh) into /tmp/site and makes this checkout importable as `klineage`, with
# gates/ and materialize/ mapped to klineage.gates and klineage.materialize as pyproject's
# package-dir does (the repo is not pip-installed there). The mapping is a small import finder
# loaded at interpreter start by a .pth file, so it holds from any working directory and in the
# gate's child processes (pytest, `python3 -c`, scripts alike).
#
#   source benchmarks/gpu_env.sh && python3 benchmarks/gpu_gate_check.py --out "$OUT"
_kl_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_kl_site=${KLINEAGE_SITE:-/tmp/site}
mkdir -p "$_kl_site"
if ls "$_kl_root"/.whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$_kl_site" "$_kl_root"/.whl/*.whl || echo "gpu_env: wheel install failed" >&2
fi
cat > "$_kl_site/_klineage_repo.py" <<EOF
"""Map klineage.gates and klineage.materialize to $_kl_root/{gates,materialize} (written by benchmarks/gpu_env.sh)."""
import importlib.util
import sys

_MAP = {"klineage.gates": "$_kl_root/gates", "klineage.materialize": "$_kl_root/materialize"}


class _Finder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        folder = _MAP.get(name)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(name, folder + "/__init__.py", submodule_search_locations=[folder])


def install():
    if _Finder not in sys.meta_path:
        sys.meta_path.append(_Finder)
EOF
_kl_pth="$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)/_klineage_repo.pth"
if ! echo "import _klineage_repo; _klineage_repo.install()" > "$_kl_pth" 2>/dev/null; then
  # no writable site-packages: sitecustomize on PYTHONPATH does the same at start-up
  echo "import _klineage_repo; _klineage_repo.install()" > "$_kl_site/sitecustomize.py"
fi
export PATH="$_kl_site/bin:$PATH"  # console scripts of the carried wheels (ninja for load_inline)
export PYTHONPATH="$_kl_site:$_kl_root${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export KLINEAGE_HOME=${KLINEAGE_HOME:-/tmp/klineage_home}
unset _kl_root _kl_site _kl_pth
