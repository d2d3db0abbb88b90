# Outflow — run `make help` for the targets.

SHELL        := /bin/bash
# The repository root, wherever make runs from: sam build runs the
# build-<LogicalId> targets in a scratch copy of the function's CodeUri.
ROOT         := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
GO           ?= go
PYTHON       ?= python3
VENV         := .venv
STATICCHECK  := honnef.co/go/tools/cmd/staticcheck@v0.8.2
BIN          := bin
TOOLS        := $(abspath $(BIN)/tools)
RIE_VERSION  := v0.0.0-20261030222936-bef5c4ba774d
FUNCTIONS    := sweep wake
# Small static binaries: no cgo, no symbol table, no RPC mode (provided.al2023
# speaks the runtime API only).
GOBUILD      := CGO_ENABLED=0 $(GO) build -trimpath -ldflags=-s -tags lambda.norpc
export SAM_CLI_TELEMETRY := 0
# The commit and its time, for outflow version: Go's own VCS stamp is off
# where GOFLAGS has -buildvcs=false (as on some CI machines), so make cli
# sets them as a release build does (.goreleaser.yaml).
VERSION_PKG     := github.com/outflowhq/outflow/internal/version
VERSION_LDFLAGS := -X $(VERSION_PKG).Commit=$(shell git rev-parse HEAD 2>/dev/null) -X $(VERSION_PKG).Date=$(shell git log -1 --format=%cI 2>/dev/null)

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# Two steps, so that `make run` installs only what the demo needs: the moto
# server (about 320 MB), then for tests, lint and packaging aws-sam-cli and
# shellcheck besides (about 420 MB in all).
$(VENV)/.moto: requirements-moto.txt
	@echo "installing the moto server into $(VENV) (first run only: one to a few minutes)..."
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --progress-bar off --disable-pip-version-check -r requirements-moto.txt
	touch $@

$(VENV)/.installed: $(VENV)/.moto requirements-tools.txt
	@echo "installing aws-sam-cli and shellcheck into $(VENV) (first time only)..."
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-tools.txt
	touch $@

.PHONY: venv venv-moto
venv: $(VENV)/.installed ## Install the pinned Python tools (moto server, aws-sam-cli, shellcheck) into .venv.

venv-moto: $(VENV)/.moto ## Install only the pinned moto server into .venv: what make run, outflow moto and outflow local need.

$(TOOLS)/aws-lambda-rie:
	GOBIN=$(TOOLS) $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)

.PHONY: tools
tools: $(TOOLS)/aws-lambda-rie ## Install the pinned Lambda Runtime Interface Emulator into bin/tools.

# The console's browser tests (internal/console) drive a real headless
# Chromium and fail without one: say so before a long run, not after it.
CHROMIUM := $(firstword $(foreach b,chromium chromium-browser google-chrome google-chrome-stable,$(shell command -v $(b) 2>/dev/null)))

.PHONY: chromium
chromium: ## Check that Chromium is installed (the console's browser tests need it; Debian: apt-get install -y chromium).
	@test -n "$(CHROMIUM)" || { echo "no Chromium found: the console's browser tests (internal/console) drive a real headless Chromium."; \
		echo "Install it once, as root: apt-get update && apt-get install -y chromium   (.ci/run does this)"; exit 1; }

.PHONY: test
test: venv tools chromium python-test typescript-test ## Run every test: unit tests, integration tests against a moto server the tests start, the console in headless Chromium, the Python and TypeScript packages'; ends with the ten slowest tests and packages.
	$(GO) build -o $(BIN)/slowest ./cmd/slowest
	set -o pipefail; $(GO) test -json -count=1 -race -timeout 30m ./... | $(BIN)/slowest

PYVENV := python/.venv

$(PYVENV)/.installed: python/pyproject.toml python/requirements-test.txt
	$(PYTHON) -m venv $(PYVENV)
	$(PYVENV)/bin/pip install --quiet --disable-pip-version-check -r python/requirements-test.txt -e ./python
	touch $@

.PHONY: python-test
python-test: $(VENV)/.moto $(PYVENV)/.installed ## The Python package (python/): mypy --strict, and its tests against the shared conformance vectors and the patched moto server.
	cd python && .venv/bin/mypy --strict src tests
	OUTFLOW_REQUIRE_MOTO=1 $(PYVENV)/bin/python -m pytest -q python/tests

typescript/node_modules/.installed: typescript/package.json typescript/package-lock.json
	cd typescript && npm ci --no-audit --no-fund --loglevel=error
	touch $@

.PHONY: typescript-test
typescript-test: $(VENV)/.moto typescript/node_modules/.installed ## The TypeScript package (typescript/): tsc --strict, and its tests against the shared conformance vectors and the patched moto server.
	cd typescript && npx tsc -p . --noEmit --strict && OUTFLOW_REQUIRE_MOTO=1 npm test --silent

.PHONY: screenshot
screenshot: $(VENV)/.moto chromium ## Retake docs/console.png, the console screenshot the README shows (a test fails until it is retaken after the pages change).
	OUTFLOW_SCREENSHOT=1 $(GO) test -count=1 -run '^TestBrowser_TheREADMEScreenshotIsOfTheCurrentPages$$' ./internal/console

