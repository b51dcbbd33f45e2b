"""Headless Chromium for the report test: render an HTML file to a PNG screenshot, and look at
the PNG (decoded with Pillow, which matplotlib already depends on) to prove it is not blank."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

# Flags that work in a container without a display, a sandbox, a GPU or the network.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def chromium() -> str | None:
    """The Chromium binary (Debian's `chromium` package), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(html: Path, args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    binary = chromium()
    if binary is None:
        raise FileNotFoundError("no chromium binary on PATH (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="klineage-chromium-") as profile:
        cmd = [binary, *FLAGS, f"--user-data-dir={profile}", *args, html.resolve().as_uri()]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)


def dump_dom(html: Path, timeout_s: float = 120.0) -> str:
    """The DOM after the page's scripts ran (how a reader with JavaScript on sees it)."""
    proc = _run(html, ["--dump-dom"], timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"chromium failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout


def screenshot(
    html: Path, png: Path, width: int = 1280, height: int = 2000, timeout_s: float = 120.0
) -> None:
    """Render `html` (opened as file://, so nothing comes from the network) into `png`."""
    proc = _run(html, [f"--screenshot={png}", f"--window-size={width},{height}"], timeout_s)
    if proc.returncode != 0 or not png.is_file():
        raise RuntimeError(f"chromium failed ({proc.returncode}): {proc.stderr[-2000:]}")


def png_stats(png: Path) -> tuple[int, int, int]:
    """(width, height, number of distinct colours) of a PNG."""
    from PIL import Image

    with Image.open(png) as im:
        rgb = im.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20)
        return rgb.width, rgb.height, len(colours) if colours is not None else 1 << 20
