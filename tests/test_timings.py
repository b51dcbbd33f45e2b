"""GPU times measured apart (`klineage timings export|import`): states out, times in, skills' effects
and the lineage's coverage from them; bad files change nothing."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

from klineage import lineage
from klineage.mining import mine_corpus
from klineage.skills import load_skills
from klineage.store.db import Store
from klineage.timing_bench.select import load_extra
from tests.conftest import REPO
from tests.test_cli import run_cli

WL = "scale_test"


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("timings") / "s.duckdb"
    mine_corpus([REPO / "tests/data/mining"], db=db, workers=2)
    return db


def _fresh_copy(mined: Path, tmp_path: Path) -> Path:
    db = tmp_path / "s.duckdb"
    db.write_bytes(mined.read_bytes())
    return db


def _states(db: Path) -> list[dict]:
    with Store(db, read_only=True) as s:
        return s.rows("SELECT state_hash, depth FROM states WHERE workload = ? ORDER BY depth", [WL])


def _naive(db: Path) -> str:
    with Store(db, read_only=True) as s:
        return s.scalar("SELECT kernel_hash FROM kernels WHERE workload = ? AND role = 'naive'", [WL])


def _bench_doc(db: Path, ms_of_depth, naive_ms: float = 40.0) -> dict:  # noqa: ANN001 - depth -> ms
    kernels = {r["state_hash"]: {"check": "ok", "ms": ms_of_depth(r["depth"])} for r in _states(db)}
    kernels[_naive(db)] = {"check": "ok", "ms": naive_ms}
    kernels["0123456789abcdef"] = {"check": "ok", "ms": 1.0}  # a kernel no state has
    kernels["fedcba9876543210"] = {"check": "correctness: wrong values"}
    return {
        "date": "2026-12-03 01:00 UTC",
        "device": "Test GPU",
        "torch": "t",
        "rows": [{"name": WL, "bench": {"N": 7}, "torch_ms": 0.5, "kernels": kernels}],
    }


def test_export_writes_every_state_named_by_its_hash(
    mined: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    code, out, _ = run_cli(
        ["timings", "export", "--db", str(mined), "--out", str(tmp_path / "st")], monkeypatch, capsys
    )
    assert code == 0 and "states of 1 workloads" in out
    index = json.loads((tmp_path / "st/index.json").read_text())
    files = index["files"][WL]
    assert len(files) == len(_states(mined)) >= 3
    for rel in files:  # the digest materialized_bench gives a file is the state's hash
        path = tmp_path / "st" / rel
        assert hashlib.sha256(path.read_bytes()).hexdigest()[:16] == path.stem
    assert load_extra(tmp_path / "st/index.json", [WL]).keys() == {(WL, f"extra:{r}") for r in files}
    assert load_extra(tmp_path / "st/index.json", ["other"]) == {}
    (tmp_path / "st" / files[0]).unlink()
    with pytest.raises(FileNotFoundError):
        load_extra(tmp_path / "st/index.json", [WL])
    code, _, err = run_cli(
        ["timings", "export", "--db", str(mined), "--out", str(tmp_path / "x"), "--only", "nope"],
        monkeypatch,
        capsys,
    )
    assert code == 2 and "no lineage for nope" in err


def test_export_untimed_leaves_out_the_timed_states_and_puts_the_root_first(
    mined: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    db = _fresh_copy(mined, tmp_path)
    states = _states(db)  # by depth: the expert first, the root last
    doc = _bench_doc(db, lambda d: 2.0 + d)
    deepest = states[-1]["state_hash"]
    timed_hash = states[0]["state_hash"]
    doc["rows"][0]["kernels"] = {timed_hash: doc["rows"][0]["kernels"][timed_hash]}  # only the expert timed
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(doc))
    assert run_cli(["timings", "import", str(bench), "--db", str(db)], monkeypatch, capsys)[0] == 0
    code, out, _ = run_cli(
        ["timings", "export", "--db", str(db), "--out", str(tmp_path / "u"), "--untimed"], monkeypatch, capsys
    )
    files = json.loads((tmp_path / "u/index.json").read_text())["files"][WL]
    assert code == 0 and f"wrote {len(states) - 1} states" in out
    assert f"{WL}/{timed_hash}.cu" not in files and files[0] == f"{WL}/{deepest}.cu"
    code, out, _ = run_cli(
        ["timings", "export", "--db", str(db), "--out", str(tmp_path / "a")], monkeypatch, capsys
    )
    assert code == 0 and f"wrote {len(states)} states" in out  # without the flag: every state


def test_import_gives_skills_a_time_effect_and_the_lineage_its_coverage(
    mined: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    db = _fresh_copy(mined, tmp_path)
    with Store(db, read_only=True) as s:
        assert all(sk.effects["per_workload"][WL]["time_ratio"] == "unmeasured" for sk in load_skills(s))
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(_bench_doc(db, lambda d: 2.0 + d)))  # each backward step adds 1 ms
    code, out, _ = run_cli(["timings", "import", str(bench), "--db", str(db), "--json"], monkeypatch, capsys)
    rep = json.loads(out)
    assert code == 0 and rep["imported"] == {WL: len(_states(db)) + 1}  # the states and the naive kernel
    assert rep["not_states"] == 1 and rep["not_ok"] == 1 and rep["refreshed"] == [WL]
    with Store(db, read_only=True) as s:
        g = lineage.build(s, WL)
        skills = load_skills(s)
        steps = s.rows("SELECT operator, from_state, to_state FROM steps WHERE workload = ? AND taken", [WL])
    depth = {r["state_hash"]: r["depth"] for r in _states(db)}
    for sk in skills:
        e = sk.effects["per_workload"][WL]
        st = next(x for x in steps if x["operator"] == sk.operator)
        assert e["time_ratio"] == pytest.approx(
            (2.0 + depth[st["to_state"]]) / (2.0 + depth[st["from_state"]])
        )
        assert e["device"] == "Test GPU" and e["time_ms"]["with"] == 2.0 + depth[st["from_state"]]
    t = g.graph["timing"]
    root_ms = 2.0 + g.nodes[g.graph["root"]]["depth"]
    assert (
        t["naive_ms"] == 40.0 and t["expert_ms"] == 2.0 and t["root_ms"] == root_ms and t["torch_ms"] == 0.5
    )
    assert t["coverage"] == pytest.approx(math.log(root_ms / 2.0) / math.log(40.0 / 2.0))
    assert all(d["time_ms"] for _, d in g.nodes(data=True))
    assert all(d["effect"].endswith("x") for _, _, d in g.edges(data=True))
    code, out, _ = run_cli(["lineage", WL, "--db", str(db)], monkeypatch, capsys)
    assert code == 0 and json.loads(out)["timing"]["coverage"] == pytest.approx(t["coverage"])
    code, out, _ = run_cli(["skills", "list", "--db", str(db)], monkeypatch, capsys)
    assert code == 0 and f"{WL}: " in out and "x" in out
    code, out, _ = run_cli(["timings", "coverage", "--db", str(db), "--json"], monkeypatch, capsys)
    assert code == 0 and json.loads(out) == [{"workload": WL, **t}]
    # a later import on the same device replaces the times: no duplicate rows
    bench.write_text(json.dumps(_bench_doc(db, lambda d: 1.0 + 2 * d)))
    assert run_cli(["timings", "import", str(bench), "--db", str(db)], monkeypatch, capsys)[0] == 0
    with Store(db, read_only=True) as s:
        assert s.scalar("SELECT count(*) FROM kernel_timings") == len(_states(db)) + 1
        assert lineage.build(s, WL).graph["timing"]["expert_ms"] == 1.0
    # the report's Devices box counts the imported times instead of saying there are none
    page = tmp_path / "report.html"
    assert run_cli(["report", "--db", str(db), "--out", str(page)], monkeypatch, capsys)[0] == 0
    html = page.read_text()
    assert "No GPU timings in this store" not in html
    assert "<td>Test GPU</td><td>timings import</td>" in html
    assert "No skill admitted in" in html and "klineage heldout" in html  # where admissions live


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not JSON"),
        (json.dumps({"rows": []}), "not a materialized_bench.py result"),
        (json.dumps({"device": "G", "rows": [{"kernels": {}}]}), "rows[0] needs a 'name'"),
        (
            json.dumps(
                {
                    "device": "G",
                    "rows": [{"name": WL, "kernels": {"0123456789abcdef": {"check": "ok", "ms": 1.0}}}],
                }
            ),
            "none of the timed kernels is a state",
        ),
        (None, "cannot read"),
    ],
)
def test_bad_timings_files_change_nothing(
    mined: Path, tmp_path: Path, monkeypatch, capsys, content: str | None, message: str
) -> None:
    db = _fresh_copy(mined, tmp_path)
    bench = tmp_path / "bench.json"
    if content is not None:
        bench.write_text(content)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_bench_doc(db, lambda d: 2.0 + d)))
    pairs = (
        [[good, bench]] if "none of" not in message else []
    )  # with a good file beside it, that one is fine
    for files in [[bench], *pairs]:  # every file is read and checked before anything is written
        code, out, err = run_cli(
            ["timings", "import", *map(str, files), "--db", str(db)], monkeypatch, capsys
        )
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    with Store(db, read_only=True) as s:
        assert s.scalar("SELECT count(*) FROM kernel_timings") == 0
        assert all(sk.effects["per_workload"][WL]["time_ratio"] == "unmeasured" for sk in load_skills(s))


def test_mean_coverage_is_over_the_defined_ones_uncapped_and_capped() -> None:
    assert lineage.mean_coverage([0.5, None, 2.0]) == pytest.approx((1.25, 0.75))
    assert lineage.mean_coverage([None]) is None


def test_coverage_prints_the_mean_and_refuses_an_unknown_workload(
    mined: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    db = _fresh_copy(mined, tmp_path)
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(_bench_doc(db, lambda d: 2.0 + d)))
    assert run_cli(["timings", "import", str(bench), "--db", str(db)], monkeypatch, capsys)[0] == 0
    code, out, _ = run_cli(["timings", "coverage", "--db", str(db), "--only", WL], monkeypatch, capsys)
    with Store(db, read_only=True) as s:
        cov = lineage.build(s, WL).graph["timing"]["coverage"]
    assert (
        code == 0
        and f"mean coverage over 1 workloads: {cov:.3f} ({min(cov, 1.0):.3f} with each capped" in out
    )
    code, _, err = run_cli(["timings", "coverage", "--db", str(db), "--only", "nope"], monkeypatch, capsys)
    assert code == 2 and "--only: no lineage for nope" in err
