# Outflow — run `make help` for the targets.

SHELL        := /bin/bash
GO           ?= go
PYTHON       ?= python3
VENV         := .venv
STATICCHECK  := honnef.co/go/tools/cmd/staticcheck@v0.8.2
BIN          := bin

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(VENV)/.installed: requirements-tools.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-tools.txt
	touch $@

.PHONY: venv
venv: $(VENV)/.installed ## Install the pinned Python tools (moto server) into .venv.

.PHONY: test
test: venv ## Run every test: unit tests and integration tests against a moto server the tests start.
	$(GO) test -count=1 -race ./...

.PHONY: lint
lint: ## gofmt, go vet and staticcheck.
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

.PHONY: build
build: ## Build the CLI for this machine.
	$(GO) build -o $(BIN)/outflow ./cmd/outflow

.PHONY: clean
clean: ## Remove build output (keeps .venv).
	rm -rf $(BIN)
