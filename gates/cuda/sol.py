"""Speed of light: the device's measured ceilings, and the workload's floor time under them.

A result faster than physics allows is a measurement that escaped (work on another stream, a
cached output, a timer that stopped early), not an achievement: the gate flags it `suspicious`
instead of accepting its timing. Ceilings are measured, not taken from a datasheet: a large
device-to-device copy (bytes read + written over time) and large matrix products on random
data, once per process and cached on disk per device name and driver.
The arithmetic is pure and CPU-tested; `measure` needs a GPU.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: a result may beat the measured ceiling by this factor before it is suspicious: torch's copy
#: and cuBLAS are not perfect, and a hand kernel can come a little closer to the hardware
DEFAULT_MARGIN = 1.15
#: matrix-rate key used as the compute ceiling per tensor dtype (fp32 kernels may legally use
#: tf32 tensor cores; integer kernels may use int8 MMA at about twice the bf16 rate)
RATE_FOR_DTYPE = {
    "bfloat16": "bf16",
    "float16": "bf16",
    "float32": "tf32",
    "float64": "tf32",
}
INT_RATE_FACTOR = 2.0


@dataclass
class Ceilings:
    """Measured device ceilings: bytes/s (read + written) and FLOP/s per matrix mode."""

    device: str
    driver: str
    copy_bytes_per_s: float
    matmul_flops_per_s: dict[str, float] = field(default_factory=dict)
    measured_at: str = ""

    def rate_for(self, dtypes: list[str]) -> float | None:
        """The compute ceiling for a workload with these tensor dtypes: the fastest mode any
        of them may use (a generous ceiling never flags an honest kernel)."""
        rates: list[float] = []
        for dt in dtypes:
            key = RATE_FOR_DTYPE.get(dt)
            if key and key in self.matmul_flops_per_s:
                rates.append(self.matmul_flops_per_s[key])
            elif key is None and "bf16" in self.matmul_flops_per_s:
                rates.append(INT_RATE_FACTOR * self.matmul_flops_per_s["bf16"])
        return max(rates) if rates else None


@dataclass
class Bound:
    """The floor time (ms) of one workload shape, and which term sets it."""

    bytes_ms: float
    flops_ms: float | None

    @property
    def floor_ms(self) -> float:
        return max(self.bytes_ms, self.flops_ms or 0.0)

    @property
    def limiter(self) -> str:
        return "compute" if (self.flops_ms or 0.0) > self.bytes_ms else "memory"


def bound(bytes_moved: float, flops: float | None, ceilings: Ceilings, dtypes: list[str]) -> Bound:
    """Bytes over copy bandwidth; FLOPs over the matrix rate for these dtypes."""
    bytes_ms = 1000.0 * bytes_moved / ceilings.copy_bytes_per_s if ceilings.copy_bytes_per_s > 0 else 0.0
    rate = ceilings.rate_for(dtypes)
    flops_ms = 1000.0 * flops / rate if (flops and rate) else None
    return Bound(bytes_ms, flops_ms)


def fractions(
    time_ms: float, bytes_moved: float, flops: float | None, ceilings: Ceilings, dtypes: list[str]
) -> tuple[float | None, float | None]:
    """(achieved bytes/s over copy bandwidth, achieved FLOP/s over the matrix rate)."""
    if time_ms <= 0:
        return None, None
    seconds = time_ms / 1000.0
    bw = (bytes_moved / seconds) / ceilings.copy_bytes_per_s if ceilings.copy_bytes_per_s > 0 else None
    rate = ceilings.rate_for(dtypes)
    fl = (flops / seconds) / rate if (flops and rate) else None
    return bw, fl


def is_suspicious(time_ms: float, b: Bound, margin: float = DEFAULT_MARGIN) -> bool:
    """Faster than the floor divided by the margin."""
    return b.floor_ms > 0 and time_ms * margin < b.floor_ms


def describe(time_ms: float, b: Bound, ceilings: Ceilings) -> str:
    return (
        f"{time_ms:.4g} ms is faster than the speed of light for this shape: {b.floor_ms:.4g} ms "
        f"({b.limiter}-bound floor: bytes {b.bytes_ms:.4g} ms at {ceilings.copy_bytes_per_s / 1e12:.3g} TB/s"
        + (f", FLOPs {b.flops_ms:.4g} ms" if b.flops_ms else "")
        + f", measured on {ceilings.device}); work escaped the timed window or the output was not computed"
    )


# ---- cache ---------------------------------------------------------------------------------


def cache_path() -> Path:
    env = os.environ.get("KLINEAGE_SOL_CACHE")
    if env:
        return Path(env)
    from klineage.paths import home

    return home() / "sol.json"


def cache_key(device: str, driver: str) -> str:
    return f"{device}|driver {driver}"


def load_cached(path: Path, device: str, driver: str) -> Ceilings | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    entry = data.get(cache_key(device, driver)) if isinstance(data, dict) else None
    if not isinstance(entry, dict):
        return None
    try:
        return Ceilings(**entry)
    except TypeError:
        return None


def store_cached(path: Path, c: Ceilings) -> None:
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            data = {}
    except (OSError, json.JSONDecodeError):
        data = {}
    data[cache_key(c.device, c.driver)] = asdict(c)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(path)


# ---- measurement (GPU) ---------------------------------------------------------------------

_MEMO: dict[str, Ceilings] = {}


def driver_version() -> str:
    """The NVIDIA driver version (NVML, else nvidia-smi), '?' when neither answers."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else str(v)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - NVML missing or unusable: fall back
        pass
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        ).stdout
        return out.strip().splitlines()[0] if out.strip() else "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def _time_ms(fn: Any, reps: int) -> float:
    import torch

    from klineage.gates.cuda.stats import median

    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return median(times)


def measure(copy_bytes: int = 1 << 30, mm: int = 8192) -> Ceilings:
    """Copy bandwidth and bf16 / tf32 / fp32 matrix rates on random data (about 2 s)."""
    import torch

    dev = torch.device("cuda", torch.cuda.current_device())
    src = torch.randn(copy_bytes // 4, device=dev)
    dst = torch.empty_like(src)
    copy_ms = _time_ms(lambda s=src, d=dst: d.copy_(s), 10)
    del src, dst
    rates: dict[str, float] = {}
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    try:
        for key, dtype, n, tf32 in (
            ("bf16", torch.bfloat16, mm, False),
            ("tf32", torch.float32, mm, True),
            ("fp32", torch.float32, mm // 2, False),
        ):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(n, n, device=dev, dtype=dtype)
            b = torch.randn(n, n, device=dev, dtype=dtype)
            ms = _time_ms(lambda a=a, b=b: torch.mm(a, b), 5)
            rates[key] = 2.0 * n**3 / (ms / 1000.0)
            del a, b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32_before
    torch.cuda.empty_cache()
    return Ceilings(
        device=torch.cuda.get_device_name(dev),
        driver=driver_version(),
        copy_bytes_per_s=2.0 * copy_bytes / (copy_ms / 1000.0),
        matmul_flops_per_s=rates,
        measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )


def ceilings(path: Path | None = None, overrides: Mapping[str, Any] | None = None) -> Ceilings:
    """Measured once per process, cached on disk per device and driver."""
    import torch

    if overrides:
        return Ceilings(**overrides)
    device = torch.cuda.get_device_name(torch.cuda.current_device())
    if device in _MEMO:
        return _MEMO[device]
    path = path or cache_path()
    driver = driver_version()
    c = load_cached(path, device, driver)
    if c is None:
        c = measure()
        try:
            store_cached(path, c)
        except OSError:
            pass
    _MEMO[device] = c
    return c
