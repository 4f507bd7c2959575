# Everything the project needs is built from the Go module proxy into the
# git-ignored .cache folder and reused on later runs.
SHELL := /usr/bin/env bash
ROOT := $(CURDIR)
CACHE := $(ROOT)/.cache
BIN := $(CACHE)/bin
TOOLS := $(CACHE)/tools
CONTROLLER_GEN_VERSION := v0.20.1
CONTROLLER_GEN := $(TOOLS)/controller-gen-$(CONTROLLER_GEN_VERSION)
# helm is built from the tools module hack/tools (its own go.mod: helm needs
# newer Kubernetes libraries than the controller), at the version it requires.
HELM_VERSION := $(shell awk '$$1 == "helm.sh/helm/v3" { print $$2 }' hack/tools/go.mod)
HELM := $(TOOLS)/helm-$(HELM_VERSION)
# Helm 4, for the tests of docs/cd-tools.md: its own module hack/tools/helm4.
HELM4_VERSION := $(shell awk '$$1 == "helm.sh/helm/v4" { print $$2 }' hack/tools/helm4/go.mod)
HELM4 := $(TOOLS)/helm-$(HELM4_VERSION)
GO_TEST_FLAGS ?=
# The version and revision stamped into the manager (`manager --version`, its
# first log line, the image's labels): a tag if HEAD has one, "-dirty" with
# uncommitted changes. `make release VERSION=v0.x.y` sets it.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
MANAGER_LDFLAGS = -X main.version=$(VERSION) -X main.revision=$(REVISION)

.PHONY: all
all: bins

##@ Main commands

.PHONY: demo
demo: kube-bins bins ## Start the local environment and the controller, and show two rollouts (Ctrl-C stops)
	@hack/demo.sh

.PHONY: demo-abort
demo-abort: kube-bins bins ## The same environment: v3 fails a share of its workflows, the analysis aborts it at the first step and traffic goes back to v2 (Ctrl-C stops)
	@DEMO_STORY=abort hack/demo.sh

.PHONY: demo-autoscaling
demo-autoscaling: kube-bins bins ## The same environment, and an HPA per version scaling it on its own Temporal backlog (Ctrl-C stops)
	@DEMO_STORY=autoscaling hack/demo.sh

.PHONY: test
# test/incluster runs the image under runc on this machine: only its own
# platform is built (the other would cost a cold cross-compile of minutes).
# test/helm builds helm 3 and 4 itself (make helm) while the other packages
# run: about 3 CPU-minutes on a cold cache that no longer come first.
# go test runs TEST_PACKAGES packages at a time (the cores) in the order
# given: the longest first (test/integration, 4 tests at once: its
# parallel_test.go), so that the short ones fill the other slot instead of
# ending the run. Three at once was measured slower: integration took 1,137 s
# instead of 864, chaos and helm half as long again (docs/performance.md,
# "The test suite").
TEST_FIRST := ./test/integration ./test/chaos ./test/helm ./test/soak
TEST_PACKAGES ?= 2
test: IMAGE_PLATFORMS = linux/$(shell go env GOARCH)
test: kube-bins bins image runc promtool chromium vet verify-generated ## Run every test: unit, integration (real control plane, Temporal, workers)
	go test $(GO_TEST_FLAGS) -p $(TEST_PACKAGES) -timeout 60m $(TEST_FIRST) ./...
	cd dev/cmd/devenv && go test $(GO_TEST_FLAGS) -timeout 10m ./...

.PHONY: test-quick
test-quick: ## The inner loop (under 2 minutes warm): unit tests and a few seconds of each planner fuzz target; make test stays the whole suite
	@hack/test-quick.sh

# The full soak: SOAK_DURATION of rollouts, controller restarts and live
# workflows, then the checks; a two-minute smoke of it runs in `make test`.
SOAK_DURATION ?= 20m
SOAK_SEED ?= 0
SOAK_TIMEOUT ?= 2h

.PHONY: soak
soak: kube-bins bins ## Soak the controller under live workflows for SOAK_DURATION (20m) and check nothing was lost (SOAK_SEED reproduces a run; docs/reliability.md#soak)
	go test ./test/soak -run 'TestSoak$$' -v -count=1 -timeout $(SOAK_TIMEOUT) -soak.duration=$(SOAK_DURATION) -soak.seed=$(SOAK_SEED)

# The full chaos run: at least 50 controller kills, leader failovers and the
# fault scenarios; CHAOS_SEED replays a run (0 picks one and prints it). A
# two-minute smoke of it runs in `make test`.
CHAOS_SEED ?= 0
CHAOS_TIMEOUT ?= 90m

.PHONY: chaos
chaos: kube-bins bins ## Kill, freeze and fault the controller during rollouts and check nothing was lost (CHAOS_SEED reproduces a run; result in .cache/chaos; docs/reliability.md)
	go test ./test/chaos -v -count=1 -timeout $(CHAOS_TIMEOUT) -chaos.full -chaos.seed=$(CHAOS_SEED)

