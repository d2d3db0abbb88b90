# Outflow — run `make help` for the targets.

SHELL        := /bin/bash
GO           ?= go
PYTHON       ?= python3
VENV         := .venv
MOTO_VERSION := 5.2.5
STATICCHECK  := honnef.co/go/tools/cmd/staticcheck@2025.1.1
BIN          := bin

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(VENV)/.installed: Makefile
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check 'moto[server]==$(MOTO_VERSION)'
	touch $@

.PHONY: venv
venv: $(VENV)/.installed ## Install the pinned moto server into the project virtualenv (.venv).

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
