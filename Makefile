# Marketplane build entry points. `make help` lists them.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT := $(abspath .)
BIN  := $(ROOT)/bin
GO   ?= go

# Pinned generator: run through `go run` from the module proxy, never a downloaded binary.
CONTROLLER_GEN := $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.21.0

# Binaries the tests and the landscape run, built from source by the tools modules.
KUBE_BINARIES := $(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kube-scheduler $(BIN)/kubectl
ETCD_BINARY   := $(BIN)/etcd
# kwok simulates the nodes and pods of the landscape's workload cluster; its stages (node
# initialisation and heartbeat, the "general" pod lifecycle) are taken from the pinned
# kwok module's own stage configurations into bin/kwok-stages.yaml.
KWOK_BINARY   := $(BIN)/kwok
KWOK_STAGES   := $(BIN)/kwok-stages.yaml
# kcp serves the landscape's MCPs as workspaces with `--mcp-backend kcp`; a module of its
# own (hack/tools/kcp), since it builds on kcp's forks of the Kubernetes libraries.
KCP_BINARY    := $(BIN)/kcp
TOOLS         := $(ETCD_BINARY) $(KUBE_BINARIES) $(KWOK_BINARY) $(KWOK_STAGES) $(KCP_BINARY)
# The linter, built from the version pinned in hack/tools/lint (not part of `tools`:
# only `lint` needs it).
GOLANGCI_LINT := $(BIN)/golangci-lint
# Builds binaries with one go build and shows how far each one is (hack/buildprogress).
BUILDPROGRESS := $(BIN)/buildprogress
# The Kubernetes version pinned in the tools module, stamped into the binaries so that
# /version and the apiserver's compatibility version report it (a plain `go build`
# would report v0.0.0-master).
KUBE_VERSION  := $(shell grep -oE 'k8s.io/kubernetes v[0-9]+\.[0-9]+\.[0-9]+' hack/tools/cluster/go.mod | cut -d' ' -f2)
KUBE_MINOR    := $(word 2,$(subst ., ,$(KUBE_VERSION)))
KUBE_LDFLAGS  := -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(KUBE_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=$(KUBE_MINOR) -X $(p).gitTreeState=clean)

# The openMCP compatibility test: its own module (openMCP's libraries stay out of ours).
COMPAT := test/openmcp-compat

# The provider runtime's test API: generated like api/, its CRDs kept apart in its crds/
# so that they never reach api/crds (and a real installation).
TESTAPI := pkg/spruntime/internal/testapi

# Generated files whose staleness `verify-generate` detects.
GENERATED = { find api $(COMPAT)/api $(TESTAPI) -name 'zz_generated.deepcopy.go' -o -path '*/api/crds/manifests/*.yaml' -o -path '$(TESTAPI)/crds/*.yaml'; \
	find charts/marketplane/crds config -name '*.yaml' 2>/dev/null || true; } | sort

TEST_FLAGS ?= -count=1 -timeout=30m
# `make test` runs the tests with hack/testrun rather than `go test`: it takes go test's
# flags (TEST_FLAGS: -run, -skip, -v, -short, -count, -timeout, -failfast, -race, -tags, ...)
# but keeps the linked test binaries in TESTBIN, so that a package that did not change
# is not linked again on the next run.
TESTRUN := $(BIN)/testrun
TESTBIN := $(BIN)/testbin
# Test packages run at once. The tests mostly wait on API servers, controllers and
# processes (a full run keeps two cores about half busy), so more packages than cores
# overlap those waits; the openMCP compatibility module runs alongside them.
TEST_PACKAGES ?= 4
# The README quick start (test/e2e) runs as a user runs it, with kubectl, whose TLS
# handshake gives up after 10 s: beside the other packages' thirty API servers (load
# average 50-100 on 2 cores) its landscape's API servers took longer. Every other test
# binary runs at this niceness, so that the quick start's processes come first.
TEST_NICE ?= 10
# The packages that take longest, given first: go test starts packages in the order
# given, so these start at once and the run does not end with one of them alone on
# the machine (longest first). Every other package follows in the order of ./... .
# A package missing here, or no longer slow, costs time, not correctness.
TEST_FIRST := ./test/e2e ./internal/landscape ./internal/interoperator ./pkg/validation \
	./internal/broker ./internal/scaffold ./test/install ./pkg/testenv ./internal/operator/provider \
	./bench/provisioning ./providers/sample/test/e2e ./providers/sample/internal/controller

##@ General

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
		/^[a-zA-Z0-9_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } \
		/^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Generate deepcopy code and CRD manifests from the API types (hack/crdbounds then bounds every quantity).
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	rm -f api/crds/manifests/*.yaml
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=api/crds/manifests
	$(GO) run ./hack/crdbounds api/crds/manifests
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./$(TESTAPI)/...
	rm -f $(TESTAPI)/crds/*.yaml
	$(CONTROLLER_GEN) crd paths=./$(TESTAPI)/... output:crd:artifacts:config=$(TESTAPI)/crds
	cd $(COMPAT) && $(CONTROLLER_GEN) object:headerFile=$(ROOT)/hack/boilerplate.go.txt paths=./api/... && \
		rm -f api/crds/manifests/*.yaml && \
		$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=api/crds/manifests

.PHONY: manifests
manifests: generate ## generate, then the chart's crds/ and the plain manifests under config/ (hack/manifests).
	$(GO) run ./hack/manifests

.PHONY: verify-generate
verify-generate: ## Fail when `make manifests` (generate included) would change a generated file.
	@before=$$($(GENERATED) | xargs sha256sum); \
	$(MAKE) --no-print-directory manifests >/dev/null; \
	after=$$($(GENERATED) | xargs sha256sum); \
	if [ "$$before" != "$$after" ]; then \
		echo "generated files were stale; 'make manifests' has now updated them:"; \
		diff <(echo "$$before") <(echo "$$after") || true; exit 1; \
	fi; echo "generated files are current"

.PHONY: lint
lint: $(GOLANGCI_LINT) ## go vet, gofmt and golangci-lint (.golangci.yml).
	$(GO) vet ./...
	cd $(COMPAT) && $(GO) vet ./...
	@out=$$(find . -name '*.go' -not -path './bin/*' -not -path './.*' -not -path '*/testdata/*' -print0 | xargs -0 gofmt -l); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GOLANGCI_LINT) run ./...
	cd $(COMPAT) && $(GOLANGCI_LINT) run --config $(ROOT)/.golangci.yml ./...

.PHONY: build
build: | $(BUILDPROGRESS) ## Build every binary (cmd/* and the sample provider) into bin/, showing per binary how far it is.
	@GO=$(GO) $(BUILDPROGRESS) -o $(BIN) $(addprefix ./,$(wildcard cmd/*)) ./providers/sample/cmd/sample

##@ Test

.PHONY: test
test: test-unit tools chromium verify-generate lint ## Build the API-server binaries if missing, then run all tests against real API servers (the README quick start and the openMCP compatibility test included).
	@$(GO) build -o $(TESTRUN) ./hack/testrun
	@compat_log=$$(mktemp); status=0; \
	(cd $(COMPAT) && KUBEBUILDER_ASSETS=$(BIN) $(TESTRUN) -bindir $(TESTBIN)/openmcp-compat -nice $(TEST_NICE) $(TEST_FLAGS) ./... >"$$compat_log" 2>&1) & compat=$$!; \
	KUBEBUILDER_ASSETS=$(BIN) $(TESTRUN) -bindir $(TESTBIN)/main -nice $(TEST_NICE) -favor ./test/e2e $(TEST_FLAGS) -p $(TEST_PACKAGES) $(TEST_FIRST) ./... || status=$$?; \
	wait $$compat || status=$$((status == 0 ? 1 : status)); \
	echo "openMCP compatibility test ($(COMPAT)), run alongside:"; cat "$$compat_log"; rm -f "$$compat_log"; \
	exit $$status

.PHONY: test-under-load
test-under-load: ## `make test` three times in a row while one busy loop per core keeps the machine loaded (how flakes of a loaded CI machine are found).
	@busy=""; for _ in $$(seq $$(nproc)); do (while :; do :; done) & busy="$$busy $$!"; done; \
	trap 'kill $$busy' EXIT; \
	for run in 1 2 3; do \
		echo "=== make test, run $$run of 3, under load ($$(nproc) busy loops)"; \
		start=$$(date +%s); $(MAKE) --no-print-directory test; \
		echo "=== run $$run passed in $$(( $$(date +%s) - start )) s"; \
	done

.PHONY: test-unit
test-unit: ## Only the pure unit tests (-short): no API servers, no processes, no bin/ needed; `make test` runs them first, so a unit failure reports in about two minutes.
	@$(GO) build -o $(TESTRUN) ./hack/testrun
	$(TESTRUN) -bindir $(TESTBIN)/main -short -count=1 -timeout=10m -p $(TEST_PACKAGES) $(TEST_FIRST) ./...
	cd $(COMPAT) && $(TESTRUN) -bindir $(TESTBIN)/openmcp-compat -short -count=1 -timeout=10m ./...

.PHONY: test-compat
test-compat: tools ## The openMCP compatibility test alone: a provider built on openMCP's libraries, deployed unchanged (part of test).
	cd $(COMPAT) && KUBEBUILDER_ASSETS=$(BIN) $(GO) test $(TEST_FLAGS) ./...

.PHONY: test-e2e
test-e2e: tools ## The end-to-end tests, verbose: the README quick start on its own landscape, and the validation flow of the sample provider (marketplane validate and its own e2e test), the inter-operator, a freshly scaffolded provider and the openMCP compatibility provider (part of test).
	KUBEBUILDER_ASSETS=$(BIN) $(GO) test -count=1 -timeout 20m -v -run '^(TestQuickStart|TestValidate.*|TestScaffoldedProjectBuildsAndPasses)$$' ./test/e2e/ ./providers/sample/test/e2e/ ./internal/scaffold/
	cd $(COMPAT) && KUBEBUILDER_ASSETS=$(BIN) $(GO) test -count=1 -timeout 20m -v -run '^TestValidate$$' .

# Fuzz targets (package:function) and the budget of each in `make fuzz`.
FUZZ_TARGETS := ./internal/broker:FuzzBroker ./internal/render:FuzzRender ./pkg/kubeconfig:FuzzParse ./api/common:FuzzDurationPattern ./api/common:FuzzQuantityBound
FUZZTIME ?= 60s

.PHONY: fuzz
fuzz: ## Each fuzz target for FUZZTIME (60s): OSB bodies, template rendering, kubeconfig parsing, the duration pattern, the quantity bound. A failure writes its input under the package's testdata/fuzz (commit it with the fix); `make test` replays the checked-in corpora.
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "=== $$fn ($$pkg) for $(FUZZTIME)"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) || exit 1; \
	done; echo "=== every fuzz target ran $(FUZZTIME) without a failure"

.PHONY: bench
bench: tools ## Benchmarks under bench/ (each prints its figures).
	KUBEBUILDER_ASSETS=$(BIN) $(GO) run ./bench/broker
	KUBEBUILDER_ASSETS=$(BIN) $(GO) run ./bench/provisioning
	KUBEBUILDER_ASSETS=$(BIN) $(GO) run ./bench/apicost
	KUBEBUILDER_ASSETS=$(BIN) $(GO) run ./bench/console
	$(GO) run ./bench/render

.PHONY: bench-under-load
bench-under-load: tools ## The provisioning benchmark while 2 busy loops load the machine (-load 2); each phase prints the load average at its start and end.
	KUBEBUILDER_ASSETS=$(BIN) $(GO) run ./bench/provisioning -load 2

.PHONY: failover
failover: tools build ## Two inter-operator replicas, then two operator replicas, each on a landscape of its own; the leader is killed with SIGKILL while 500 instances are provisioned: prints succeeded / 500, duplicate resources (target 0) and the takeover time (target ≤ 15 s).
	$(GO) run ./bench/failover -bin $(BIN) -n 500 -victim interoperator
	$(GO) run ./bench/failover -bin $(BIN) -n 500 -victim operator

.PHONY: chaos
chaos: tools build ## On a landscape of its own, kills each of etcd, the kube-apiservers, the broker, the operator's leader, the inter-operator and the sample provider with SIGKILL during a run of 100 instances: prints per victim succeeded / 100, duplicates, missing objects and recovery times.
	$(GO) run ./bench/chaos -bin $(BIN) -n 100

.PHONY: bench-mcp
# MCPs bench-mcp creates at once: BENCH_MCP_N with a kube-apiserver each, BENCH_MCP_KCP_N as kcp workspaces.
BENCH_MCP_N     ?= 20
BENCH_MCP_KCP_N ?= 500
bench-mcp: tools build ## On a landscape of its own per backend, creates ManagedControlPlanes at once: 20 with a kube-apiserver each (targets: all Ready ≤ 60 s, ≤ 150 MiB per MCP), then 500 as kcp workspaces (≤ 120 s, ≤ 10 MiB); prints the time until all are Ready, the landscape's memory before and after and per MCP, the process count; then deletes them and checks that their processes and workspaces are gone.
	$(GO) run ./bench/mcps -bin $(BIN) -backend both -n $(BENCH_MCP_N) -kcp-n $(BENCH_MCP_KCP_N)

.PHONY: bench-multicluster
bench-multicluster: tools ## The provisioning benchmark over 3 workload API servers and 20 SFClusters (least-filled), with the single-cluster load phase first for the ratio.
	KUBEBUILDER_ASSETS=$(BIN) $(GO) run ./bench/provisioning -clusters 3 -registered 20 -n 1000 -scheduler least-filled -compare-single

##@ Run

.PHONY: run
# MCP_BACKEND=kcp serves the landscape's MCPs as workspaces of one kcp; only then does
# `make run` build kcp (the default backend, a kube-apiserver per MCP, does not need it).
MCP_BACKEND ?= apiserver
RUN_TOOLS := $(filter-out $(if $(filter kcp,$(MCP_BACKEND)),,$(KCP_BINARY)),$(TOOLS))
run: $(RUN_TOOLS) build ## Start the local landscape in the background (stop it with bin/marketplane landscape down); MCP_BACKEND=kcp serves MCPs as kcp workspaces.
	$(BIN)/marketplane landscape up --mcp-backend $(MCP_BACKEND)

##@ Release

# The release's stamps (docs/release.md): the version tag (between tags `git describe`'s
# description of the commit), the commit, and its commit time, not the clock, so that
# building the same commit again gives the same bytes.
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null)
REVISION   ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_DATE ?= $(shell git log -1 --format=%cI 2>/dev/null)
DIST       := $(ROOT)/dist
# The released binaries (directories under cmd/) and platforms; hack/release's tests
# check that the binaries are every directory under cmd/ and match the Dockerfile.
RELEASE_BINARIES  := marketplane marketplane-operator marketplane-interoperator marketplane-marketplace marketplane-broker marketplane-kcp-provider
RELEASE_PLATFORMS := linux/amd64 linux/arm64
# The container engine of `make image` (docker, podman or buildah: anything that builds
# a Dockerfile with --build-arg and --target), the repository prefix and tag of the images
# (IMAGE_REPO/<binary>:IMAGE_TAG; the chart's default image is
# <global.imageRegistry>/marketplane/<binary>:<appVersion>, a version without the "v"),
# and extra flags (--platform linux/arm64, --push with buildx, ...).
CONTAINER_TOOL ?= docker
IMAGE_REPO     ?= registry.example.com/marketplane
IMAGE_TAG      ?= $(patsubst v%,%,$(VERSION))
IMAGE_FLAGS    ?=
comma := ,
empty :=
space := $(empty) $(empty)

.PHONY: release
release: ## Build the release binaries (cmd/*) for linux/amd64 and linux/arm64 into dist/<name>-<os>-<arch>, static and reproducible, stamped with VERSION, REVISION and BUILD_DATE (default from git), and their checksums into dist/SHA256SUMS.
	rm -rf $(DIST)
	$(GO) run ./hack/release -out $(DIST) -binaries '$(subst $(space),$(comma),$(RELEASE_BINARIES))' \
		-platforms '$(subst $(space),$(comma),$(RELEASE_PLATFORMS))' \
		-version '$(VERSION)' -revision '$(REVISION)' -build-date '$(BUILD_DATE)'

.PHONY: image
image: ## Build one container image per release binary from the Dockerfile with CONTAINER_TOOL (docker; podman or buildah work too), tagged IMAGE_REPO/<binary>:IMAGE_TAG (VERSION without its "v"). Needs a running container engine (this development machine has only a docker client without a daemon).
	@command -v $(CONTAINER_TOOL) >/dev/null || { echo "$(CONTAINER_TOOL) not found: make image needs a container engine (CONTAINER_TOOL=docker, podman or buildah)"; exit 1; }
	for b in $(RELEASE_BINARIES); do \
		$(CONTAINER_TOOL) build $(IMAGE_FLAGS) --target "$$b" --build-arg BINARY="$$b" \
			--build-arg VERSION='$(VERSION)' --build-arg REVISION='$(REVISION)' --build-arg BUILD_DATE='$(BUILD_DATE)' \
			-t '$(IMAGE_REPO)'/"$$b":'$(IMAGE_TAG)' . ; \
	done

##@ Tools

.PHONY: tools
tools: $(TOOLS) ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok and kcp into bin/ (skipped when current).

# etcd, the Kubernetes binaries and kwok come from one tools module and one go build
# (hack/buildprogress: it shows per binary how many of its packages are compiled, and how
# long the build has run): one dependency graph, so each shared package is compiled once,
# and its versions are the main module's wherever both need a module (hack/toolsmod
# checks), so `make build` reuses those packages. Measured first-run costs: README.
$(ETCD_BINARY) $(KUBE_BINARIES) $(KWOK_BINARY) $(KWOK_STAGES) &: hack/tools/cluster/go.mod hack/tools/cluster/go.sum | $(BUILDPROGRESS)
	@echo "building etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok from the Go module proxy (first time only; see the README for how long)..."
	cd hack/tools/cluster && GO=$(GO) $(BUILDPROGRESS) -o $(BIN) -ldflags "$(KUBE_LDFLAGS)" \
		etcd=go.etcd.io/etcd/server/v3 $(addprefix k8s.io/kubernetes/cmd/,$(notdir $(KUBE_BINARIES))) sigs.k8s.io/kwok/cmd/kwok
	dir=$$(cd hack/tools/cluster && $(GO) list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage; \
	for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
		$(addprefix pod/general/pod-,create.yaml init-container-running.yaml init-container-completed.yaml ready.yaml complete.yaml delete.yaml); do \
		echo "---"; echo "# $$f of sigs.k8s.io/kwok"; cat "$$dir/$$f"; \
	done >$(KWOK_STAGES).tmp && mv $(KWOK_STAGES).tmp $(KWOK_STAGES)
	@touch $(ETCD_BINARY) $(KUBE_BINARIES) $(KWOK_BINARY) $(KWOK_STAGES)
	@$(BIN)/kube-apiserver --version | grep -qx 'Kubernetes $(KUBE_VERSION)' || { echo "bin/kube-apiserver does not report $(KUBE_VERSION)"; exit 1; }

# kcp v0.28.0 with its own replace list onto its Kubernetes 1.32.3 forks. The checksum
# database does not know the forks' pseudo-versions; go.sum, committed, pins every module.
# /version reports the Kubernetes version it serves, as kcp's own release builds do.
KCP_KUBE_VERSION := v1.32.3
KCP_LDFLAGS := -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(KCP_KUBE_VERSION)+kcp-$(shell grep -oE 'github.com/kcp-dev/kcp v[0-9.]+' hack/tools/kcp/go.mod | cut -d' ' -f2) \
	-X $(p).gitMajor=1 -X $(p).gitMinor=32 -X $(p).gitTreeState=clean)
$(KCP_BINARY): hack/tools/kcp/go.mod hack/tools/kcp/go.sum | $(BUILDPROGRESS)
	@echo "building kcp from the Go module proxy (first time only; see the README for how long)..."
	cd hack/tools/kcp && GONOSUMDB=github.com/kcp-dev GO=$(GO) $(BUILDPROGRESS) -o $(BIN) -ldflags "$(KCP_LDFLAGS)" github.com/kcp-dev/kcp/cmd/kcp
	@touch $(KCP_BINARY)

# Rebuilt when its code changes; the binaries it built are not rebuilt for that.
$(BUILDPROGRESS): $(wildcard hack/buildprogress/*.go)
	@mkdir -p $(BIN)
	@$(GO) build -o $@ ./hack/buildprogress

# Debian's chromium for the console's browser tests (internal/console), unpacked into bin/
# without installing it: the packages `apt-get install --simulate` would add (the closure
# missing on this machine, without recommends) are fetched with `apt-get download` and
# extracted with `dpkg -x` into bin/chromium-root; bin/chromium runs the browser with
# their libraries. Root uses the system's package lists (`apt-get update` when they are
# empty); any other user gets lists of its own under bin/apt, which `apt-get update` fills
# without root (its own state directories, no lock). Skipped while bin/chromium was made
# for apt's current candidate version.
CHROMIUM      := $(BIN)/chromium
CHROMIUM_ROOT := $(BIN)/chromium-root
ifeq ($(shell id -u),0)
APT_LISTS := /var/lib/apt/lists
APT_OPTS  :=
else
APT_LISTS := $(BIN)/apt/lists
APT_OPTS  := -o Dir::State::Lists=$(APT_LISTS) -o Dir::State::status=/var/lib/dpkg/status -o Dir::Cache=$(BIN)/apt/cache -o Debug::NoLocking=1
endif

.PHONY: chromium
chromium: ## Unpack Debian's chromium and the libraries this machine lacks into bin/chromium-root, with the wrapper bin/chromium (skipped when current).
	@mkdir -p $(APT_LISTS)/partial $(BIN)/apt/cache/archives/partial 2>/dev/null || true
	@ls $(APT_LISTS)/*_Packages* >/dev/null 2>&1 || apt-get $(APT_OPTS) update -qq
	@want=$$(apt-cache $(APT_OPTS) policy chromium | awk '/Candidate:/ {print $$2}'); \
	if [ -z "$$want" ] || [ "$$want" = "(none)" ]; then echo "apt knows no chromium package"; exit 1; fi; \
	if [ -x $(CHROMIUM) ] && [ "$$(cat $(CHROMIUM_ROOT)/.version 2>/dev/null)" = "$$want" ]; then exit 0; fi; \
	echo "unpacking chromium $$want and its missing libraries into $(CHROMIUM_ROOT) (first time about a minute)..."; \
	debs=$$(mktemp -d); chmod 755 "$$debs"; trap 'rm -rf "$$debs"' EXIT; \
	pkgs=$$(apt-get $(APT_OPTS) install --simulate --no-install-recommends chromium | awk '/^Inst / {print $$2}'); \
	(cd "$$debs" && apt-get $(APT_OPTS) download -qq $$pkgs chromium); \
	rm -rf $(CHROMIUM_ROOT) && mkdir -p $(CHROMIUM_ROOT); \
	for deb in "$$debs"/*.deb; do dpkg -x "$$deb" $(CHROMIUM_ROOT); done; \
	printf '%s\n' \
		'#!/bin/sh' \
		'# Written by `make chromium`: Debian'"'"'s chromium from chromium-root, with its libraries.' \
		'root=$$(dirname "$$(readlink -f "$$0")")/chromium-root' \
		'libs=$$root/usr/lib/chromium; for d in "$$root"/usr/lib/*-linux-gnu "$$root"/usr/lib/*-linux-gnu/*/; do libs=$$libs:$$d; done' \
		'export LD_LIBRARY_PATH="$$libs$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH}"' \
		'export XDG_DATA_DIRS="$$root/usr/share:$${XDG_DATA_DIRS:-/usr/local/share:/usr/share}"' \
		'exec "$$root/usr/lib/chromium/chromium" "$$@"' >$(CHROMIUM).tmp; \
	chmod +x $(CHROMIUM).tmp && mv $(CHROMIUM).tmp $(CHROMIUM); \
	echo "$$want" >$(CHROMIUM_ROOT)/.version; \
	$(CHROMIUM) --headless --no-sandbox --disable-gpu --dump-dom about:blank >/dev/null 2>&1 || { echo "bin/chromium does not start"; exit 1; }; \
	$(CHROMIUM) --version

.PHONY: screenshots
screenshots: tools chromium ## Write a PNG of every console page into docs/console/: TestBrowser and TestPlatformSignIn walk them in headless Chromium against a real API server, checking each page's status and text.
	KUBEBUILDER_ASSETS=$(BIN) CONSOLE_SCREENSHOTS=1 $(GO) test -count=1 -run '^(TestBrowser|TestPlatformSignIn)$$' ./internal/console/

$(GOLANGCI_LINT): hack/tools/lint/go.mod hack/tools/lint/go.sum
	@mkdir -p $(BIN)
	@echo "building golangci-lint from the Go module proxy (first time about 3 minutes)..."
	cd hack/tools/lint && $(GO) build -o $(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	@touch $@

.PHONY: clean
clean: ## Remove built binaries.
	rm -rf $(BIN)
