"""The CLI contract: exit codes, one clear error line on bad input, --json is one document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from klineage.cli import main
from tests.conftest import EXAMPLES


def run_cli(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
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
    assert err.strip() == "error: LLM provider failed: anthropic API refused the request (claude-x): " \
                          "AuthenticationError 401: [bad key]"


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
    _one_line_error(*run_cli(["gate", "nope.cu", "--workload", str(EXAMPLES / "row_sum")], monkeypatch, capsys), "nope.cu: no such file")


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
    k.write_text('__global__ void k(float* y) { y[0] = ; }\nextern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t s) {}\n')
    code, out, _ = run_cli(["gate", str(k), "--workload", str(EXAMPLES / "row_sum"), "--json"], monkeypatch, capsys)
    doc = json.loads(out)
    assert code == 1
    assert doc["category"] == "parse_error" and f"{k}:1:" in doc["message"]


def test_gate_missing_launcher_is_a_rejection(tmp_path: Path, monkeypatch, capsys) -> None:
    k = tmp_path / "k.cu"
    k.write_text("__global__ void k(float* y) { y[0] = 1; }\n")
    code, out, _ = run_cli(["gate", str(k), "--workload", str(EXAMPLES / "row_sum"), "--json"], monkeypatch, capsys)
    assert code == 1
    assert 'no extern "C" launch' in json.loads(out)["message"]


def test_usage_error(monkeypatch, capsys) -> None:
    code, out, err = run_cli(["gate"], monkeypatch, capsys)
    _one_line_error(code, out, err, "Missing argument")


def test_cuda_backend_without_gpu_is_bad_input(monkeypatch, capsys) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    k = str(EXAMPLES / "row_sum/naive.cu")
    _one_line_error(*run_cli(["gate", k, "--backend", "cuda"], monkeypatch, capsys), "needs a CUDA GPU")
