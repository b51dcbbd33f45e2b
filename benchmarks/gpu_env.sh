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
# installed once per wheel set: scripts that source this side by side (two loops of one call) would
# otherwise race in pip's target-directory swap; the lock serialises the first install
if ls "$_kl_root"/.whl/*.whl >/dev/null 2>&1; then
  _kl_want=$(cd "$_kl_root"/.whl && ls -- *.whl | md5sum | cut -d' ' -f1)
  (
    flock 9
    if [ "$(cat "$_kl_site/.klineage-wheels" 2>/dev/null)" != "$_kl_want" ]; then
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$_kl_site" "$_kl_root"/.whl/*.whl && echo "$_kl_want" > "$_kl_site/.klineage-wheels" \
        || echo "gpu_env: wheel install failed" >&2
    fi
  ) 9> "$_kl_site/.klineage-lock"
fi
_kl_finder=$(mktemp "$_kl_site/.klineage-repo.XXXXXX")
cat > "$_kl_finder" <<EOF
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
mv -f "$_kl_finder" "$_kl_site/_klineage_repo.py"  # whole, never half-written for a process starting now
_kl_pth="$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)/_klineage_repo.pth"
# a process without the site on its path (pip itself, before the export below) skips the finder quietly
_kl_line="import importlib.util as _u; _u.find_spec('_klineage_repo') and __import__('_klineage_repo').install()"
if ! echo "$_kl_line" > "$_kl_pth" 2>/dev/null; then
  # no writable site-packages: sitecustomize on PYTHONPATH does the same at start-up
  echo "$_kl_line" > "$_kl_site/sitecustomize.py"
fi
export PATH="$_kl_site/bin:$PATH"  # console scripts of the carried wheels (ninja for load_inline)
export PYTHONPATH="$_kl_site:$_kl_root${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export KLINEAGE_HOME=${KLINEAGE_HOME:-/tmp/klineage_home}
unset _kl_root _kl_site _kl_pth _kl_line _kl_want _kl_finder