.PHONY: bench
bench: venv tools ## Measure throughput, requests and WCU per message, memory, init, latency, refused writes, cost, and simulate capacity; writes docs/benchmarks.md, docs/capacity.md and docs/cost.md.
	$(GO) run ./cmd/outflow-bench -out docs

.PHONY: bench-operators
bench-operators: venv ## Measure outflow stats, dead list, dead redrive --all and purge at 10,000 dead letters (requests, time, peak RSS); writes docs/capacity-operators.md, which capacity.md includes.
	$(GO) run ./cmd/outflow-bench -only operators -out docs

SOAK_ROWS ?= 20000
SOAK_MODE ?= concurrent

.PHONY: soak
soak: soak-outbox soak-e2e ## Both long soaks: Outflow's own (soak-outbox) and the end-to-end one (soak-e2e).

.PHONY: soak-outbox
soak-outbox: venv ## The long soak: SOAK_ROWS rows (20000) under random faults; prints and saves its report (SOAK_SEED= runs a seed; SOAK_MODE=scheduled replays one exactly).
	OUTFLOW_SOAK_ROWS=$(SOAK_ROWS) OUTFLOW_SOAK_SEED=$(SOAK_SEED) OUTFLOW_SOAK_REPORT=$(abspath docs/soak-report.txt) \
		$(GO) test -count=1 -run '^TestSoak_InvariantsHoldUnderFaults$$/^$(SOAK_MODE)$$' -timeout 90m -v ./internal/outbox

.PHONY: soak-e2e
soak-e2e: venv ## The end-to-end soak: SOAK_ROWS transfers (20000) from the producer's transaction through Outflow to a consumer's ledger (package consume), under faults; saves docs/soak-e2e-report.txt (SOAK_SEED= runs a seed).
	OUTFLOW_E2E_ROWS=$(SOAK_ROWS) OUTFLOW_E2E_SEED=$(SOAK_SEED) OUTFLOW_E2E_REPORT=$(abspath docs/soak-e2e-report.txt) \
		$(GO) test -count=1 -run '^TestSoak_EveryTransferIsAppliedOnceAndInOrder$$' -timeout 120m -v ./internal/e2e

SOAK_RUNS ?= 20

.PHONY: soak-repeat
soak-repeat: venv ## The short soak (500 rows) SOAK_RUNS times (20) in a row, fresh seeds; fails if any run fails.
	scripts/soak-repeat.sh $(SOAK_RUNS)

