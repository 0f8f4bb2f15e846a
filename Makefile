# The single interface: CI calls these targets, and so do people.
SHELL := /bin/bash
UV ?= $(shell command -v uv 2>/dev/null || echo python3 -m uv)
PY := .venv/bin/python
export AWS_EC2_METADATA_DISABLED := true
export POWERTOOLS_TRACE_DISABLED := 1

.PHONY: help install dev test unit integration api lint format typecheck clean
.PHONY: build synth deploy infra-tests bench sandbox-tools

# The CDK CLI (package.json pins it): no telemetry, no version check, no IMDS probing
export CDK_DISABLE_CLI_TELEMETRY := true
export CDK_DISABLE_VERSION_CHECK := 1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 18,20
CDK := npx --no-install cdk
STAGE ?= dev
CDK_ARGS ?=

help:  ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.venv/.installed: pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet uv==0.13.9
	$(UV) sync --frozen --all-extras
	touch $@

install: .venv/.installed  ## create .venv from uv.lock

dev: install web sandbox-tools  ## serve the API and the web app on http://127.0.0.1:$${OPENAGENTS_PORT:-8000}
	.venv/bin/openagents dev

test: install lint web-test sandbox-tools  ## every test tier that needs no AWS account (tests/e2e drives the web app)
	$(PY) -m pytest

unit: install  ## pure tests, no network
	$(PY) -m pytest tests/unit

integration: install  ## store and services against moto's DynamoDB server
	$(PY) -m pytest tests/integration

api: install  ## the API through the Lambda handler and over HTTP
	$(PY) -m pytest tests/api

# What confines local sandboxes (docs/sandboxes.md): installed as root on Debian, else a warning
SANDBOX_TOOLS := bwrap slirp4netns nft mkfs.ext4
SANDBOX_PACKAGES := bubblewrap slirp4netns nftables e2fsprogs iproute2
sandbox-tools:  ## check (root on Debian: install) bubblewrap, slirp4netns, nftables, e2fsprogs
	@missing=""; for tool in $(SANDBOX_TOOLS); do \
	  command -v $$tool >/dev/null 2>&1 || [ -x /usr/sbin/$$tool ] || missing="$$missing $$tool"; \
	done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing$$missing"; apt-get install -y -qq --no-install-recommends $(SANDBOX_PACKAGES) >/dev/null; \
	elif [ -n "$$missing" ]; then \
	  echo "warning: missing$$missing: local sandboxes get less isolation (docs/sandboxes.md)"; \
	fi

lint: install  ## ruff (lint + format check), mypy and the import layers on the whole tree
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy .
	.venv/bin/lint-imports

format: install  ## apply ruff's fixes and formatting
	.venv/bin/ruff check --fix .
	.venv/bin/ruff format .

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

build: install  ## stage Lambda assets in .build/ (deps layer: arm64, Python 3.12) and print sizes
	$(PY) -m infra.build

synth: install node_modules/.installed build  ## cdk synth to cdk.out/ (no AWS credentials needed)
	$(CDK) synth --quiet -c stage=$(STAGE) $(CDK_ARGS)

deploy: install node_modules/.installed build  ## cdk deploy OpenAgents-$(STAGE) (AWS credentials; Docker builds the arm64 sandbox image)
	$(CDK) deploy -c stage=$(STAGE) $(CDK_ARGS)

bench: install  ## benchmarks: a table, and bench/results.json (docs/benchmarks.md; `make bench coldstart`; ARGS="--quick")
	$(PY) -m bench.run $(BENCH_NAMES) $(ARGS)

# `make bench coldstart load`: the words after `bench` name benchmarks, not targets
ifeq (bench,$(firstword $(MAKECMDGOALS)))
BENCH_NAMES := $(wordlist 2,$(words $(MAKECMDGOALS)),$(MAKECMDGOALS))
$(eval $(BENCH_NAMES):;@:)
endif

infra-tests: install  ## CDK assertions, ASL gate, cdk-nag, cfn-lint, least privilege (no AWS, no Docker)
	$(PY) -m pytest tests/infra

# --- web app (web/, docs/web.md): the SPA `make dev` serves and CloudFront hosts ---
.PHONY: web web-test

web/node_modules/.installed: web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund --loglevel=error
	touch $@

web: web/node_modules/.installed  ## build the web app into web/dist (npm ci, then vite build)
	cd web && npm run build

web-test: web  ## the web app's lint (tsc, eslint, prettier) and Vitest tests
	cd web && npm run lint && npm test
# --- end web app ---

clean:  ## remove build and test output (keeps .openagents/ state)
	rm -rf .venv .pytest_cache .mypy_cache .ruff_cache cdk.out .build
