# agent-wait: every target sets up what it needs from nothing (a venv in .venv/, npm deps in node_modules/).
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NPM_STAMP := node_modules/.installed
# jsii prints a Node 20 end-of-life banner that no JSII_SILENCE_* variable silences.
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)
# Bytecode is cached (in the ignored __pycache__ folders) whatever the shell says: pytest keeps its
# rewritten test and plugin modules there, and without it every process of a run (each xdist worker,
# moto server, local stack and CLI call) compiles them again, about 5 s per pytest process.
unexport PYTHONDONTWRITEBYTECODE

# pip's output goes to .venv/pip.log; the terminal gets one line per step, a count of the packages
# pip has resolved (every 25) and, while pip says nothing (building, installing), a line every 30 s,
# so a first setup of a few minutes is never silent. The log's tail is shown when the install fails.
PIP_INSTALL = $(BIN)/python -m pip install --progress-bar off
PIP_PROGRESS = awk '/^(Collecting|Processing) /{n++; if (n % 25 == 0) {printf "    %d packages resolved\n", n; fflush()}} \
	/^Installing collected packages/{printf "    %d packages resolved; installing them\n", n; fflush()} \
	/^Successfully installed/{print "    installed"; fflush()}'
PIP_FAILED = { grep -v '^WARNING: Location' $(VENV)/pip.log | tail -40; echo "setup failed (log: $(VENV)/pip.log)"; exit 1; }
# pytest-xdist: one worker per core and one more, because many tests spend part of their time
# waiting (on a local stack, a subprocess, a retry's backoff) and the extra worker uses it; tests
# sharing a synthesized app or a local stack stay together (the grouping is in tests/conftest.py).
# JOBS=1 runs in one process.
JOBS ?= $(shell $(PYTHON) -c 'import os; print((os.cpu_count() or 1) + 1)')
PYTEST = $(BIN)/pytest -n $(JOBS) --dist loadgroup
# The unit tests never wait (in process, no I/O): one worker per core is quicker for them, unless
# JOBS is given.
UNIT_JOBS = $(if $(filter command line environment,$(origin JOBS)),$(JOBS),auto)

$(STAMP): pyproject.toml
	@echo "==> setting up .venv (first run, or pyproject.toml changed: a few minutes)"
	@test -x $(BIN)/python || { echo "  1/3 creating the virtual environment ($(PYTHON) -m venv $(VENV))"; $(PYTHON) -m venv $(VENV); }
	@echo "  2/3 upgrading pip"
	@$(PIP_INSTALL) --quiet --upgrade pip > $(VENV)/pip.log 2>&1 || $(PIP_FAILED)
	@echo "  3/3 installing agent-wait and its dev dependencies (pip's log: $(VENV)/pip.log)"
	@beat() { while sleep 30 > /dev/null; do echo "    still installing ($$SECONDS s)"; done; }; beat & trap "kill $$! 2>/dev/null" EXIT; \
		PYTHONUNBUFFERED=1 $(PIP_INSTALL) -e '.[dev]' 2>&1 | tee -a $(VENV)/pip.log | $(PIP_PROGRESS) || $(PIP_FAILED)
	@touch $(STAMP)
	@echo "==> .venv ready"

$(NPM_STAMP): package.json package-lock.json
	@echo "==> installing the pinned aws-cdk CLI (npm ci)"
	npm ci --no-audit --no-fund --loglevel=error
	@touch $(NPM_STAMP)

.PHONY: setup
setup: $(STAMP) $(NPM_STAMP) ## Create .venv and install Python and npm dependencies

.PHONY: demo
demo: $(STAMP) ## Run the sample refund agent end to end on the local stack (moto on 127.0.0.1)
	$(BIN)/python -m examples.demo

.PHONY: local
local: $(STAMP) ## Start the local stack: moto server, api on http://127.0.0.1:8787 and the runner (ARGS="--port 9000 ...")
	$(BIN)/agent-wait local $(ARGS)

