"""benchmarks/materialized_bench.py, now a thin wrapper of `klineage timings bench`
(tests/test_timing_bench.py tests the command): the script's path keeps its options, its
listing, its one-line errors and its exit codes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_timing_bench import _index

_spec = importlib.util.spec_from_file_location(
    "materialized_bench", REPO / "benchmarks/materialized_bench.py"
)
assert _spec is not None and _spec.loader is not None
mb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mb)


def test_dry_run_counts_the_distinct_curve_kernels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    naive = (REPO / "expert_kernels/softmax/naive.cu").read_text()
    idx = _index(
        tmp_path,
        {
            ("curriculum", "softmax", 1): "a",
            ("curriculum", "softmax", 2): "b",
            ("random-s0", "softmax", 1): naive,
            ("random-s0", "softmax", 2): "b",
            ("none", "sgemm", 1): "s",
            ("none", "sgemm", 2): "s",
        },
    )
    assert mb.main(["--suite", "corpus", "--curve", str(idx), "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("sgemm 2 ") and out[1].startswith(
        "softmax 3 "
    )  # naive, a, b (and sgemm: naive, s)
    assert out[-1] == "5 distinct kernels over 2 workloads"
    assert (
        mb.main(["--suite", "corpus", "--curve", str(idx), "--ks", "1", "--only", "softmax", "--dry-run"])
        == 0
    )
    assert capsys.readouterr().out.splitlines()[0].startswith("softmax 2 ")  # random-s0@1 is the naive text
    assert mb.main(["--suite", "corpus", "--curve", str(tmp_path / "nope.json"), "--dry-run"]) == 2
    assert mb.main(["--suite", "corpus", "--dry-run"]) == 2  # neither --run nor --curve


def test_any_workload_folder_and_kernel_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A workload folder outside the repository and kernel files anywhere: listed by --dry-run."""
    wl = tmp_path / "my_workload"
    wl.mkdir()
    (wl / "workload.py").write_text((REPO / "examples/row_sum/workload.py").read_text())
    (wl / "naive.cu").write_text((REPO / "examples/row_sum/naive.cu").read_text())
    mine = tmp_path / "elsewhere" / "mine.cu"
    mine.parent.mkdir()
    mine.write_text((REPO / "examples/row_sum/expert.cu").read_text())
    assert (
        mb.main(["--workload", str(wl), "--kernel", f"fast={mine}", "--kernel", str(mine), "--dry-run"]) == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("my_workload 2 ") and "'fast'" in out and "'mine'" in out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--workload", "/nonexistent/wl"], "--workload /nonexistent/wl: no workload.py"),
        (["--kernel", "k.cu"], "--kernel needs exactly one --workload"),
    ],
)
def test_bad_workload_or_kernel_is_one_line(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert mb.main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [words] or words in err and len(err.strip().splitlines()) == 1


def test_without_a_gpu_it_says_so_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    code = mb.main(
        [
            "--workload",
            str(REPO / "examples/row_sum"),
            "--kernel",
            str(REPO / "examples/row_sum/expert.cu"),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "no CUDA GPU visible here" in err[0]
