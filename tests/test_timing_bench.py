"""`klineage timings bench` (klineage/timing_bench/), the parts that need no GPU: the budget index,
the dedup of identical texts, the speedups and the budget-curve tables, the command on a faked GPU,
its help and its bad input. (Moved from tests/test_materialized_bench.py, which keeps the tests of
the script's path, now a thin wrapper.)"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from klineage.cli import run_command
from klineage.corpus import COMPUTE_BOUND
from klineage.timing_bench import gpu, select, tables
from tests.conftest import REPO


def bench(argv: list[str]) -> int:
    """`klineage timings bench ARGV` in this process (so a test can fake the GPU), its exit status."""
    return run_command(["timings", "bench", *argv])


def _index(tmp_path: Path, texts: dict[tuple[str, str, int], str], budget: int = 2) -> Path:
    """A curve.json like materialize_bench.py writes, its files under tmp_path/curve/."""
    entries = []
    for (label, wl, k), text in texts.items():
        f = tmp_path / "curve" / label / wl / f"budget-{k}.cu"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
        mode = label.split("-s")[0]
        entries.append(
            {
                "label": label,
                "mode": mode,
                "seed": int(label.split("-s")[1]) if "-s" in label else 0,
                "workload": wl,
                "k": k,
                "file": str(f.relative_to(tmp_path)),
                "applied": [],
            }
        )
    labels = list(dict.fromkeys(e["label"] for e in entries))
    (tmp_path / "curve.json").write_text(json.dumps({"budget": budget, "labels": labels, "entries": entries}))
    return tmp_path / "curve.json"


def test_load_curve_reads_and_filters_the_index(tmp_path: Path) -> None:
    idx = _index(
        tmp_path,
        {
            ("curriculum", "softmax", 1): "a",
            ("curriculum", "softmax", 2): "b",
            ("random-s0", "softmax", 1): "c",
            ("random-s0", "softmax", 2): "b",
            ("curriculum", "other", 1): "z",
        },
    )
    c = select.load_curve(idx, ["softmax"])
    assert c["budget"] == 2 and c["ks"] == [1, 2]
    assert [lb["label"] for lb in c["labels"]] == ["curriculum", "random-s0"]
    assert [lb["mode"] for lb in c["labels"]] == ["curriculum", "random"]
    assert c["files"][("softmax", "random-s0@2")] == tmp_path / "curve/random-s0/softmax/budget-2.cu"
    assert ("other", "curriculum@1") not in c["files"]
    only = select.load_curve(idx, ["softmax"], labels={"random-s0"}, ks={2})
    assert list(only["files"]) == [("softmax", "random-s0@2")] and only["ks"] == [2]
    (tmp_path / "curve/curriculum/softmax/budget-1.cu").unlink()
    with pytest.raises(FileNotFoundError, match="budget-1.cu is missing"):
        select.load_curve(idx, ["softmax"])


def test_identical_texts_are_one_kernel(tmp_path: Path) -> None:
    for name, text in [("n.cu", "naive"), ("a.cu", "x"), ("b.cu", "x"), ("c.cu", "naive")]:
        (tmp_path / name).write_text(text)
    files = {
        ("w", "naive"): tmp_path / "n.cu",
        ("w", "a"): tmp_path / "a.cu",
        ("w", "b"): tmp_path / "b.cu",
        ("w", "c"): tmp_path / "c.cu",
        ("v", "a"): tmp_path / "a.cu",
    }
    sources, digest = select.distinct_sources(files)
    assert len(sources) == 3  # w: naive and x; v: x (each workload is timed at its own shapes)
    assert digest[("w", "a")] == digest[("w", "b")] == digest[("v", "a")] != digest[("w", "naive")]
    assert (
        digest[("w", "c")] == digest[("w", "naive")]
        and sources[("w", digest[("w", "naive")])] == tmp_path / "n.cu"
    )
    pat = select.pattern_files(["w", "missing"], [("naive", str(tmp_path / "{name}.cu"))])
    assert pat == {} and select.pattern_files(["n"], [("naive", str(tmp_path / "{name}.cu"))]) == {
        ("n", "naive"): tmp_path / "n.cu"
    }


def _timed(ms: dict[tuple[str, str], float | str]) -> dict[tuple[str, str], dict]:
    return {
        key: ({"check": "ok", "ms": v} if isinstance(v, float) else {"check": v}) for key, v in ms.items()
    }


def test_curve_tables_geomeans_per_mode_and_group() -> None:
    labels = [
        {"label": "curriculum", "mode": "curriculum"},
        {"label": "random-s0", "mode": "random"},
        {"label": "random-s1", "mode": "random"},
        {"label": "none", "mode": "none"},
    ]
    # two workloads; digests stand for texts: n = naive, f = 4x faster, g = 2x faster, h = 8x faster
    digest = {}
    for w in ("m", "c"):
        digest.update(
            {
                (w, "naive"): "n",
                (w, "curriculum@1"): "f",
                (w, "curriculum@2"): "h",
                (w, "random-s0@1"): "n",
                (w, "random-s0@2"): "h",
                (w, "random-s1@1"): "g",
                (w, "random-s1@2"): "g",
                (w, "none@1"): "n",
                (w, "none@2"): "n",
            }
        )
    timed = _timed(
        {(w, h): t for w in ("m", "c") for h, t in [("n", 8.0), ("f", 2.0), ("g", 4.0), ("h", 1.0)]}
    )
    timed[("c", "g")] = {"check": "mismatch: wrong"}  # random-s1 on c failed its check: no speedup there
    cols = [tables.curve_column(lb["label"], k) for lb in labels for k in (1, 2)]
    x = tables.speedups(["m", "c"], cols, digest, timed)
    assert (
        x[("m", "curriculum@1")] == 4.0 and x[("m", "random-s1@1")] == 2.0 and x[("c", "random-s1@1")] is None
    )
    text, summary = tables.curve_tables(
        x, {"memory-bound": ["m"], "compute-bound": ["c"], "other": []}, labels, [1, 2]
    )
    mem, comp = summary["memory-bound"], summary["compute-bound"]
    assert "other" not in summary
    assert mem[0]["curriculum"]["geomean"] == 4.0
    r = mem[0]["random"]  # seeds: 1.0x and 2.0x at k=1
    assert math.isclose(r["geomean"], math.sqrt(2.0)) and r["min"] == 1.0 and r["max"] == 2.0 and r["n"] == 2
    assert mem[1]["random"]["min"] == 2.0 and math.isclose(mem[1]["random"]["max"], 8.0)
    assert mem[1]["none"]["geomean"] == 1.0
    assert comp[0]["random"]["n"] == 1 and comp[0]["random"]["geomean"] == 1.0  # only seed 0 counted
    lines = text.splitlines()
    assert "| k | curriculum | random (geomean of 5 seeds) |" not in text
    assert "| k | curriculum | random (geomean of 2 seeds) | random min | random max | none |" in lines
    assert "| 1 | 4.00 | 1.41 | 1.00 | 2.00 | 1.00 |" in lines  # memory-bound
    assert (
        "| 2 | 8.00 | 8.00 (1/2) | 8.00 (1/2) | 8.00 (1/2) | 1.00 |" in lines
    )  # compute-bound: a seed missing
    assert "| m | random-s1 | 2.00 | 2.00 |" in lines and "| c | random-s1 | - | - |" in lines
    # area under the curve: the geomean over k; per seed, then over seeds; a seed's hole spoils it
    area = summary["area"]["memory-bound"]
    assert math.isclose(area["curriculum"]["area"], math.sqrt(32.0))
    assert math.isclose(area["random"]["area"], math.sqrt(math.sqrt(8.0) * 2.0))
    assert area["random"]["min"] == 2.0 and math.isclose(area["random"]["max"], math.sqrt(8.0))
    assert "| area | 5.66 | 2.38 | 2.00 | 2.83 | 1.00 |" in lines
    assert summary["area"]["compute-bound"]["random"]["area"] is None
    assert "| area | 5.66 | - | - | - | 1.00 |" in lines


def test_corpus_groups_keep_the_compute_bound_workloads_apart() -> None:
    names = sorted(d.name for d in (REPO / "expert_kernels").iterdir() if (d / "naive.cu").is_file())
    g = tables.groups_of("corpus", names)
    assert (
        {"sgemm", "gemm_bf16", "attention_fwd", "linear_relu_bf16", "attention_gqa"}
        <= set(COMPUTE_BOUND)
        <= set(names)
    )
    assert g["compute-bound"] == sorted(COMPUTE_BOUND) and g["memory-bound"] == sorted(
        set(names) - set(g["compute-bound"])
    )
    assert g["other"] == [] and tables.groups_of("heldout", ["a", "b"]) == {"all": ["a", "b"]}


class _Summary:
    def __init__(self, ms: float) -> None:
        self.median_ms = ms
        self.trial_medians_ms, self.min_ms, self.max_ms = [ms, ms * 1.01], ms * 0.99, ms * 1.02


def _fake_gpu(monkeypatch: pytest.MonkeyPatch, bad: str = "") -> None:
    """The GPU half of main() replaced: a kernel's time is the number after 'ms=' in its text
    (naive.cu, with none: 8 ms); a text containing `bad` fails its check."""
    from types import SimpleNamespace

    import torch

    import klineage.gates.cuda.runner as runner_mod
    import klineage.gates.cuda.timing as timing_mod
    import klineage.gates.protocol as protocol_mod

    def ms_of(text: str) -> float:
        return float(text.split("ms=")[1].split()[0]) if "ms=" in text else 8.0

    monkeypatch.setattr(
        gpu,
        "build_all",
        lambda jobs, root: {
            (w, h): SimpleNamespace(ok=True, library=path, message="") for w, h, path in jobs
        },
    )
    monkeypatch.setattr(
        runner_mod, "CudaRunner", lambda lib, wl, dev: SimpleNamespace(text=Path(lib).read_text())
    )
    monkeypatch.setattr(
        protocol_mod,
        "check_workload",
        lambda wl, r, shapes, seeds: SimpleNamespace(
            ok=not (bad and bad in r.text),
            category="ok" if not (bad and bad in r.text) else "mismatch",
            message="m",
        ),
    )
    monkeypatch.setattr(
        gpu, "time_variant", lambda r, bench, stream, budget_s, slow_ok: (_Summary(ms_of(r.text)), 1, 1)
    )
    monkeypatch.setattr(
        timing_mod, "Bench", lambda wl, b, dev: SimpleNamespace(vendor_call=lambda: None, refill=None)
    )
    monkeypatch.setattr(timing_mod, "timed", lambda *a, **k: SimpleNamespace(summary=_Summary(4.0)))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d: "fake GPU")
    monkeypatch.setattr(torch.cuda, "current_stream", lambda d: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)


def test_main_times_each_text_once_and_prints_the_curve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_gpu(monkeypatch, bad="BAD")
    texts = {}
    for w in ("softmax", "sgemm"):
        texts.update(
            {
                ("curriculum", w, 1): "ms=2",
                ("curriculum", w, 2): "ms=1",
                ("random-s0", w, 1): "ms=4",
                ("random-s0", w, 2): "ms=1",
                ("random-s1", w, 1): (REPO / f"expert_kernels/{w}/naive.cu").read_text(),
                ("random-s1", w, 2): "ms=2",
                ("none", w, 1): "ms=8 x",
                ("none", w, 2): "ms=8 x",
            }
        )
    texts[("none", "sgemm", 2)] = "ms=8 BAD"
    idx = _index(tmp_path, texts)
    out = tmp_path / "out"
    assert bench(["--suite", "corpus", "--curve", str(idx), "--out", str(out)]) == 1  # sgemm none@2 failed
    log = capsys.readouterr().out
    doc = json.loads((out / "materialized_bench.json").read_text())
    rows = {r["name"]: r for r in doc["rows"]}
    assert set(rows) == {"sgemm", "softmax"}
    # 16 curve points, 5 texts: naive (random-s1@1 is naive.cu again), ms=2, ms=1, ms=4, ms=8 x
    assert len(rows["softmax"]["kernels"]) == 5
    mem = doc["curve"]["summary"]["memory-bound"]
    assert mem[0]["curriculum"]["geomean"] == pytest.approx(4.0) and mem[1]["curriculum"][
        "geomean"
    ] == pytest.approx(8.0)
    assert mem[0]["random"]["min"] == pytest.approx(1.0) and mem[0]["random"]["max"] == pytest.approx(2.0)
    assert mem[0]["none"]["geomean"] == pytest.approx(1.0)
    assert doc["curve"]["summary"]["compute-bound"][1]["none"]["n"] == 0
    assert "memory-bound (1: softmax)" in log and "compute-bound (1: sgemm)" in log
    assert "| 2 | 8.00 | 5.66 | 4.00 | 8.00 | 1.00 |" in log
    assert "| 2 | 8.00 | 5.66 | 4.00 | 8.00 | - (0/1) |" in log  # sgemm: none's kernel failed its check
    assert "not ok: sgemm none@2" in log
    # past the deadline nothing is timed, the tables still come, and that alone is no failure
    assert (
        bench(
            [
                "--suite",
                "corpus",
                "--curve",
                str(idx),
                "--only",
                "softmax",
                "--deadline-s",
                "0",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    log = capsys.readouterr().out
    assert "5 kernels not timed (--deadline-s 0 passed): softmax" in log and "| 1 | - (0/1) |" in log


def test_main_with_runs_reports_each_family_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_gpu(monkeypatch)
    for w, text in [("softmax", "ms=2"), ("layernorm", "ms=1"), ("sgemm", "ms=4")]:
        (tmp_path / w).mkdir()
        (tmp_path / w / "best.cu").write_text(text)
    assert (
        bench(
            [
                "--suite",
                "corpus",
                "--only",
                "softmax,layernorm,sgemm",
                "--run",
                f"curriculum={tmp_path}/{{name}}/best.cu",
            ]
        )
        == 0
    )
    log = capsys.readouterr().out
    assert "memory-bound (2), curriculum: 2 kernels checked ok, geomean x naive 5.66" in log
    assert "compute-bound (1), curriculum: 1 kernels checked ok, geomean x naive 2.00" in log


def _klineage(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "klineage", *argv], capture_output=True, text=True, timeout=120, cwd=REPO
    )


def test_the_command_lists_its_options_without_a_gpu() -> None:
    r = _klineage("timings", "bench", "--help")
    assert r.returncode == 0, r.stderr
    for option in ("--suite", "--workload", "--kernel", "--only", "--run", "--curve", "--extra", "--labels"):
        assert option in r.stdout
    for option in ("--ks", "--budget-s", "--out", "--dry-run", "--deadline-s"):
        assert option in r.stdout
    assert "bench" in _klineage("timings", "--help").stdout


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--suite", "nope", "--run", "a={name}.cu"], "--suite nope: unknown (known: corpus, heldout)"),
        (["--suite", "corpus", "--run", "a=best.cu"], "--run LABEL=PATTERN needs {name} in the pattern"),
        (["--suite", "corpus", "--curve", "/nonexistent/curve.json"], "--curve /nonexistent/curve.json:"),
        (["--suite", "corpus", "--extra", "/nonexistent/index.json"], "--extra /nonexistent/index.json:"),
        (["--suite", "corpus", "--budget-s", "fast", "--run", "a={name}.cu"], "--budget-s"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], words: str) -> None:
    r = _klineage("timings", "bench", *argv)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and words in err[0], r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_bad_curve_budgets_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    idx = _index(tmp_path, {("curriculum", "softmax", 1): "a"})
    assert bench(["--suite", "corpus", "--curve", str(idx), "--ks", "one", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: --curve {idx}:")


def test_the_script_and_the_command_list_the_same_kernels(tmp_path: Path) -> None:
    """benchmarks/materialized_bench.py is the command: the same listing, byte for byte."""
    idx = _index(tmp_path, {("curriculum", "softmax", 1): "a", ("none", "softmax", 1): "b"})
    args = ["--suite", "corpus", "--curve", str(idx), "--dry-run"]
    script = subprocess.run(
        [sys.executable, str(REPO / "benchmarks/materialized_bench.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    command = _klineage("timings", "bench", *args)
    assert script.returncode == command.returncode == 0, script.stderr + command.stderr
    assert script.stdout == command.stdout and script.stdout.endswith("3 distinct kernels over 1 workloads\n")


def test_a_workload_is_timed_holding_the_host_wide_device_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every kernel of a workload and its torch call are timed while this process holds the cuda
    gate's device lock, so a bench beside a materializer's loop takes turns with its gates (faked
    GPU: the Bench, the stream and the timing are stand-ins)."""
    import types

    import torch

    from klineage.gates.cuda import timing
    from klineage.gates.cuda.device_lock import is_held as lock_is_held

    monkeypatch.setenv("KLINEAGE_GPU_LOCK_DIR", str(tmp_path))
    held: list[bool] = []

    def fake_kernel(k: dict, *_a: object) -> None:
        held.append(lock_is_held())
        k["check"] = "ok"

    def fake_timed(*_a: object, **_k: object) -> object:
        held.append(lock_is_held())
        return types.SimpleNamespace(summary=types.SimpleNamespace(median_ms=1.0))

    monkeypatch.setattr(
        timing, "Bench", lambda *a: types.SimpleNamespace(vendor_call=lambda: None, refill=None)
    )
    monkeypatch.setattr(timing, "timed", fake_timed)
    monkeypatch.setattr(gpu, "time_kernel", fake_kernel)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    dev = gpu.Device(None, "fake", "0", 0.1, lambda: False)
    row = gpu.time_workload(
        "softmax",
        REPO / "expert_kernels" / "softmax",
        {("softmax", "a"): None, ("softmax", "b"): None},
        dev,
        None,
    )
    assert "error" not in row and row["torch_ms"] == 1.0 and held == [True, True, True]
    assert not lock_is_held() and row["device_wait_s"] >= 0
