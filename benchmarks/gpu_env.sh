# Source this first in every device command (bash): installs the carried wheels (.whl/, made by
# benchmarks/gpu_setup.sh) into /tmp/site and makes the repo importable as `klineage`, with
# gates/ and materialize/ mapped to klineage.gates and klineage.materialize as pyproject's
# package-dir does (the repo is not pip-installed there).
#
#   source benchmarks/gpu_env.sh && python3 benchmarks/gpu_gate_check.py
_kl_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_kl_site=${KLINEAGE_SITE:-/tmp/site}
mkdir -p "$_kl_site"
if ls "$_kl_root"/.whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$_kl_site" "$_kl_root"/.whl/*.whl || echo "gpu_env: wheel install failed" >&2
fi
# klineage/ as a folder of links, plus gates/ and materialize/ inside it
rm -rf "$_kl_site/klineage"
mkdir -p "$_kl_site/klineage"
for _f in "$_kl_root"/klineage/*; do ln -s "$_f" "$_kl_site/klineage/"; done
ln -s "$_kl_root/gates" "$_kl_site/klineage/gates"
[ -d "$_kl_root/materialize" ] && ln -s "$_kl_root/materialize" "$_kl_site/klineage/materialize"
export PYTHONPATH="$_kl_site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export KLINEAGE_HOME=${KLINEAGE_HOME:-/tmp/klineage_home}
unset _kl_root _kl_site _f
