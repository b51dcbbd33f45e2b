"""The gate's child process, through both start paths: forked from the pre-imported zygote
(gates/zygote.py) and exec'd fresh (KLINEAGE_GATE_FORK=0, or an LD_PRELOAD in the backend's env).
A kernel that prints, segfaults or hangs must get the same verdict and the same captured output
either way; the zygote restarts when killed, and a run it dies under is redone fresh."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from klineage.gates import child, zygote
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate

VADD = Path(__file__).parent / "kernels" / "emu" / "vadd"

#: host code in `launch` misbehaves as the ZT_MODE environment variable says (print / segv / hang)
KERNEL = r"""
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <unistd.h>
__global__ void vadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void launch(const float* a, const float* b, float* c, int N, cudaStream_t stream) {
  const char* m = getenv("ZT_MODE");
  printf("launch N=%d\n", N);
  fprintf(stderr, "stderr N=%d\n", N);
  if (m && m[0] == 's') raise(SIGSEGV);
  if (m && m[0] == 'h') { for (;;) pause(); }
  vadd<<<(N + 255) / 256, 256, 0, stream>>>(a, b, c, N);
}
"""


def _gate_both(
    mode: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spy: list[child.ChildOutcome],
    timeout_s: float = 60.0,
) -> dict[str, tuple[dict, child.ChildOutcome]]:
    monkeypatch.setenv("ZT_MODE", mode)
    out = {}
    for fork in ("1", "0"):
        monkeypatch.setenv("KLINEAGE_GATE_FORK", fork)
        r = gate(
            KERNEL,
            VADD,
            GateOptions(timeout_s=timeout_s),
            name="zt.cu",
            use_cache=False,
            cache_root=tmp_path / fork,
        )
        d = r.to_dict()
        d.pop("elapsed_s")
        d.pop("stages_s")
        out[fork] = (d, spy[-1])
    assert out["1"][1].via == "zygote" and out["0"][1].via == "exec"
    assert out["1"][0] == out["0"][0]
    return out


def test_printing_kernel_same_output_both_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: list[child.ChildOutcome]
) -> None:
    out = _gate_both("print", tmp_path, monkeypatch, spy)
    d, fork = out["1"]
    assert d["category"] == "ok", d["message"]
    fresh = out["0"][1]
    assert (fork.stdout, fork.stderr) == (fresh.stdout, fresh.stderr)
    assert "launch N=77" in fork.stdout + fork.stderr and "stderr N=77" in fork.stderr
    assert fork.returncode == fresh.returncode == 0


def test_segfaulting_kernel_is_a_crash_both_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: list[child.ChildOutcome]
) -> None:
    out = _gate_both("segv", tmp_path, monkeypatch, spy)
    d, fork = out["1"]
    assert d["category"] == "crash" and "SIGSEGV" in d["message"], d["message"]
    assert fork.returncode == out["0"][1].returncode == -signal.SIGSEGV
    assert fork.stderr == out["0"][1].stderr


def test_hanging_kernel_is_a_timeout_both_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: list[child.ChildOutcome]
) -> None:
    out = _gate_both("hang", tmp_path, monkeypatch, spy, timeout_s=6.0)
    d, fork = out["1"]
    assert d["category"] == "timeout", d["message"]
    assert fork.timed_out and fork.returncode == -9
    assert "stderr N=" in fork.stderr


def _payload_run(
    tmp_path: Path, env: dict[str, str] | None = None, timeout_s: float = 60.0
) -> child.ChildOutcome:
    """A worker run whose payload is bad (no library): the worker reports a crash verdict."""
    payload = {
        "library": str(tmp_path / "missing.so"),
        "workload_dir": str(VADD),
        "options": GateOptions().key_fields() | {"timeout_s": timeout_s},
    }
    return child.run_worker(payload, tmp_path / "run", timeout_s, env=env)


def test_opt_out_uses_fresh_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KLINEAGE_GATE_FORK", "0")
    assert not child.fork_enabled({})
    out = _payload_run(tmp_path)
    assert out.via == "exec" and out.result is not None and out.result["category"] == "crash"


def test_ld_preload_uses_fresh_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KLINEAGE_GATE_FORK", raising=False)
    assert child.fork_enabled({"KLEMU_LAUNCH_CPU_S": "2"})
    env = {"LD_PRELOAD": "libc.so.6"}
    assert not child.fork_enabled(env)
    out = _payload_run(tmp_path, env)
    assert out.via == "exec" and out.result is not None and out.result["category"] == "crash"


def test_killed_zygote_is_restarted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KLINEAGE_GATE_FORK", raising=False)
    first = _payload_run(tmp_path / "a")
    assert first.via == "zygote" and first.result is not None
    z = zygote._current
    assert z is not None
    os.kill(z.proc.pid, signal.SIGKILL)
    z.proc.wait()
    second = _payload_run(tmp_path / "b")
    assert second.via == "zygote" and second.result is not None and second.result["category"] == "crash"
    assert zygote._current is not z


def _children_of(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(entry))
    return kids


def test_run_under_a_dying_zygote_is_redone_fresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: list[child.ChildOutcome]
) -> None:
    """The child outlives its zygote (it is in its own session) but nobody can report its status:
    the caller kills it and runs the candidate in a fresh interpreter."""
    monkeypatch.delenv("KLINEAGE_GATE_FORK", raising=False)
    monkeypatch.setenv("ZT_MODE", "hang")
    assert _payload_run(tmp_path / "warm").via == "zygote"  # the zygote is up
    z = zygote._current
    assert z is not None
    orphans: list[int] = []

    def kill_zygote_once_it_forked() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not orphans:
            orphans.extend(_children_of(z.proc.pid))
            time.sleep(0.05)
        os.kill(z.proc.pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_zygote_once_it_forked)
    killer.start()
    r = gate(
        KERNEL, VADD, GateOptions(timeout_s=5.0), name="zt.cu", use_cache=False, cache_root=tmp_path / "c"
    )
    killer.join()
    assert r.category == "timeout"
    assert orphans and spy[-1].via == "exec" and spy[-1].timed_out
    time.sleep(0.2)
    for pid in orphans:  # the orphaned child was killed, not left hanging
        assert (
            not Path(f"/proc/{pid}").exists()
            or "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3]
        )


#: a kernel whose launcher prints the OpenMP wait policy its process was given
ENV_KERNEL = KERNEL.replace(
    'printf("launch N=%d\\n", N);',
    'const char* w = getenv("OMP_WAIT_POLICY"); printf("wait=%s\\n", w ? w : "(unset)");',
)


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(e.decode().split("=", 1) for e in raw if b"=" in e)


@pytest.mark.parametrize("caller", [None, "ACTIVE"])
def test_children_wait_passively_unless_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: list[child.ChildOutcome], caller: str | None
) -> None:
    """Gate children (both paths) and the zygote they fork from get OMP_WAIT_POLICY=PASSIVE
    (torch's OpenMP threads otherwise spin against the compilers); a caller's own value wins."""
    assert ENV_KERNEL != KERNEL
    if caller is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", caller)
    want = caller or "PASSIVE"
    seen = {}
    for fork in ("1", "0"):
        monkeypatch.setenv("KLINEAGE_GATE_FORK", fork)
        r = gate(ENV_KERNEL, VADD, GateOptions(), name="env.cu", use_cache=False, cache_root=tmp_path / fork)
        assert r.category == "ok", r.message
        seen[spy[-1].via] = spy[-1].stdout + spy[-1].stderr
        if fork == "1":
            z = zygote._current
            assert z is not None and _environ(z.proc.pid).get("OMP_WAIT_POLICY") == want
            assert "OMP_WAIT_POLICY" not in z.env or caller is not None  # the caller's env is not changed
    assert set(seen) == {"zygote", "exec"}
    for out in seen.values():
        assert f"wait={want}" in out
    assert os.environ.get("OMP_WAIT_POLICY") == caller
