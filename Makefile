# krabka-dispatch. `make test` installs and starts every service the tests
# need (a three-broker Kafka cluster, Mosquitto), runs every test with the race
# detector, and stops the services again.

GO ?= go
STATICCHECK_VERSION := v0.8.2

.PHONY: test test-unit lint fmt deps cluster-start cluster-stop

test:
	bash scripts/test.sh

# test-unit runs the tests that need no service.
test-unit:
	$(GO) test -race ./...

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags integration ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags integration ./...

fmt:
	gofmt -w .

deps:
	bash scripts/deps.sh