.PHONY: lint
lint: venv $(TOOLS)/actionlint ## gofmt, go vet (also the LocalStack e2e), staticcheck, no require or t.Fatal off a test's goroutine, shellcheck, actionlint on the workflows, and no binary or file over 1 MiB tracked.
	.ci/tracked-files
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags localstack ./localstack/...
	$(GO) run $(STATICCHECK) ./...
	# require and t.Fatal off the test's goroutine, in the forms vet and staticcheck miss
	$(GO) test -count=1 -run '^TestRepository_NoTestStopsFromAnotherGoroutine$$' ./internal/hygiene
	$(VENV)/bin/shellcheck localstack/*.sh scripts/*.sh .ci/run .ci/tracked-files
	$(TOOLS)/actionlint -shellcheck $(VENV)/bin/shellcheck

# checkov has its own virtualenv: its pinned dependencies are not
# aws-sam-cli's, and one resolver cannot satisfy both.
CHECKOV_VENV    := .venv-checkov

$(CHECKOV_VENV)/.installed: requirements-checkov.txt
	rm -rf $(CHECKOV_VENV)
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-checkov.txt
	touch $@

.PHONY: checkov
checkov: venv $(CHECKOV_VENV)/.installed ## Scan template.yaml and its SAM translation with the pinned checkov, offline; fails on any finding not suppressed.
	scripts/checkov.sh $(CHECKOV_VENV)/bin/checkov $(VENV)/bin/python template.yaml

.PHONY: run
run: $(VENV)/.moto ## Run Outflow end to end on this machine (moto, template-provisioned table and queues, sweep, wake, demo).
	$(GO) run ./cmd/outflow local $(ARGS)

.PHONY: cli
cli: ## Build the CLI alone (bin/outflow), in seconds once the build cache is warm: no Lambda cross-compiling. outflow version names the commit.
	$(GO) build -trimpath -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/outflow ./cmd/outflow

.PHONY: build
build: cli ## Build the CLI (bin/outflow) and both bootstraps for linux/arm64 (deploy) and this machine (local --rie).
	@for f in $(FUNCTIONS); do \
		GOOS=linux GOARCH=arm64 $(GOBUILD) -o $(BIN)/arm64/$$f/bootstrap ./functions/$$f && \
		$(GOBUILD) -o $(BIN)/host/$$f/bootstrap ./functions/$$f || exit 1; \
	done
	@ls -l $(BIN)/arm64/*/bootstrap $(BIN)/host/*/bootstrap

.PHONY: validate
validate: venv ## Lint the SAM template with sam validate --lint.
	$(VENV)/bin/sam validate --lint --region us-east-1

.PHONY: sam-build
sam-build: venv ## sam build (plain sam build does the same: the template builds with the targets below).
	$(VENV)/bin/sam build

# template.yaml builds each function with BuildMethod makefile, so plain
# `sam build` runs these with ARTIFACTS_DIR set: the same static linux/arm64
# bootstrap as make build, whatever the host (cgo off even on an arm64 host
# with a C compiler, where it would otherwise link the host's glibc).
.PHONY: build-SweepFunction build-WakeFunction
build-SweepFunction: ## (for sam build) The sweep bootstrap into $ARTIFACTS_DIR.
	cd $(ROOT) && GOOS=linux GOARCH=arm64 $(GOBUILD) -o "$(ARTIFACTS_DIR)/bootstrap" ./functions/sweep
build-WakeFunction: ## (for sam build) The wake bootstrap into $ARTIFACTS_DIR.
	cd $(ROOT) && GOOS=linux GOARCH=arm64 $(GOBUILD) -o "$(ARTIFACTS_DIR)/bootstrap" ./functions/wake

$(VENV)/.localstack: $(VENV)/.installed localstack/requirements.txt
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r localstack/requirements.txt
	touch $@

.PHONY: localstack-tools
localstack-tools: $(VENV)/.localstack ## Install samlocal into .venv.

.PHONY: localstack-up
localstack-up: ## Start LocalStack (needs Docker and LOCALSTACK_AUTH_TOKEN).
	localstack/up.sh

.PHONY: localstack-deploy
localstack-deploy: localstack-tools ## Build and deploy template.yaml to LocalStack with samlocal.
	localstack/deploy.sh

.PHONY: localstack-test
localstack-test: venv ## Run the suites and the deployed-stack e2e test against LocalStack.
	localstack/test.sh

# Release tools: modules of their own (Go tool directives), so an application
# that imports Outflow never downloads them; built into bin/tools. actionlint
# has its own (tools/actionlint): it needs an earlier go.yaml.in/yaml/v4
# than goreleaser's, whose API it no longer builds against.
$(TOOLS)/goreleaser: tools/go.mod tools/go.sum
	cd tools && $(GO) build -o $@ github.com/goreleaser/goreleaser/v2

$(TOOLS)/actionlint: tools/actionlint/go.mod tools/actionlint/go.sum
	cd tools/actionlint && $(GO) build -o $@ github.com/rhysd/actionlint/cmd/actionlint

.PHONY: release-tools
release-tools: $(TOOLS)/goreleaser $(TOOLS)/actionlint ## Build the pinned goreleaser (tools/go.mod) and actionlint (tools/actionlint/go.mod) into bin/tools.

.PHONY: release-go
release-go: $(TOOLS)/goreleaser $(VENV)/.moto ## goreleaser check, a snapshot release into dist/go (nothing published), then check its archives: all there, the CLI runs (outflow moto and outflow local too, from the unpacked archive alone), each bootstrap zip is one arm64 ELF.
	scripts/release-go.sh $(TOOLS)/goreleaser

# The Python release tools (build, twine) have their own virtualenv: pinned
# in python/requirements-release.txt, apart from the package's test tools.
RELEASE_VENV := .venv-release

$(RELEASE_VENV)/.installed: python/requirements-release.txt
	rm -rf $(RELEASE_VENV)
	$(PYTHON) -m venv $(RELEASE_VENV)
	$(RELEASE_VENV)/bin/pip install --quiet --disable-pip-version-check -r python/requirements-release.txt
	touch $@

.PHONY: release-python
release-python: $(VENV)/.moto $(RELEASE_VENV)/.installed ## The Python wheel and sdist into dist/python (python -m build), twine check --strict, their contents checked; then the wheel installed in a fresh virtualenv outside the checkout runs the README's examples on moto.
	scripts/release-python.sh $(RELEASE_VENV)/bin/python
	scripts/artifact-test-python.sh dist/python

.PHONY: release-typescript
release-typescript: $(VENV)/.moto ## The npm tarball into dist/typescript (npm pack), publint and attw on it, its file list checked; then installed in a fresh npm project outside the checkout, it runs the README's examples on moto.
	scripts/release-typescript.sh

.PHONY: release-check
release-check: validate release-go release-python release-typescript $(TOOLS)/actionlint ## Every release artifact built, checked and installed from itself: goreleaser check and a snapshot, the wheel and sdist, the npm tarball, each installed outside the checkout running its README's examples on moto; actionlint on the workflows and sam validate --lint on the template. .ci/run runs it.
	$(TOOLS)/actionlint -shellcheck $(VENV)/bin/shellcheck
	scripts/release-tag-check.sh v$$($(GO) run ./cmd/outflow version --output json | $(PYTHON) -c 'import json,sys; print(json.load(sys.stdin)["version"])')

.PHONY: clean
clean: ## Remove build output (keeps .venv and bin/tools).
	rm -rf $(BIN)/arm64 $(BIN)/host .aws-sam
