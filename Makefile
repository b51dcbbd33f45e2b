# The README's two commands: `make run` and `make test`. Each bootstraps .venv from scratch when missing.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.klineage-installed
# `klineage timings bench` runs over `klineage timings export` states (oldest first: a later one wins)
TIMINGS := $(sort $(wildcard benchmarks/results/*-states/*.json))

.PHONY: run test lint venv clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# Pin the CPU wheel: an unpinned torch pulls several GB of CUDA wheels.
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/klineage doctor
	$(VENV)/bin/klineage gate examples/*/naive.cu examples/*/expert.cu
	$(VENV)/bin/klineage mine expert_kernels --db skills_db/skills.duckdb
	# GPU times of the lineage states, measured on the H200 apart from the CPU gate: the skills' effects
	$(VENV)/bin/klineage timings import $(TIMINGS) --db skills_db/skills.duckdb
	$(VENV)/bin/klineage skills export --db skills_db/skills.duckdb --out skills_db
	$(VENV)/bin/klineage skills list --db skills_db/skills.duckdb
	$(VENV)/bin/klineage report --db skills_db/skills.duckdb --out skills_db/report.html

test: $(STAMP)
	$(PY) -m pytest -q -n 2

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) .klineage build dist *.egg-info
