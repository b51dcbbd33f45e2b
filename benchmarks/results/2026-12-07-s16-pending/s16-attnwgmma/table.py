"""The closing table of run_gpu.sh: per variant its registers and spills (ptxas, D = 128 kernels,
non-causal / causal), its smoke verdict, and from the two timing-bench runs (bench shape
non-causal, then causal) ms and x SDPA with the cuda protocol's check."""

import json
import re
import sys
from pathlib import Path

root = Path(sys.argv[1])
labels = sys.argv[2].split(",")


def regs(label: str) -> str:
    p = root / "variants" / f"{label}.ptxas.txt"
    if not p.is_file():
        return "-"
    text = p.read_text()
    out = []
    for mask in ("0", "1"):
        m = re.search(rf"attention_wgmmaILi128ELb{mask}E.*?Used (\d+) registers", text, re.S)
        s = re.search(rf"attention_wgmmaILi128ELb{mask}E.*?(\d+) bytes spill stores", text, re.S)
        out.append(f"{m.group(1) if m else '?'}{'' if not s or s.group(1) == '0' else '+spill' + s.group(1)}")
    return "/".join(out)


def smoke(label: str) -> str:
    p = root / "variants" / f"{label}.smoke.json"
    if not p.is_file():
        return "none (hang or crash)" if (root / "variants" / f"{label}.cu").is_file() else "-"
    try:
        doc = json.loads(p.read_text().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return "no result (hang or crash: see .smoke.err)"
    worst = max(
        s["rel_frobenius"] if s["rel_frobenius"] == s["rel_frobenius"] else 9.9 for s in doc["shapes"]
    )
    return f"{'ok' if doc['ok'] else 'WRONG'} {worst:.1e}"


def bench(run: str) -> dict:
    for name in ("materialized_bench.json", "materialized_bench.partial.json"):
        p = root / run / name
        if p.is_file():
            doc = json.loads(p.read_text())
            rows = doc["rows"] if isinstance(doc, dict) else doc
            return rows[0] if rows else {}
    return {}


runs = [bench("bench"), bench("bench_causal")]
print("| variant | regs D128 c0/c1 | smoke | c0 ms | c0 x SDPA | c1 ms | c1 x SDPA | check c0 / c1 |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
sdpa = [f"{r['torch_ms']:.4f}" if r.get("torch_ms") else "-" for r in runs]
print(f"| sdpa | | | {sdpa[0]} | 1.00 | {sdpa[1]} | 1.00 | |")
for lb in labels:
    cells = []
    for r in runs:
        k = r.get(lb, {})
        ms, x = k.get("ms"), k.get("x_torch")
        cells.append((f"{ms:.4f}" if ms else "-", f"{x:.2f}" if x else "-", str(k.get("check", "-"))[:60]))
    print(
        f"| {lb} | {regs(lb)} | {smoke(lb)} | {cells[0][0]} | {cells[0][1]} | {cells[1][0]} | {cells[1][1]} | {cells[0][2]} / {cells[1][2]} |"
    )
