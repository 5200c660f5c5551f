# Two commands matter: `make run` (the main job, offline) and `make test` (every test).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
E2E_STAMP := tests/e2e/thirdparty/node_modules/.installed-stamp
RAY_STAMP := $(VENV)/.ray-stamp
CONFORMANCE_STAMP := tests/e2e/conformance/node_modules/.installed-stamp

.PHONY: setup run test bench lint e2e-deps ray-deps conformance-deps clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# Ray, an optional extra: the tests and benchmarks of `--executor ray` need it, `make run` does not.
ray-deps: $(RAY_STAMP)

$(RAY_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[dev,ray]'
	touch $(RAY_STAMP)

# Third-party MCP servers from npm for the end-to-end tests (installed locally, pinned by the lock file).
e2e-deps: $(E2E_STAMP)

$(E2E_STAMP): tests/e2e/thirdparty/package.json tests/e2e/thirdparty/package-lock.json
	cd tests/e2e/thirdparty && npm ci --no-audit --no-fund --loglevel=error
	touch $(E2E_STAMP)

# The MCP conformance suite and the node packages its reference server (used from
# ../shared/thirdparty, never copied here) needs, pinned by the lock file (SPEC H3).
conformance-deps: $(CONFORMANCE_STAMP)

$(CONFORMANCE_STAMP): tests/e2e/conformance/package.json tests/e2e/conformance/package-lock.json
	cd tests/e2e/conformance && npm ci --no-audit --no-fund --loglevel=error
	touch $(CONFORMANCE_STAMP)

run: setup
	$(BIN)/agent-harness run experiments/example.yaml --db reports/runs.duckdb
	$(BIN)/agent-harness report --db reports/runs.duckdb --experiment example -o reports/example.html

test: setup ray-deps e2e-deps conformance-deps
	$(BIN)/pytest -q

bench: setup ray-deps
	$(BIN)/python bench/judge.py
	$(BIN)/python bench/proxy_overhead.py
	$(BIN)/python bench/proxy_startup.py
	$(BIN)/python bench/http_overhead.py
	$(BIN)/python bench/runner.py
	$(BIN)/python bench/analysis.py
	$(BIN)/python bench/on_ray.py

lint: setup
	$(BIN)/ruff check harness runner tests bench

clean:
	rm -rf $(VENV) tests/e2e/thirdparty/node_modules tests/e2e/conformance/node_modules .pytest_cache
