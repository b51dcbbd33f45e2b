"""`klineage report` on a small mined store: the page is well-formed HTML with every section,
every skill linked and every internal link resolved, escapes kernel code and gate messages,
shows materialization runs when there are some (and says so when there are none), and renders
in headless Chromium to a non-blank screenshot."""

from __future__ import annotations

import fcntl
import fnmatch
import json
import os
import shutil
from pathlib import Path

import pytest

from klineage.cli import main
from klineage.mining import mine_corpus
from klineage.report import write_report
from klineage.report.anchors import skill as skill_anchor
from klineage.skills import Skill, load_skills, upsert
from klineage.store.db import Store
from tests.conftest import REPO
from tests.report_chromium import chromium, dump_dom, png_stats, screenshot
from tests.report_html import Node, StrictTree, parse

CORPUS = REPO / "tests/data/mining"
HOSTILE = "y[3]: got 1 < 2 && NaN </td></table><script>alert(1)</script>"
SECTIONS = ("overview", "workloads", "skills", "materialization", "heldout")


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared small store (about a minute on the CPU emulator), mined once per test run: under
    pytest-xdist the workers share it through their common temporary folder and a file lock."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    db = shared / "report-mined.duckdb"
    with open(shared / "report-mined.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not db.exists():
            partial = shared / "report-mining.duckdb"
            mine_corpus([CORPUS], db=partial, workers=2)
            partial.rename(db)
    return db


def _enrich(db: Path) -> None:
    """What a GPU machine and the materializer would add: timings, a rejected attempt with a
    hostile message, an imported skill with an odd id, materialization and held-out runs."""
    with Store(db) as s:
        expert = s.scalar("SELECT state_hash FROM states WHERE is_expert")
        skills = [k.skill_id for k in load_skills(s)]
        with s.transaction() as con:
            for st in s.rows(
                "SELECT st.depth, g.gate_key, g.result FROM states st JOIN gate_runs g ON g.gate_key = st.gate_key"
            ):
                result = st["result"] | {
                    "timing": {"median_ms": 0.01 * 2 ** st["depth"], "reference_median_ms": 0.05}
                }
                con.execute(
                    "UPDATE gate_runs SET result = ?, device = 'NVIDIA H200' WHERE gate_key = ?",
                    [json.dumps(result), st["gate_key"]],
                )
            site = json.dumps({"summary": "float4 loads of x & y", "anchor": {"line": 9}})
            for sid, category in (("rejected-0001", "mismatch"), ("refused-0001", "refused")):
                con.execute(
                    "INSERT INTO steps (step_id, workload, from_state, operator, site, accepted, category, message)"
                    " VALUES (?, 'scale_test', ?, 'vectorize', ?, false, ?, ?)",
                    [sid, expert, site, category, HOSTILE],
                )
            effects = {
                "per_workload": {
                    "scale_test": {
                        "time_ratio": 2.0,
                        "time_ms": {"without": 0.02, "with": 0.01},
                        "resources": {"registers": 4},
                        "device": "NVIDIA H200",
                    }
                }
            }
            con.execute(
                "UPDATE skills SET effects = ?, admitted = true WHERE skill_id = ?",
                [json.dumps(effects), skills[0]],
            )
            runs = [
                ("r-cur", "heldout_scale", "curriculum", "all", 0.0),
                ("r-rnd", "heldout_scale", "random", "all", 0.0),
                ("r-none", "heldout_scale", "curriculum", "none", 0.0),
                ("r-llm", "scale_test", "curriculum", "all", 0.01),
            ]
            for run_id, wl, order, mode, cost in runs:
                last = 0.04 if mode == "all" else 0.09  # start 0.08 ms: skills reach 2x, no skills 1.6x
                steps = [
                    (skills[1], "kept", "ok", 0.05),
                    ("no-such-skill", "rejected", "mismatch", None),
                    (skills[2], "duplicate", "", None),
                    (skills[2], "kept" if mode == "all" else "not_faster", "ok", last),
                ]
                summary = {
                    "stop_reason": "budget of 3 gated candidates spent",
                    "gated": 3,
                    "speedup": 0.08 / min(t for _, v, _, t in steps if v == "kept"),
                }
                memorization = {
                    "is_copy": False,
                    "closest": {"source": "expert_kernels/x/expert.cu", "ast": 0.31},
                }
                summary |= {"heldout": True, "memorization": memorization} if wl != "scale_test" else {}
                con.execute(
                    "INSERT INTO materialization_runs (run_id, workload, provider, skills_mode, order_mode, budget,"
                    " summary, status, backend) VALUES (?, ?, 'offline', ?, ?, 3, ?, 'improved', 'cuda')",
                    [run_id, wl, mode, order, json.dumps(summary)],
                )
                for i, (skill, verdict, category, t) in enumerate(steps, 1):
                    gated = verdict != "duplicate"
                    con.execute(
                        "INSERT INTO materialization_steps (run_id, step_index, skill_id, operator, gate_key, accepted,"
                        " kept, category, message, time_ms, cost_usd, verdict) VALUES (?, ?, ?, 'op', ?, ?, ?, ?, ?, ?, ?, ?)",
                        [
                            run_id,
                            i,
                            skill if mode == "all" else None,
                            f"g{i}" if gated else None,
                            category == "ok" if gated else None,
                            verdict == "kept",
                            category,
                            HOSTILE if verdict == "rejected" else "",
                            t,
                            cost,
                            verdict,
                        ],
                    )
            con.execute(
                "INSERT INTO kernels (kernel_hash, workload, role, source) VALUES ('b0rken', 'broken_wl', 'expert', ?)",
                ["__global__ void k(float* y) { if (threadIdx.x < 1 && y) y[0] = 1; }"],
            )
            con.execute(
                "INSERT INTO gate_runs (gate_key, kernel_hash, workload, backend, accepted, stage, category, message,"
                " result) VALUES ('gb', 'b0rken', 'broken_wl', 'emu', false, 'compile', 'compile_error', ?, '{}')",
                ["expert.cu:3: error: expected ';' before '<' & more"],
            )
            con.execute(
                "INSERT INTO llm_exchanges (exchange_id, provider, model, input_tokens, output_tokens, cost_usd,"
                " latency_s) VALUES ('x1', 'anthropic', 'claude-test', 1200, 300, 0.01, 1.5)"
            )
        upsert(
            s,
            [
                Skill(
                    skill_id="imported <odd> & id",
                    operator="imported",
                    intent="A card from elsewhere: a < b & c",
                    origin="imported",
                    scope={"workloads": ["elsewhere"]},
                )
            ],
        )


@pytest.fixture(scope="module")
def rich(mined: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("report-rich") / "s.duckdb"
    shutil.copy(mined, db)
    _enrich(db)
    return db


def _render(db: Path, out: Path) -> tuple[str, StrictTree]:
    write_report(db, out)
    html = out.read_text(encoding="utf-8")
    return html, parse(html)


@pytest.fixture(scope="module")
def plain_page(mined: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, StrictTree]:
    out = tmp_path_factory.mktemp("page") / "report.html"
    return (out, *_render(mined, out))


@pytest.fixture(scope="module")
def rich_page(rich: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, StrictTree]:
    out = tmp_path_factory.mktemp("page-rich") / "report.html"
    return (out, *_render(rich, out))


def _section(tree: StrictTree, ident: str) -> Node:
    node = tree.root.find_id(ident)
    assert node is not None, f"no element with id {ident}"
    return node


def _check_structure(tree: StrictTree, db: Path) -> None:
    assert not tree.errors, tree.errors[:5]
    assert not [i for i, n in tree.ids.items() if n > 1], "duplicate ids"
    for ident in SECTIONS:
        assert _section(tree, ident).tag == "section"
    internal = [h for h in tree.root.hrefs() if h.startswith("#")]
    assert internal and not [h for h in internal if h[1:] not in tree.ids], "broken internal links"
    with Store(db, read_only=True) as s:
        skills = load_skills(s)
        workloads = [r["workload"] for r in s.rows("SELECT DISTINCT workload FROM states")]
    overview_links = set(_section(tree, "overview").hrefs())
    for sk in skills:
        target = f"#{skill_anchor(sk.skill_id)}"
        assert _section(tree, skill_anchor(sk.skill_id)).tag == "article"
        assert target in overview_links, f"{sk.skill_id} not linked from the overview"
        for wl in set(sk.scope.get("workloads", [])) & set(workloads):
            assert target in _section(tree, f"wl-{wl}").hrefs(), f"{sk.skill_id} not linked from {wl}"


def test_plain_page_structure(plain_page: tuple[Path, str, StrictTree], mined: Path) -> None:
    _, html, tree = plain_page
    _check_structure(tree, mined)
    assert html.startswith("<!doctype html>")


def test_rich_page_structure(rich_page: tuple[Path, str, StrictTree], rich: Path) -> None:
    _check_structure(rich_page[2], rich)


def test_self_contained(plain_page: tuple[Path, str, StrictTree]) -> None:
    """Nothing to fetch: no external stylesheet, script, image or font."""
    _, html, tree = plain_page
    for n in tree.root.iter():
        assert "src" not in n.attrs, n.tag
        assert not (n.tag == "link" and "stylesheet" in n.attrs.get("rel", "")), n.attrs
    assert "url(http" not in html and "@import" not in html


def test_lineage_drawn_with_code_and_diffs(plain_page: tuple[Path, str, StrictTree], mined: Path) -> None:
    _, _, tree = plain_page
    with Store(mined, read_only=True) as s:
        states = s.rows("SELECT state_hash FROM states WHERE workload = 'scale_test'")
        taken = s.scalar("SELECT count(*) FROM steps WHERE workload = 'scale_test' AND taken")
    wl = _section(tree, "wl-scale_test")
    (graph,) = [n for n in wl.iter() if n.tag == "svg"]
    assert len([n for n in graph.iter() if n.tag == "rect" and "node" in n.attrs.get("class", "")]) == len(
        states
    )
    assert len([n for n in graph.iter() if n.tag == "line" and n.attrs.get("class") == "edge"]) == taken
    for st in states:
        state = _section(tree, f"state-scale_test-{st['state_hash']}")
        kinds = [n.attrs.get("class", "") for n in state.iter() if n.tag == "details"]
        assert "code-view" in kinds and "diff-view" in kinds, kinds
        assert f"#state-scale_test-{st['state_hash']}" in graph.hrefs()
    code = next(n for n in wl.iter() if n.tag == "pre" and "code" in n.attrs.get("class", "")).all_text()
    assert "__global__" in code


def test_empty_materialization_is_explicit(plain_page: tuple[Path, str, StrictTree]) -> None:
    _, _, tree = plain_page
    assert "No materialization runs recorded" in _section(tree, "no-materialization").all_text()
    assert "No held-out runs recorded" in _section(tree, "no-heldout").all_text()


def test_escaping(rich_page: tuple[Path, str, StrictTree]) -> None:
    """A gate message and an imported card full of markup stay text; kernel code keeps its `<`."""
    _, html, tree = rich_page
    assert len([n for n in tree.root.iter() if n.tag == "script"]) == 1
    row = _section(tree, "step-rejected-0001")
    assert HOSTILE in row.all_text() and "mismatch" in row.all_text()
    assert "float4 loads of x & y" in row.all_text()
    assert "&lt;script&gt;alert(1)" in html and "<script>alert(1)" not in html
    assert (
        "A card from elsewhere: a < b & c" in _section(tree, skill_anchor("imported <odd> & id")).all_text()
    )
    code = " ".join(n.all_text() for n in tree.root.iter() if n.tag == "pre")
    assert "k < ITEMS" in code


def test_rejected_and_refused_attempts(rich_page: tuple[Path, str, StrictTree]) -> None:
    _, _, tree = rich_page
    broken = _section(tree, "wl-broken_wl").all_text()  # an expert that fails its own gate: shown as skipped
    assert (
        "Skipped" in broken and "compile_error: expert.cu:3: error: expected ';' before '<' & more" in broken
    )
    assert "attempt-rejected" in _section(tree, "step-rejected-0001").attrs["class"]
    assert "attempt-refused" in _section(tree, "step-refused-0001").attrs["class"]


def test_timings_and_effects(rich_page: tuple[Path, str, StrictTree], rich: Path) -> None:
    _, _, tree = rich_page
    graph = next(n for n in _section(tree, "wl-scale_test").iter() if n.tag == "svg").all_text()
    assert "0.0100 ms" in graph and "2.00x" in graph
    assert "NVIDIA H200" in _section(tree, "overview").all_text()
    with Store(rich, read_only=True) as s:
        admitted = s.scalar("SELECT skill_id FROM skills WHERE admitted")
    card = _section(tree, skill_anchor(admitted))
    assert "admitted" in card.all_text() and "2.00×" in card.all_text()
    plot = [n for n in card.iter() if n.tag == "svg"]
    assert plot and any(n.attrs.get("class") == "bar" for n in plot[0].iter())


def test_materialization_and_heldout(rich_page: tuple[Path, str, StrictTree], rich: Path) -> None:
    _, _, tree = rich_page
    mat = _section(tree, "materialization")
    for run in ("r-cur", "r-rnd", "r-none", "r-llm"):
        assert _section(tree, f"run-{run}").tag == "details"
    plots = [n for n in mat.iter() if n.tag == "svg"]
    assert len(plots) == 3  # two workloads by candidates, one by dollars (only the LLM run cost money)
    legend = plots[0].all_text() + plots[1].all_text()
    assert all(arm in legend for arm in ("curriculum", "random", "no skills"))
    assert "speedup over start" in legend
    text = mat.all_text()
    assert "no-such-skill" in text and "#skill-no-such-skill" not in mat.hrefs()
    with Store(rich, read_only=True) as s:
        tried = [k for k in load_skills(s) if k.origin == "mined"][1].skill_id
    assert f"#{skill_anchor(tried)}" in mat.hrefs()
    assert "claude-test" in text
    held = _section(tree, "heldout")
    rows = [n for n in held.iter() if n.tag == "tr"]
    assert (
        len(rows) == 2 and "heldout_scale" in rows[1].all_text()
    )  # scale_test contributed skills: not held out
    assert "2.00×" in rows[1].all_text() and "1.60×" in rows[1].all_text() and "0.31" in rows[1].all_text()
    assert "improved" in rows[1].all_text() and "flagged" not in rows[1].all_text()
    curve = next(n for n in plots[0].iter() if n.tag == "path" and n.attrs.get("class") == "series")
    assert curve.attrs["d"].count("H") == 3  # three gated candidates: the duplicate spent no budget


def _run_cli(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.argv", ["klineage", *argv])
    with pytest.raises(SystemExit) as e:
        main()
    captured = capsys.readouterr()
    return int(e.value.code or 0), captured.out, captured.err


def test_cli(
    mined: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sub" / "r.html"
    code, stdout, _ = _run_cli(["report", "--db", str(mined), "--out", str(out)], monkeypatch, capsys)
    assert code == 0 and out.is_file() and str(out.resolve()) in stdout
    for argv, needle in (
        (["report", "--db", str(tmp_path / "none.duckdb")], "no such database"),
        (["report", "--db", str(mined), "--out", str(tmp_path)], "is a directory"),
    ):
        code, stdout, err = _run_cli(argv, monkeypatch, capsys)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2 and stdout == "" and len(lines) == 1 and needle in lines[0], err


def test_screenshot_in_chromium(plain_page: tuple[Path, str, StrictTree], tmp_path: Path) -> None:
    if chromium() is None:
        pytest.skip(
            "no chromium binary on PATH (CI installs Debian's chromium in .ci/run; apt-get install chromium)"
        )
    png = tmp_path / "report.png"
    screenshot(plain_page[0], png, 1280, 2000)
    width, height, colours = png_stats(png)
    assert (width, height) == (1280, 2000)
    assert png.stat().st_size > 20_000
    assert colours > 50, "the screenshot is blank"
    dom = dump_dom(plain_page[0])  # the script ran to its end: it shows the filter controls last
    assert '<div id="controls">' in dom and "wl-scale_test" in dom


def test_templates_ship_as_package_data() -> None:
    """The templates are a declared package whose files all match pyproject's package-data."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert {"klineage.report", "klineage.report.templates"} <= set(cfg["packages"])
    patterns = cfg["package-data"]["*"]
    templates = [
        p for p in (REPO / "klineage/report/templates").iterdir() if p.suffix != ".py" and p.is_file()
    ]
    assert templates and all(any(fnmatch.fnmatch(p.name, pat) for pat in patterns) for p in templates)
