"""compute-sanitizer report parsing and command lines (pure; no GPU)."""

from pathlib import Path

from klineage.gates.cuda.sanitize import parse_report, sanitizer_command

DATA = Path(__file__).parent / "data"

MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at poke_past_end(float *, unsigned long)+0x70 in /tmp/klineage/abc/build/kernel.cu:47
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f2a1c00003c is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f2a1c000000 of size 60 bytes
=========
========= ERROR SUMMARY: 1 error
"""
RACECHECK = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at softmax_rows_racy(const float *, float *, int, int)+0x3a0 in /w/kernel.cu:61
=========     and Read access at softmax_rows_racy(const float *, float *, int, int)+0x400 in /w/kernel.cu:64 [128 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""
CLEAN = """========= COMPUTE-SANITIZER
probe: one launch at {'M': 3, 'N': 5} done
========= ERROR SUMMARY: 0 errors
"""


def test_memcheck_finding_names_the_line():
    f = parse_report("memcheck", MEMCHECK)
    assert f is not None and f.category == "out_of_bounds"
    assert f.location == "kernel.cu:47"
    assert f.headline.startswith("Invalid __global__ write of size 4 bytes")
    assert f.message().startswith("kernel.cu:47: compute-sanitizer memcheck: Invalid __global__ write")


def test_racecheck_finding_is_nondeterminism():
    f = parse_report("racecheck", RACECHECK)
    assert f is not None and f.category == "nondeterministic"
    assert f.location == "kernel.cu:61"
    assert "/w/" not in f.headline  # paths shortened to the file name


def test_clean_reports():
    assert parse_report("memcheck", CLEAN) is None
    assert (
        parse_report("racecheck", "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n")
        is None
    )


def test_summary_without_headline_still_counts():
    f = parse_report("memcheck", "========= ERROR SUMMARY: 3 errors\n")
    assert f is not None and f.count == 3


def test_commands():
    m = sanitizer_command("memcheck", ["python3", "-m", "p"])
    assert m[:3] == ["compute-sanitizer", "--tool", "memcheck"] and "--error-exitcode" in m
    r = sanitizer_command("racecheck", ["python3"])
    assert "--racecheck-report" in r and r[-1] == "python3"


def test_recorded_h200_memcheck_sample():
    """compute-sanitizer on the H200 (2026-12-02), benchmarks/kernels/gpu_check/oob.cu."""
    f = parse_report("memcheck", (DATA / "sanitizer_memcheck_sample.txt").read_text())
    assert f is not None and f.category == "out_of_bounds"
    assert f.location == "kernel.cu:52"
    assert f.headline == "Invalid __global__ read of size 4 bytes"


def test_recorded_h200_racecheck_sample():
    """racecheck on the H200 (2026-12-02), benchmarks/kernels/gpu_check/racy.cu: the write at
    line 43 and the read at line 46 with no barrier between them."""
    f = parse_report("racecheck", (DATA / "sanitizer_racecheck_sample.txt").read_text())
    assert f is not None and f.category == "nondeterministic"
    assert f.location == "kernel.cu:43"
    assert f.headline.startswith("Error: Potential RAW hazard detected at __shared__")
    assert "with kernel.cu:46" in f.headline and f.count >= 1
