"""benchmarks/gate_stages.py reads what the gate and the resident worker write (issue 26)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from klineage.gates import resident

ROOT = Path(__file__).resolve().parents[1]


def _module():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("gate_stages", ROOT / "benchmarks" / "gate_stages.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["gate_stages"] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def test_worker_times_are_read_back_from_the_log(tmp_path: Path) -> None:
    stages = _module()
    log = tmp_path / "resident-worker.log"
    log.write_text(
        "\n".join(
            [
                resident.times_line("/runs/a", 1.25, 0.5, 0.02, -(300 << 20)),
                "some candidate's printf",
                resident.times_line("/runs/b", 0.0, 0.75, 0.04, 0),
            ]
        )
    )
    per = stages.worker_samples([log, tmp_path / "missing.log"])
    assert per["worker.first_look_s"] == [1.25, 0.0]
    assert per["worker.candidate_s"] == [0.5, 0.75]
    assert per["worker.others_mib"] == [-300.0, 0.0]


def test_profile_phases_and_queue_time_are_tabled() -> None:
    stages = _module()
    result = {
        "elapsed_s": 5.0,
        "stages_s": {"compile_s": 1.0, "device_wait_s": 2.5, "run_s": 1.0, "worker_profile_s": 0.6},
        "timing": {"extra": {"phases_s": {"timing_s": 0.3, "cupti_s": 0.2}}},
    }
    per = stages.stage_samples([(json.loads(json.dumps(result)), None)])
    assert per["profile.cupti_s"] == [0.2] and per["queue_s"] == [0.5]
    rows = stages.table(per)
    assert any(r.startswith("| profile.timing_s | 1 | 0.30 |") for r in rows)
