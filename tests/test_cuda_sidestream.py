"""The CUPTI window check of the cuda backend on synthetic torch.profiler traces (pure; no GPU)."""

from klineage.gates.cuda.sidestream import activities, analyze
from klineage.gates.cuda.support import MARKER_KERNEL


def kernel(name, stream, ts, dur, cat="kernel"):
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "ts": ts,
        "dur": dur,
        "args": {"stream": stream, "device": 0},
    }


def trace(*events):
    cpu = {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "ts": 0.0, "dur": 5.0, "args": {}}
    ann = {
        "ph": "X",
        "cat": "gpu_user_annotation",
        "name": "x",
        "ts": 0.0,
        "dur": 500.0,
        "args": {"stream": 99},
    }
    return {"traceEvents": [cpu, ann, *events]}


MARK = f"{MARKER_KERNEL}(int)"


def test_honest_window():
    t = trace(
        kernel(MARK, 13, 100.0, 1.5), kernel("softmax_rows", 13, 103.0, 60.0), kernel(MARK, 13, 165.0, 1.5)
    )
    r = analyze(activities(t))
    assert r.traced and r.ok and r.launch_stream == 13
    assert [a.name for a in r.inside] == ["softmax_rows"]
    assert abs(r.kernel_ms - 0.060) < 1e-12
    assert abs(r.window_us - (165.0 - 101.5)) < 1e-9
    assert "inside the timed window" in r.message()


def test_side_stream_kernel_is_foreign():
    t = trace(
        kernel(MARK, 13, 100.0, 1.5), kernel(MARK, 13, 104.0, 1.5), kernel("softmax_rows", 21, 103.0, 60.0)
    )
    r = analyze(activities(t))
    assert r.traced and not r.ok
    assert r.foreign[0].stream == 21
    msg = r.message()
    assert "stream 21" in msg and "launch stream 13" in msg and "side stream" in msg


def test_memcpy_on_other_stream_and_deferred_kernel():
    t = trace(
        kernel(MARK, 13, 100.0, 1.0),
        kernel("Memcpy DtoD (Device -> Device)", 7, 102.0, 10.0, cat="gpu_memcpy"),
        kernel(MARK, 13, 120.0, 1.0),
        kernel("late_kernel", 13, 5000.0, 30.0),
    )
    r = analyze(activities(t))
    assert len(r.foreign) == 1 and r.foreign[0].category == "gpu_memcpy"
    assert [a.name for a in r.outside] == ["late_kernel"]
    assert "after the timed window" in r.message()
    d = r.to_dict()
    assert d["foreign"] == ["gpu_memcpy:Memcpy DtoD (Device -> Device)@stream7"]


def test_without_markers_nothing_is_claimed():
    r = analyze(activities(trace(kernel("softmax_rows", 13, 0.0, 1.0))))
    assert not r.traced and r.ok and "not checked" in r.note


def test_activities_ignore_cpu_events_and_sort():
    acts = activities(trace(kernel("b", 1, 5.0, 1.0), kernel("a", 1, 2.0, 1.0)))
    assert [a.name for a in acts] == ["a", "b"]