.PHONY: bench
bench: kube-bins bins ## Benchmark reaction time, Temporal load and scale against the local environment (BENCH_N=100; see docs/performance.md)
	go run ./dev/bench $(BENCH_FLAGS)

.PHONY: fuzz
fuzz: ## Fuzz the planner, the webhook's rules, owned-resource rendering and build IDs: FUZZ_EXECS (150000) runs of each target, not in `make test` (docs/reliability.md#fuzzing)
	@hack/fuzz.sh

##@ Building

.PHONY: kube-bins
kube-bins: ## Build etcd, kube-apiserver, kube-controller-manager and kubectl into .cache/kube
	@hack/build-kube.sh

.PHONY: bins
bins: ## Build the project's binaries into .cache/bin
	@mkdir -p $(BIN)
	@echo ">> Building demo-worker, manager and demo (the first build takes a few minutes on 2 cores)"
	go build -o $(BIN)/ ./dev/cmd/demo-worker ./dev/cmd/demo
	go build -ldflags "$(MANAGER_LDFLAGS)" -o $(BIN)/ ./cmd/manager
	@echo ">> Building devenv (links the Temporal server: several minutes on a cold cache)"
	cd dev/cmd/devenv && go build -o $(BIN)/devenv .
	go build -o $(BIN)/ ./cmd/kubectl-rainbow

# `make image` names the image after VERSION and stamps every time in it with
# SOURCE_DATE_EPOCH, the commit's time unless set: the same commit gives the
# same digest.
IMAGE_VERSION ?= $(VERSION)
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64

.PHONY: image
image: ## Build the manager's image (linux/amd64 and linux/arm64) as an OCI image layout into .cache/image/oci
	@echo ">> Building the manager for $(IMAGE_PLATFORMS) (each platform compiles everything once on a cold cache: minutes on 2 cores)"
	SOURCE_DATE_EPOCH=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null)} go run ./dev/image --out $(CACHE)/image/oci \
	  --version $(IMAGE_VERSION) --revision $(REVISION) --platforms $(IMAGE_PLATFORMS)

# `make release VERSION=v0.x.y` writes into DIST: the image as an OCI archive
# for RELEASE_PLATFORMS, both charts packaged as VERSION, the CRDs as one
# file, an SBOM per platform and SHA256SUMS (docs/release.md).
DIST ?= $(ROOT)/dist
RELEASE_PLATFORMS ?= linux/amd64,linux/arm64

.PHONY: release
release: | $(HELM) ## Build release VERSION (v0.x.y) into DIST (dist/): image archive, charts, CRDs, SBOMs, checksums (docs/release.md)
	@VERSION=$(VERSION) REVISION=$(REVISION) DIST=$(abspath $(DIST)) HELM=$(HELM) PLATFORMS=$(RELEASE_PLATFORMS) hack/release.sh

.PHONY: vet
vet: ## go vet both modules and check formatting
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	cd dev/cmd/devenv && go vet ./...

