"""Issue 3's adversarial suite on the emu backend, through the real gate (child process and all):
plausible-looking wrong kernels must be rejected with the right category, right ones accepted."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate

K = Path(__file__).parent / "kernels" / "emu"

# (kernel, workload, expected category, sanitize, words the message must contain)
CASES = [
    # correct kernels
    ("rowsum/shfl_reduce.cu", "rowsum", "ok", False, ()),
    ("rowsum/shfl_reduce.cu", "rowsum", "ok", True, ()),
    ("rowsum/cg_reduce.cu", "rowsum", "ok", False, ()),
    ("rowsum/atomic_add.cu", "rowsum_atomic", "ok", False, ()),
    ("rowsum_h/good.cu", "rowsum_h", "ok", False, ()),
    ("scale_bf16/good.cu", "scale_bf16", "ok", False, ()),
    ("hist/good.cu", "hist", "ok", False, ()),
    ("vadd/good.cu", "vadd", "ok", False, ()),
    ("vadd/dyn_smem.cu", "vadd", "ok", False, ()),
    # wrong kernels
    ("rowsum/missing_sync.cu", "rowsum", "nondeterministic", False, ("output 'y'", "index")),
    ("rowsum/warp_sync_no_syncwarp.cu", "rowsum", "nondeterministic", False, ()),
    ("rowsum/unwritten_smem_slots.cu", "rowsum", "nondeterministic", False, ()),
    ("rowsum/atomic_add.cu", "rowsum", "nondeterministic", False, ()),
    ("rowsum_h/wrong_order.cu", "rowsum_h", "mismatch", False, ()),
    ("vadd/oob_tail_read.cu", "vadd", "out_of_bounds", True, ("oob_tail_read.cu:8", "vadd4")),
    ("vadd/unwritten_tail.cu", "vadd", "unwritten_output", False, ()),
    ("vadd/writes_input.cu", "vadd", "input_mutated", False, ("'a'",)),
    ("vadd/hardcoded_size.cu", "vadd", "mismatch", False, ()),
    ("vadd/untouched_output.cu", "vadd", "unwritten_output", False, ()),
    (
        "vadd/invalid_pointer.cu",
        "vadd",
        "crash",
        False,
        ("kernel 'vadd'", "invalid memory access", "invalid_pointer.cu:6"),
    ),
    ("vadd/spin_flag.cu", "vadd", "timeout", False, ()),
    # global-only loads (ld.global.*) of a local or shared address: the GPU faults
    ("vadd/ldg_register_copy.cu", "vadd", "crash", False, ("__ldg at line 10", "local memory")),
    ("vadd/ldg_local_fiber.cu", "vadd", "crash", False, ("__ldg at line 8", "local memory")),
    ("vadd/ldcs_shared.cu", "vadd", "crash", False, ("__ldcs at line 9", "shared memory")),
    ("vadd/ldg_register_copy.cu", "vadd", "crash", True, ("__ldg at line 10", "local memory")),
    ("vadd/inline_ptx.cu", "vadd", "unsupported", False, ("inline_ptx.cu:6", "mov.u32")),
    # a block wider than the kernel's __launch_bounds__: a GPU refuses the launch
    (
        "vadd/launch_bounds_exceeded.cu",
        "vadd",
        "crash",
        False,
        ("256 threads exceeds __launch_bounds__(128)", "vadd"),
    ),
    ("vadd/launch_bounds_template.cu", "vadd", "crash", False, ("exceeds __launch_bounds__(64)",)),
    ("vadd/launch_bounds_fits.cu", "vadd", "ok", False, ()),
    # launches on another stream than the launcher's argument, as the GPU gate's CUPTI window sees them
    ("vadd/default_stream.cu", "vadd", "side_stream", False, ("default stream", "kernel 'vadd'")),
    ("vadd/side_stream.cu", "vadd", "side_stream", False, ("stream other than the launch stream",)),
]


def _gate(kernel: str, workload: str, sanitize: bool, tmp_path: Path, timeout_s: float = 120.0):
    opts = GateOptions(backend="emu", sanitize=sanitize, timeout_s=timeout_s)
    return gate(K / kernel, K / workload, opts, use_cache=False, cache_root=tmp_path)


@pytest.mark.parametrize(
    ("kernel", "workload", "want", "sanitize", "words"),
    CASES,
    ids=[f"{c[0]}-{c[1]}{'-asan' if c[3] else ''}" for c in CASES],
)
def test_gate_category(
    kernel: str, workload: str, want: str, sanitize: bool, words: tuple[str, ...], tmp_path: Path
) -> None:
    timeout = 16.0 if want == "timeout" else 120.0  # the runtime's watchdog fires after 2 CPU-s
    r = _gate(kernel, workload, sanitize, tmp_path, timeout)
    assert r.category == want, r.message
    assert r.accepted == (want == "ok")
    assert r.backend == "emu"
    assert r.timing is None
    for w in words:
        assert w in r.message, r.message
