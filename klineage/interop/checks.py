"""Checks an importer runs before it writes anything: does the reference run, with finite
results, on the inputs the gate will draw? A reference that fails on its own inputs is a
workload problem, reported as such, never later as a kernel `crash`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from klineage.workload import Workload


def _why(e: BaseException) -> str:
    msg = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {msg[:200]}" if msg else type(e).__name__


def _short(b: Mapping[str, int]) -> str:
    """A binding without the per-tensor dimension names (x0_d1, out0_d0, p_..._d0)."""
    keep = {k: v for k, v in b.items() if not k.startswith(("x", "out", "p_"))} or dict(b)
    return "{" + ", ".join(f"{k}={v}" for k, v in keep.items()) + "}"


def reference_problems(wl: Workload, shape_sets: Sequence[str] = ("emu", "test")) -> list[str]:
    """One line per shape (of these sets) where the reference raises or gives NaN on the gate's
    own inputs (seed 0)."""
    out = []
    for sset in shape_sets:
        for b in wl.shape_set(sset):
            try:
                got = wl.run_reference(wl.make_inputs(b, seed=0))
            except Exception as e:
                out.append(f"the reference fails on its own inputs at {sset} {_short(b)}: {_why(e)}")
                continue
            bad = [
                k
                for k, v in got.items()
                if isinstance(v, torch.Tensor) and v.is_floating_point() and bool(torch.isnan(v).any())
            ]
            if bad:  # NaN never passes the gate; an infinity can be right (the log-sum-exp of nothing)
                out.append(
                    f"the reference gives NaN in {', '.join(bad)} on its own inputs at {sset} {_short(b)}"
                )
    return out


def vendor_problems(wl: Workload, shape_sets: Sequence[str] = ("emu", "test")) -> list[str]:
    """Whether some kernel can pass: the workload's vendor (torch at the problem's own precision)
    run on the gate's inputs, compared with the reference as the gate compares a kernel. A
    failure here means the tolerance or the inputs leave no room for a correct kernel."""
    from klineage.gates.protocol import compare

    if wl.vendor is None:
        return []
    out = []
    for sset in shape_sets:
        for b in wl.shape_set(sset):
            inputs = wl.make_inputs(b, seed=0)
            want = wl.run_reference(inputs)
            kwargs = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
            got = wl.vendor(**kwargs)
            got = dict(
                zip(
                    [t.name for t in wl.outputs],
                    got if isinstance(got, list | tuple) else [got],
                    strict=False,
                )
            )
            for t in wl.outputs:
                ok, max_abs, max_rel, idx = compare(
                    got[t.name].reshape(want[t.name].shape), want[t.name], wl.tolerance_for(t)
                )
                if not ok:
                    out.append(
                        f"torch itself misses the tolerance on '{t.name}' at {sset} {_short(b)} "
                        f"(max abs err {max_abs:.3g}, first at {idx})"
                    )
    return out