.PHONY: verify-generated
verify-generated: $(CONTROLLER_GEN) ## Check that the committed CRDs, deepcopy code and RBAC role match the sources
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	deepcopy=api/v1alpha1/zz_generated.deepcopy.go; cp "$$deepcopy" "$$tmp/deepcopy.go"; \
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...; \
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true paths=./api/... output:crd:artifacts:config="$$tmp/crd"; \
	$(CONTROLLER_GEN) rbac:roleName=rainbow-manager paths=./internal/... output:rbac:artifacts:config="$$tmp/rbac"; \
	stale=; \
	cmp -s "$$tmp/deepcopy.go" "$$deepcopy" || { stale="$$stale $$deepcopy"; cp "$$tmp/deepcopy.go" "$$deepcopy"; }; \
	diff -r "$$tmp/crd" config/crd/bases >/dev/null || stale="$$stale config/crd/bases"; \
	diff "$$tmp/rbac/role.yaml" config/rbac/role.yaml >/dev/null || stale="$$stale config/rbac/role.yaml"; \
	diff -r config/crd/bases charts/rainbow-crds/files/crds >/dev/null || stale="$$stale charts/rainbow-crds/files/crds"; \
	cmp -s config/crd/deletion-policy.yaml charts/rainbow-crds/files/deletion-policy.yaml || stale="$$stale charts/rainbow-crds/files/deletion-policy.yaml"; \
	cmp -s config/rbac/role.yaml charts/rainbow/files/role.yaml || stale="$$stale charts/rainbow/files/role.yaml"; \
	if [ -n "$$stale" ]; then echo "stale generated files:$$stale; run 'make generate' and commit them"; exit 1; fi

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code, CRD manifests from api/ and the RBAC role from internal/, and copy them into the Helm charts
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=rainbow-manager paths=./internal/... output:rbac:artifacts:config=config/rbac
	@# The charts render these copies (.Files.Get): Helm only reads files inside a chart.
	rm -rf charts/rainbow-crds/files/crds && mkdir -p charts/rainbow-crds/files/crds charts/rainbow/files
	cp config/crd/bases/*.yaml charts/rainbow-crds/files/crds/
	cp config/crd/deletion-policy.yaml charts/rainbow-crds/files/deletion-policy.yaml
	cp config/rbac/role.yaml charts/rainbow/files/role.yaml

$(CONTROLLER_GEN):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(TOOLS)/controller-gen $@

.PHONY: helm
helm: $(HELM) $(HELM4) ## Build helm 3 and helm 4 from Go modules into .cache/tools

# The version stamps are those of helm's own Makefile: lint and template
# assume the Kubernetes minor of the client-go helm links.
$(HELM): hack/tools/go.mod hack/tools/go.sum
	@mkdir -p $(TOOLS)
	@echo ">> Building helm $(HELM_VERSION) from Go modules (hack/tools; about 2 CPU-minutes on a cold cache)"
	cd hack/tools && kminor=$$(go list -m -f '{{.Version}}' k8s.io/client-go | cut -d. -f2) && \
	  go build -trimpath -o $@ -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$$kminor \
	    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$$kminor" \
	  helm.sh/helm/v3/cmd/helm

$(HELM4): hack/tools/helm4/go.mod hack/tools/helm4/go.sum
	@mkdir -p $(TOOLS)
	@echo ">> Building helm $(HELM4_VERSION) from Go modules (hack/tools/helm4; about 1 CPU-minute after helm 3: they share their dependencies' versions)"
	cd hack/tools/helm4 && go build -trimpath -o $@ -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$(HELM4_VERSION) \
	    -X helm.sh/helm/v4/internal/version.metadata=" helm.sh/helm/v4/cmd/helm

# test/incluster runs the image under runc (docs/local-environment.md#images-under-runc).
.PHONY: runc
runc: ## Install the OCI runtime runc from the distribution's packages (apt-get) if it is missing
	@command -v runc >/dev/null || test -x /usr/sbin/runc || { echo ">> Installing runc: apt-get install -y runc"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runc; }

# test/observability checks and unit-tests the alerting rules with promtool,
# from Debian's prometheus package. Its service must not start: where no
# policy-rc.d exists, one refusing starts is in place during the install
# (invoke-rc.d and deb-systemd-invoke obey it; without systemd nothing else
# starts it), and where systemd runs the unit is disabled.
.PHONY: promtool
promtool: ## Install promtool from the distribution's prometheus package (apt-get) if it is missing, without starting Prometheus
	@command -v promtool >/dev/null || { echo ">> Installing promtool: apt-get install -y prometheus (its service is not started)"; \
	  made=; if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && made=1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; rc=$$?; \
	  [ -z "$$made" ] || rm -f /usr/sbin/policy-rc.d; \
	  if [ -d /run/systemd/system ]; then systemctl disable --now prometheus >/dev/null 2>&1 || true; fi; exit $$rc; }

# The dashboard's browser test drives Chromium's headless shell (docs/dashboard.md#tests).
.PHONY: chromium
chromium: ## Install Chromium's headless shell from the distribution's packages (apt-get) if it is missing
	@command -v chromium-headless-shell >/dev/null || command -v chromium >/dev/null || { echo ">> Installing Chromium: apt-get install -y chromium-headless-shell"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium-headless-shell; }

##@ Local environment

.PHONY: dev-env
dev-env: kube-bins bins ## Run the local environment in the foreground (state in .dev/)
	$(BIN)/devenv --dir .dev --kube-bin-dir $(CACHE)/kube --program-dir $(BIN)

.PHONY: run
run: bins ## Run the controller against the local environment started by `make dev-env` (RUN_ARGS: more flags)
	$(CACHE)/kube/kubectl --kubeconfig .dev/kubeconfig apply --server-side -k config/crd
	$(CACHE)/kube/kubectl --kubeconfig .dev/kubeconfig apply --server-side -k dev/webhook
	$(BIN)/manager --kubeconfig .dev/kubeconfig --metrics-bind-address 127.0.0.1:8080 --health-probe-bind-address 127.0.0.1:8081 \
	  --webhook-host 127.0.0.1 --webhook-port 9443 --webhook-cert-dir .dev/webhook-certs \
	  --webhook-cert-rotation --webhook-write-certs --webhook-dns-name localhost \
	  --webhook-secret rainbow-system/rainbow-webhook-cert --webhook-configuration-name rainbow-validating-webhook --zap-devel $(RUN_ARGS)

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-12s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