.PHONY: lint
lint: $(STAMP) ## ruff and mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@# One mypy worker per core: a first check (no .mypy_cache yet, as in a fresh clone) takes about
	@# two thirds of the time; a check from the cache takes a second either way.
	$(BIN)/mypy -n auto layers/agent_wait/agent_wait functions cli infra examples stress app.py

.PHONY: format
format: $(STAMP) ## Apply ruff's fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

.PHONY: unit
unit: $(STAMP) ## Unit tests (no network)
	$(BIN)/pytest -n $(UNIT_JOBS) --dist loadgroup tests/unit

.PHONY: integration
integration: $(STAMP) ## Integration tests against moto server on 127.0.0.1
	$(PYTEST) tests/integration

.PHONY: infra-test
infra-test: $(STAMP) $(NPM_STAMP) ## CDK assertions, cdk-nag and cfn-lint on the synthesized template
	$(PYTEST) tests/infra

.PHONY: e2e
e2e: $(STAMP) ## End-to-end tests against the local stack
	$(PYTEST) tests/e2e

.PHONY: test
test: $(STAMP) $(NPM_STAMP) lint ## Set up, lint and run the whole test suite on every core (JOBS=1: one process)
	$(PYTEST)

.PHONY: stress
stress: $(STAMP) ## Races, load, a killed runner, a sink down, faults until the DLQ, schemathesis; prints what held (minutes, not in `make test`)
	$(BIN)/python -m stress $(ARGS)

# A mistake ends the app with one line naming the context key (infra/errors.py); cdk's own "Subprocess
# exited" line after it is dropped, and pipefail keeps cdk's exit status.
CDK_NOISE = -e 'node.js' -e 'jsii' -e '^\s*$$' -e '!!' -e ': Subprocess exited with error'
CDK_SYNTH = npx cdk synth --quiet $(CDK_ARGS) 2>&1 | { grep -v -i $(CDK_NOISE) $(1) || true; }

.PHONY: synth
synth: $(STAMP) $(NPM_STAMP) ## Synthesize the CDK app into cdk.out (offline, no credentials)
	$(call CDK_SYNTH)
	$(BIN)/python -m infra.report cdk.out

.PHONY: deploy
# Synthesized first (a mistake ends there, on one line; deploy's own flags are not synth's), then the
# assembly in cdk.out is deployed.
deploy: $(STAMP) $(NPM_STAMP) ## Deploy the stack into the account of your current AWS credentials
	$(call CDK_SYNTH,-e '^Unknown option')
	npx cdk deploy --app cdk.out $(CDK_ARGS)

.PHONY: destroy
destroy: $(STAMP) $(NPM_STAMP) ## Remove the deployed stack
	npx cdk destroy $(CDK_ARGS)

.PHONY: bench
bench: $(STAMP) ## Speed and size against baselines measured side by side; writes bench/results.md (ARGS="--rounds 16")
	$(BIN)/python -m bench $(ARGS)

RATE ?= 1000
.PHONY: capacity
capacity: $(STAMP) ## AWS calls per partition key, queue, route and Scheduler action at RATE questions/s against quotas; cost per million vs Step Functions (RATE=1000)
	$(BIN)/python -m bench.capacity --rate $(RATE) $(ARGS)

.PHONY: clean
clean: ## Remove build outputs (keeps .venv)
	rm -rf cdk.out .pytest_cache .mypy_cache .ruff_cache

.PHONY: help
help: ## Show this help (colours only on a terminal)
	@if [ -t 1 ]; then on=$$'\033[36m'; off=$$'\033[0m'; else on=; off=; fi; \
	grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) \
		| awk -v on="$$on" -v off="$$off" 'BEGIN {FS = ":.*?## "}; {printf "  %s%-12s%s %s\n", on, $$1, off, $$2}'
