"""Nsight Compute output parsing (pure; no GPU). The recorded sample comes from the H200."""

from pathlib import Path

import pytest

from klineage.gates.cuda import ncu

DATA = Path(__file__).parent / "data"
RAW = (
    "==PROF== Connected to process 4242 (/usr/bin/python3.12)\n"
    '==PROF== Profiling "softmax_rows" - 0: 0%....50%....100% - 9 passes\n'
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","dram__throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum",'
    '"lts__t_sector_hit_rate.pct","sm__throughput.avg.pct_of_peak_sustained_elapsed",'
    '"sm__warps_active.avg.pct_of_peak_sustained_active",'
    '"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",'
    '"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",'
    '"smsp__average_warps_issue_stalled_selected_per_issue_active.ratio",'
    '"smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio",'
    '"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"\n'
    '"","","","","","","","","","","","%","usecond","%","%","%","ratio","ratio","ratio","ratio","ratio"\n'
    '"0","4242","python3.12","127.0.0.1","softmax_rows(const float *, float *, int, int)","1","13",'
    '"(256, 1, 1)","(8192, 1, 1)","0","9.0","81.52","1,103.46","47.10","40.33","88.27","0.61","11.95",'
    '"1.00","0.25","1.73"\n'
    "==PROF== Disconnected from process 4242\n"
)
LONG = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"\n'
    '"0","1","python","h","k(float *)","1","7","(128, 1, 1)","(4, 1, 1)","0","9.0","Raw",'
    '"gpu__time_duration.sum","nsecond","2,048"\n'
    '"0","1","python","h","k(float *)","1","7","(128, 1, 1)","(4, 1, 1)","0","9.0","Raw",'
    '"sm__throughput.avg.pct_of_peak_sustained_elapsed","%","12.5"\n'
    '"1","1","python","h","klineage_marker_kernel(int)","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","Raw",'
    '"gpu__time_duration.sum","nsecond","9,999"\n'
)


def test_parse_wide_raw_page():
    ks = ncu.parse_csv(RAW)
    assert len(ks) == 1
    k = ks[0]
    assert k.kernel.startswith("softmax_rows")
    assert k.values["gpu__time_duration.sum"] == 1103.46  # thousands separator removed
    assert k.units["gpu__time_duration.sum"] == "usecond"
    s = ncu.summarize(ks)
    assert s is not None
    assert abs(s.duration_us - 1103.46) < 1e-6  # usecond scaled
    assert s.achieved_occupancy_pct == 88.27
    assert s.dram_throughput_pct == 81.52
    assert s.sm_throughput_pct == 40.33
    assert s.l2_hit_rate_pct == 47.10
    # 'selected' is issuing, not stalling: left out of the top three
    assert [r for r, _ in s.top_stalls] == ["long_scoreboard", "wait", "barrier"]
    d = s.to_dict()
    assert d["top_stalls"][0] == {"reason": "long_scoreboard", "cycles_per_issue": 11.95}


def test_parse_long_details_layout_and_exclude_marker():
    ks = ncu.parse_csv(LONG)
    assert {k.kernel for k in ks} == {"k(float *)", "klineage_marker_kernel(int)"}
    s = ncu.summarize(ks, exclude=("klineage_marker_kernel",))
    assert s.kernel == "k(float *)" and s.duration_us == 2.048 and s.sm_throughput_pct == 12.5
    assert s.kernels_profiled == 1


def test_no_csv_means_no_summary():
    assert ncu.parse_csv("==ERROR== Failed to profile\n") == []
    assert ncu.summarize([]) is None


def test_command_line_leaves_clocks_alone_and_profiles_the_range_only():
    cmd = ncu.ncu_command(["python3", "-m", "probe"], "ncu")
    assert cmd[:3] == ["ncu", "--clock-control", "none"]
    assert "--profile-from-start" in cmd and cmd[cmd.index("--profile-from-start") + 1] == "off"
    metrics = cmd[cmd.index("--metrics") + 1]
    assert "sm__warps_active.avg.pct_of_peak_sustained_active" in metrics and "regex:" in metrics
    assert cmd[-3:] == ["python3", "-m", "probe"]
    fallback = ncu.ncu_command(["p"], "ncu", sections=True)
    assert "--metrics" not in fallback and "WarpStateStats" in fallback


def test_recorded_h200_sample():
    """ncu 2025.3 on the H200 (2026-12-02): --page raw also prints every device__attribute_*."""
    text = (DATA / "ncu_raw_sample.txt").read_text()
    ks = ncu.parse_csv(text)
    assert len(ks) == 1 and ks[0].kernel == "softmax_rows(const float *, float *, int, int)"
    s = ncu.summarize(ks, exclude=("klineage_marker_kernel",))
    assert s is not None
    assert s.duration_us == pytest.approx(125.952)
    assert s.achieved_occupancy_pct == 93.48 and s.dram_throughput_pct == 40.87
    assert s.sm_throughput_pct == 50.42 and s.l2_hit_rate_pct == 63.63
    assert [r for r, _ in s.top_stalls] == ["long_scoreboard", "wait", "not_selected"]
    assert s.top_stalls[0][1] == 19.43
