"""The CLI contract: exit codes, one clear error line on bad input, --json is one document."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from klineage.cli import main
from tests.conftest import EXAMPLES


def run_cli(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.argv", ["klineage", *argv])
    with pytest.raises(SystemExit) as e:
        main()
        raise SystemExit(0)
    captured = capsys.readouterr()
    return int(e.value.code or 0), captured.out, captured.err


def test_doctor_json(monkeypatch, capsys) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    code, out, _ = run_cli(["doctor", "--json"], monkeypatch, capsys)
    checks = {c["name"]: c for c in json.loads(out)}
    assert checks["tree-sitter-cuda"]["ok"]
    assert checks["ANTHROPIC_API_KEY"]["detail"].startswith("not set")
    assert code in (0, 1)


def test_doctor_never_prints_the_key(monkeypatch, capsys) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-value-123")
    _, out, err = run_cli(["doctor", "--json"], monkeypatch, capsys)
    assert "secret-value" not in out + err
    assert {c["name"]: c for c in json.loads(out)}["ANTHROPIC_API_KEY"]["detail"] == "present"


def test_provider_failure_in_mine_is_one_line_exit_3(monkeypatch, capsys, tmp_path) -> None:
    from klineage.llm import LLMError

    def failing(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise LLMError("anthropic API refused the request (claude-x): AuthenticationError 401: [bad key]")

    monkeypatch.setattr("klineage.mining.mine_corpus", failing)
    code, out, err = run_cli(["mine", str(tmp_path), "--llm", "anthropic"], monkeypatch, capsys)
    assert code == 3 and out == ""
    assert (
        err.strip() == "error: LLM provider failed: anthropic API refused the request (claude-x): "
        "AuthenticationError 401: [bad key]"
    )


def test_doctor_shows_the_llm_model_pricing_date_and_base_url(monkeypatch, capsys) -> None:
    from klineage.llm.models import default_model
    from klineage.llm.pricing import PRICES_AS_OF

    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://user:hunter2@127.0.0.1:9")
    _, out, err = run_cli(["doctor", "--json"], monkeypatch, capsys)
    checks = {c["name"]: c for c in json.loads(out)}
    assert checks["LLM default model"]["detail"].startswith(default_model() + " ($")
    assert checks["LLM pricing table"]["detail"] == f"taken {PRICES_AS_OF}"
    assert checks["ANTHROPIC_BASE_URL"]["ok"] and checks["ANTHROPIC_BASE_URL"]["detail"] == "set"
    assert "hunter2" not in out + err


def _one_line_error(code: int, out: str, err: str, needle: str) -> None:
    assert code == 2
    assert out == ""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err
    assert "Traceback" not in err


def test_gate_missing_file(monkeypatch, capsys) -> None:
    _one_line_error(
        *run_cli(["gate", "nope.cu", "--workload", str(EXAMPLES / "row_sum")], monkeypatch, capsys),
        "nope.cu: no such file",
    )


def test_gate_unknown_backend(monkeypatch, capsys) -> None:
    k = str(EXAMPLES / "row_sum/naive.cu")
    _one_line_error(*run_cli(["gate", k, "--backend", "tpu"], monkeypatch, capsys), "unknown backend 'tpu'")


def test_gate_folder_without_workload(tmp_path: Path, monkeypatch, capsys) -> None:
    k = tmp_path / "k.cu"
    k.write_text('extern "C" void launch() {}\n')
    _one_line_error(*run_cli(["gate", str(k)], monkeypatch, capsys), "no workload.py")


def test_gate_workload_that_raises(tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "workload.py").write_text("raise RuntimeError('boom')\n")
    k = tmp_path / "k.cu"
    k.write_text('extern "C" void launch() {}\n')
    _one_line_error(*run_cli(["gate", str(k)], monkeypatch, capsys), "RuntimeError: boom")


def test_gate_not_utf8(tmp_path: Path, monkeypatch, capsys) -> None:
    k = tmp_path / "k.cu"
    k.write_bytes(b'// caf\xe9\nextern "C" void launch() {}\n')
    _one_line_error(
        *run_cli(["gate", str(k), "--workload", str(EXAMPLES / "row_sum")], monkeypatch, capsys), "not UTF-8"
    )


def test_gate_parse_error_is_a_rejection(tmp_path: Path, monkeypatch, capsys) -> None:
    k = tmp_path / "k.cu"
    k.write_text(
        '__global__ void k(float* y) { y[0] = ; }\nextern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t s) {}\n'
    )
    code, out, _ = run_cli(
        ["gate", str(k), "--workload", str(EXAMPLES / "row_sum"), "--json"], monkeypatch, capsys
    )
    docs = json.loads(out)
    assert code == 1
    assert isinstance(docs, list) and len(docs) == 1  # one shape, one kernel or many
    assert docs[0]["category"] == "parse_error" and f"{k}:1:" in docs[0]["message"]


def test_gate_missing_launcher_is_a_rejection(tmp_path: Path, monkeypatch, capsys) -> None:
    k = tmp_path / "k.cu"
    k.write_text("__global__ void k(float* y) { y[0] = 1; }\n")
    code, out, _ = run_cli(
        ["gate", str(k), "--workload", str(EXAMPLES / "row_sum"), "--json"], monkeypatch, capsys
    )
    assert code == 1
    assert 'no extern "C" launch' in json.loads(out)[0]["message"]


def test_usage_error(monkeypatch, capsys) -> None:
    code, out, err = run_cli(["gate"], monkeypatch, capsys)
    _one_line_error(code, out, err, "Missing argument")


def test_cuda_backend_without_gpu_is_bad_input(monkeypatch, capsys) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    k = str(EXAMPLES / "row_sum/naive.cu")
    _one_line_error(*run_cli(["gate", k, "--backend", "cuda"], monkeypatch, capsys), "needs a CUDA GPU")


def test_gate_output_to_a_file_is_not_wrapped(tmp_path: Path, monkeypatch, capsys) -> None:
    """stdout is not a terminal: a long message stays one line (no 80-column wrapping)."""
    k = tmp_path / "k.cu"
    k.write_text('extern "C" void launch(const float* x, float* y, int M, int N) {}\n')
    code, out, _ = run_cli(["gate", str(k), "--workload", str(EXAMPLES / "row_sum")], monkeypatch, capsys)
    assert code == 1
    line = next(ln for ln in out.splitlines() if "REJECTED" in ln)
    assert len(line) > 120 and line.rstrip().endswith("cudaStream_t stream))")


def test_skills_import_into_a_foreign_duckdb_is_refused_untouched(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    import duckdb

    from tests.conftest import REPO

    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE skills (who VARCHAR)")
    con.close()
    before = other.read_bytes()
    card = sorted((REPO / "skills_db" / "cards").glob("*.md"))[0]
    _one_line_error(
        *run_cli(["skills", "import", str(card), "--db", str(other)], monkeypatch, capsys), "another tool"
    )
    assert other.read_bytes() == before


def test_skills_list_says_which_skills_are_evidence_only(tmp_path: Path, monkeypatch, capsys) -> None:
    from tests.test_materialize_helpers import scale_skills, skill_store

    skills = scale_skills()
    skills[0] = dataclasses.replace(
        skills[0],
        verification={
            "roundtrips": [{"workload": "scale_test", "ok": False, "message": "apply refused"}] * 4
        },
    )
    db = skill_store(tmp_path / "s.duckdb", skills)
    code, out, _ = run_cli(["skills", "list", "--db", str(db)], monkeypatch, capsys)
    assert code == 0
    assert "0/4 failed" in out  # in the skill's row (the rest of the cell may fold)
    assert "1 skill(s) whose every roundtrip failed are kept as evidence" in out
    assert "No skill admitted in" in out and "klineage heldout" in out
