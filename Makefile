# krabka-dispatch. `make test` installs and starts every service the tests
# need (a three-broker Kafka cluster, Mosquitto, headless Chromium), runs every
# test with the race detector, runs a two-minute chaos soak, and stops the
# services again.

GO ?= go
STATICCHECK_VERSION := v0.8.2
# DURATION is the length of a chaos run (make chaos DURATION=30m).
DURATION ?= 2m
# FUZZTIME is the budget of each fuzz target (make fuzz FUZZTIME=2m).
FUZZTIME ?= 30s

# VERSION, COMMIT and COMMIT_TIME are stamped into the binary by make release;
# RELEASE_OUT is where it goes.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
COMMIT_TIME ?= $(shell git show -s --format=%cI HEAD 2>/dev/null)
RELEASE_OUT ?= bin/dispatcher
# BENCH_MODULE is the module of the benchmarks and their report: its own, so
# that plotting stays out of the library's module graph. ./... of the main
# module stops at its go.mod; every target that covers all the code covers it
# too.
BENCH_MODULE := test/bench

.PHONY: test test-unit lint fmt deps release bench bench-quick bench-history chaos sim fuzz cluster-start cluster-stop

test:
	bash scripts/test.sh

# test-unit runs the tests that need no service.
test-unit:
	$(GO) test -race ./...
	cd $(BENCH_MODULE) && $(GO) test -race ./...

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags integration ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags integration ./...
	cd $(BENCH_MODULE) && $(GO) vet ./... && $(GO) vet -tags integration ./...
	cd $(BENCH_MODULE) && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd $(BENCH_MODULE) && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags integration ./...

fmt:
	gofmt -w .

deps:
	bash scripts/deps.sh

# release builds a static dispatcher binary with its version and commit
# stamped; `dispatcher version` prints them.
release:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.commitTime=$(COMMIT_TIME)" -o $(RELEASE_OUT) ./cmd/dispatcher

# bench measures every performance claim against a ceiling of the same run
# and rewrites docs/PERFORMANCE.md with its plots (about forty minutes);
# bench-quick runs the same sections with fewer repetitions and trials
# (about eight minutes).
bench:
	bash scripts/bench.sh

bench-quick:
	bash scripts/bench.sh -quick

# bench-history measures the "Cost against history" section alone.
bench-history:
	bash scripts/bench.sh -history-only

# chaos runs dispatcher members in network namespaces for DURATION under
# network cuts, process and broker faults, clock skew, slow devices and
# operator actions, then proves the dispatch guarantees from the devices'
# records, the lease records and the log. It needs root.
chaos:
	DURATION=$(DURATION) bash scripts/chaos.sh

# sim runs SEEDS seeds of the deterministic simulator and writes .run/sim-report.md.
SEEDS ?= 100000
sim:
	go run ./test/sim/cmd/sim -seeds $(SEEDS) -report .run/sim-report.md

fuzz:
	FUZZTIME=$(FUZZTIME) bash scripts/fuzz.sh

cluster-start:
	bash scripts/deps.sh
	bash scripts/services/10-kafka.sh start

cluster-stop:
	bash scripts/services/10-kafka.sh stop 0
