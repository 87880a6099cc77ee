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
TOOLS         := $(ETCD_BINARY) $(KUBE_BINARIES)
# The Kubernetes version pinned in the tools module, stamped into the binaries so that
# /version and the apiserver's compatibility version report it (a plain `go build`
# would report v0.0.0-master).
KUBE_VERSION  := $(shell grep -oE 'k8s.io/kubernetes v[0-9]+\.[0-9]+\.[0-9]+' hack/tools/kube/go.mod | cut -d' ' -f2)
KUBE_MINOR    := $(word 2,$(subst ., ,$(KUBE_VERSION)))
KUBE_LDFLAGS  := -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(KUBE_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=$(KUBE_MINOR) -X $(p).gitTreeState=clean)

# The openMCP compatibility test: its own module (openMCP's libraries stay out of ours).
COMPAT := test/openmcp-compat

# Generated files whose staleness `verify-generate` detects.
GENERATED = find api $(COMPAT)/api -name 'zz_generated.deepcopy.go' -o -path '*/api/crds/manifests/*.yaml' | sort

TEST_FLAGS ?= -count=1 -timeout=30m

##@ General

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
		/^[a-zA-Z0-9_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } \
		/^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Generate deepcopy code and CRD manifests from the API types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	rm -f api/crds/manifests/*.yaml
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=api/crds/manifests
	cd $(COMPAT) && $(CONTROLLER_GEN) object:headerFile=$(ROOT)/hack/boilerplate.go.txt paths=./api/... && \
		rm -f api/crds/manifests/*.yaml && \
		$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=api/crds/manifests

.PHONY: manifests
manifests: generate ## Alias of generate (CRDs are generated with the deepcopy code).

.PHONY: verify-generate
verify-generate: ## Fail when `make generate` would change a generated file.
	@before=$$($(GENERATED) | xargs sha256sum); \
	$(MAKE) --no-print-directory generate >/dev/null; \
	after=$$($(GENERATED) | xargs sha256sum); \
	if [ "$$before" != "$$after" ]; then \
		echo "generated files were stale; 'make generate' has now updated them:"; \
		diff <(echo "$$before") <(echo "$$after") || true; exit 1; \
	fi; echo "generated files are current"

.PHONY: lint
lint: ## go vet and gofmt.
	$(GO) vet ./...
	cd $(COMPAT) && $(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

.PHONY: build
build: ## Build every binary (cmd/* and the sample provider) into bin/.
	$(GO) build -o $(BIN)/ $(addprefix ./,$(wildcard cmd/*)) ./providers/sample/cmd/sample

##@ Test

.PHONY: test
test: tools verify-generate lint ## Build the API-server binaries if missing, then run all tests against real API servers.
	KUBEBUILDER_ASSETS=$(BIN) $(GO) test $(TEST_FLAGS) ./...
	$(MAKE) --no-print-directory test-compat

.PHONY: test-compat
test-compat: tools ## The openMCP compatibility test alone: a provider built on openMCP's libraries, deployed unchanged (part of test).
	cd $(COMPAT) && KUBEBUILDER_ASSETS=$(BIN) $(GO) test $(TEST_FLAGS) ./...

.PHONY: test-e2e
test-e2e: tools build ## Run the landscape and the README quick start end to end (about 2 minutes).
	$(GO) test -tags e2e -count=1 -timeout 20m -v ./test/e2e/

.PHONY: bench
bench: tools ## Benchmarks under bench/ (each prints its figures).
	KUBEBUILDER_ASSETS=$(BIN) $(GO) run ./bench/broker
	KUBEBUILDER_ASSETS=$(BIN) $(GO) run ./bench/provisioning
	$(GO) run ./bench/render

##@ Run

.PHONY: run
run: tools build ## Start the local landscape in the background (stop it with bin/marketplane landscape down).
	$(BIN)/marketplane landscape up

##@ Tools

.PHONY: tools
tools: $(TOOLS) ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl into bin/ (skipped when current).

$(ETCD_BINARY): hack/tools/etcd/go.mod hack/tools/etcd/go.sum
	@mkdir -p $(BIN)
	@echo "building etcd from the Go module proxy (first time only)..."
	cd hack/tools/etcd && $(GO) build -ldflags "-s -w" -o $(BIN)/etcd go.etcd.io/etcd/server/v3
	@touch $@

$(KUBE_BINARIES) &: hack/tools/kube/go.mod hack/tools/kube/go.sum
	@mkdir -p $(BIN)
	@echo "building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl from the Go module proxy (first time about 5 minutes)..."
	cd hack/tools/kube && $(GO) build -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/ k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
	@touch $(KUBE_BINARIES)
	@$(BIN)/kube-apiserver --version | grep -qx 'Kubernetes $(KUBE_VERSION)' || { echo "bin/kube-apiserver does not report $(KUBE_VERSION)"; exit 1; }

.PHONY: clean
clean: ## Remove built binaries.
	rm -rf $(BIN)
